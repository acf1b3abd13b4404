"""Dashboard logins against a plain_acl.yml with ACL on in the broker: an admin account
changes things, a read-only account sees but cannot change, a wrong secret is refused; pages
need a login, and each account's requests reach the broker signed with its own keys. Real
browser, real name server and broker (in process), the dashboard on port 0."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Page, expect

from bolide.dashboard.app import DashboardSettings
from bolide.dashboard.auth import PlainAclAccounts, Role, same_origin
from bolide.dashboard.data import parse_time_ms
from bolide.dashboard.server import DashboardServer
from bolide.testing.cluster import Cluster

pytestmark = pytest.mark.timeout(120)

ACL = """\
globalWhiteRemoteAddresses: []
accounts:
  - accessKey: RocketMQ
    secretKey: "12345678"
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: PUB|SUB
  - accessKey: rocketmq2
    secretKey: "87654321"
    admin: true
"""


@pytest.fixture
async def dashboard(tmp_path: Path) -> AsyncIterator[str]:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    acl_settings = {"aclEnable": "true", "aclFile": str(acl)}
    async with Cluster(tmp_path / "cluster", settings=acl_settings) as cluster:
        settings = DashboardSettings(cluster.namesrv_address, accounts=PlainAclAccounts(acl))
        server = DashboardServer(settings, "127.0.0.1", 0)
        await server.start()
        try:
            yield f"http://{server.address}"
        finally:
            await server.stop()


async def _login(page: Page, url: str, access_key: str, secret_key: str) -> None:
    await page.goto(url + "/topics")
    await expect(page.locator("h1")).to_have_text("Log in")  # redirected: login needed
    await page.fill("input[name=access_key]", access_key)
    await page.fill("input[name=secret_key]", secret_key)
    await page.click("form.stack button")


async def test_admin_changes_read_only_looks(page: Page, dashboard: str) -> None:
    await _login(page, dashboard, "RocketMQ", "wrong")
    await expect(page.locator(".error")).to_contain_text("wrong secret key")

    await _login(page, dashboard, "RocketMQ", "12345678")
    await expect(page.locator("h1")).to_have_text("Topics")  # back where it was going
    await expect(page.locator("header .who")).to_contain_text("RocketMQ (read-only)")
    await expect(page.locator("#create-topic")).to_have_count(0)  # no change forms
    await page.goto(dashboard + "/")  # reads signed with RocketMQ's keys: the broker answers
    await expect(page.locator("#brokers tbody tr").first).to_contain_text("broker-a")
    await expect(page.locator("#brokers")).not_to_contain_text("unavailable")
    token = await page.locator("header input[name=csrf]").get_attribute("value")
    refused = await page.request.post(
        dashboard + "/topics/create",
        form={"topic": "ReadOnlyTry", "queues": "1", "csrf": token or ""},
    )
    assert refused.status == 403
    await page.click("header .who button")  # log out

    await _login(page, dashboard, "rocketmq2", "87654321")
    await expect(page.locator("header .who")).to_contain_text("rocketmq2 (admin)")
    await page.fill("#create-topic input[name=topic]", "AdminMade")
    await page.fill("#create-topic input[name=queues]", "1")
    await page.click("#create-topic button")
    await expect(page.locator(".flash")).to_contain_text("Topic AdminMade created")


def test_accounts_file_roles_and_reload(tmp_path: Path) -> None:
    acl = tmp_path / "plain_acl.yml"
    acl.write_text(ACL)
    accounts = PlainAclAccounts(acl)
    assert accounts.check("rocketmq2", "87654321") is Role.ADMIN
    assert accounts.check("RocketMQ", "12345678") is Role.READ_ONLY
    assert accounts.check("RocketMQ", "nope") is None
    assert accounts.check("nobody", "x") is None
    acl.write_text(ACL.replace("admin: false", "admin: true") + "\n# changed\n")
    assert accounts.check("RocketMQ", "12345678") is Role.ADMIN
    assert PlainAclAccounts(tmp_path / "missing.yml").check("RocketMQ", "12345678") is None


def test_same_origin_and_times() -> None:
    assert same_origin({}, "127.0.0.1:8080")  # no Origin: a same-site form or a tool
    assert same_origin({"origin": "http://127.0.0.1:8080"}, "127.0.0.1:8080")
    assert not same_origin({"origin": "http://evil.example"}, "127.0.0.1:8080")
    assert not same_origin({"origin": "null"}, "127.0.0.1:8080")
    assert not same_origin({"referer": "http://evil.example/x"}, "127.0.0.1:8080")
    now_ms = 1_700_000_000_000
    assert parse_time_ms("now", now_ms) == now_ms
    assert parse_time_ms("10m", now_ms) == now_ms - 600_000
    assert parse_time_ms("1700000000123", now_ms) == 1_700_000_000_123
    assert parse_time_ms("2024-05-01T12:00:00+00:00", now_ms) == 1_714_564_800_000
    with pytest.raises(ValueError, match="is not a time"):
        parse_time_ms("soon", now_ms)


async def test_an_unreachable_name_server_is_an_error_page_not_a_hang(
    page: Page, tmp_path: Path
) -> None:
    del tmp_path
    settings = DashboardSettings("127.0.0.1:1", page_deadline_ms=3_000)  # nothing listens
    server = DashboardServer(settings, "127.0.0.1", 0)
    await server.start()
    try:
        response = await page.goto(f"http://{server.address}/groups")
        assert response is not None and response.status in (502, 504)
        await expect(page.locator("#error-message")).not_to_be_empty()
    finally:
        await server.stop()
