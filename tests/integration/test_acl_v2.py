"""ACL 2.0 (RocketMQ 5.3's users and policies) on a broker over real sockets (issue 29).

Users and ACLs are made with the admin codes 3001-3010 by the Super user the broker creates
from ``initAuthenticationUser``; then every request code of the ACL 1.0 table
(tests/integration/test_acl_table.py) is sent by users whose policies grant or lack what it
needs, and each answer is checked against the expected decision: literal over prefixed, Deny
over Allow, source addresses, the Default policy only when no Custom entry matches, disabled
users, Super users skipping authorization."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bolide.acl.permissions import ADMIN_REQUEST_CODES
from bolide.client.admin import AdminClient
from bolide.protocol.acl_signature import sign_request
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import ClientPool
from bolide.testing.cluster import Cluster
from tests.integration.test_acl_table import EXPECTED, GROUP, SAMPLE_FIELDS, TOPIC, _body

pytestmark = pytest.mark.timeout(300)

R = RequestCode
ROOT = ("root01", "root-secret")
PASSWORD = "user-secret"
REQUEST_TIMEOUT_MS = 10_000

USERS = ["pubUser", "subUser", "nobody1", "offUser", "dfltUser"]
ACLS: dict[str, list[dict[str, object]]] = {
    # a prefix grant with a literal deny inside it
    "pubUser": [
        {"resource": f"Topic:{TOPIC[:4]}*", "actions": ["Pub"], "decision": "Allow"},
        {"resource": "Topic:AclSecret", "actions": ["Pub"], "decision": "Deny"},
    ],
    # every topic for Sub, its group, and a group granted only from another network
    "subUser": [
        {"resource": "Topic:*", "actions": ["Sub"], "decision": "Allow"},
        {"resource": f"Group:{GROUP}", "actions": ["Sub"], "decision": "Allow"},
        {"resource": "Group:farGroup", "actions": ["Sub"], "sourceIps": ["10.0.0.0/8"]},
    ],
}
# topic permission a user holds on TOPIC, and whether it holds GROUP
HOLDS = {"pubUser": ({"PUB"}, False), "subUser": ({"SUB"}, True), "nobody1": (set(), False)}


def _allowed(user: str, topic_need: str | None, group_need: bool) -> bool:
    topics, group = HOLDS[user]
    topic_ok = bool(topics) if topic_need == "ANY" else topic_need in (None, *topics)
    return topic_ok and (group or not group_need)


def _refused(response: RemotingCommand) -> bool:
    remark = response.remark or ""
    return response.code == ResponseCode.NO_PERMISSION and (
        "User:" in remark or "accessKey" in remark
    )


async def _call(
    pool: ClientPool,
    address: str,
    code: int,
    user: tuple[str, str] | None,
    fields: dict[str, str],
    body: bytes = b"",
) -> RemotingCommand:
    request = RemotingCommand.request(code, dict(fields), body)
    if user is not None:
        sign_request(request, *user)
    return await pool.invoke(address, request, REQUEST_TIMEOUT_MS)


async def _admin_ok(
    pool: ClientPool, address: str, code: int, fields: dict[str, str], body: object = None
) -> RemotingCommand:
    data = b"" if body is None else json.dumps(body).encode()
    response = await _call(pool, address, code, ROOT, fields, data)
    assert response.code == ResponseCode.SUCCESS, response.remark
    return response


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    settings = {
        "authenticationEnabled": "true",
        "authorizationEnabled": "true",
        "initAuthenticationUser": json.dumps({"username": ROOT[0], "password": ROOT[1]}),
        "authStoreFile": str(tmp_path / "auth.json"),
    }
    async with Cluster(tmp_path / "cluster", settings=settings) as running:
        async with AdminClient(
            running.namesrv_address, access_key=ROOT[0], secret_key=ROOT[1]
        ) as admin:
            await admin.create_topic(TOPIC, queue_count=1)
        pool = ClientPool()
        address = running.brokers[0].address
        try:
            for name in USERS:
                status = "disable" if name == "offUser" else "enable"
                user = {"username": name, "password": PASSWORD, "userStatus": status}
                await _admin_ok(pool, address, R.AUTH_CREATE_USER, {"username": name}, user)
            for name, entries in ACLS.items():
                subject = f"User:{name}"
                acl = {"subject": subject, "policies": [{"entries": entries}]}
                await _admin_ok(pool, address, R.AUTH_CREATE_ACL, {"subject": subject}, acl)
            default = {
                "subject": "User:dfltUser",
                "policies": [
                    {"policyType": "Custom", "entries": [
                        {"resource": "Topic:Other", "actions": ["Pub"], "decision": "Allow"}]},
                    {"policyType": "Default", "entries": [
                        {"resource": "*", "actions": ["All"], "decision": "Deny"}]},
                ],
            }  # fmt: skip
            await _admin_ok(pool, address, R.AUTH_CREATE_ACL, {"subject": "User:dfltUser"}, default)
        finally:
            await pool.close()
        yield running


async def test_every_code_follows_the_users_policies(cluster: Cluster) -> None:
    broker = cluster.brokers[0]
    served = {code for code in RequestCode if broker._dispatcher.is_registered(code)}
    pool = ClientPool()
    wrong: list[str] = []
    try:
        for code in sorted(served & set(EXPECTED)):
            topic_need, group_need = EXPECTED[code]
            for user in HOLDS:
                response = await _call(
                    pool, broker.address, code, (user, PASSWORD), SAMPLE_FIELDS, _body(code)
                )
                if _refused(response) == _allowed(user, topic_need, group_need):
                    wrong.append(f"code {code} {user}: {response.code} {response.remark}")
            root = await _call(pool, broker.address, code, ROOT, SAMPLE_FIELDS, _body(code))
            if _refused(root):
                wrong.append(f"code {code} refused to the Super user: {root.remark}")
        for code in sorted(served & ADMIN_REQUEST_CODES):
            response = await _call(pool, broker.address, code, ("subUser", PASSWORD), {})
            if not _refused(response):
                wrong.append(f"admin code {code} served to a Normal user")
    finally:
        await pool.close()
    assert wrong == []


async def test_precedence_addresses_default_policy_and_disabled_users(cluster: Cluster) -> None:
    pool = ClientPool()
    address = cluster.brokers[0].address
    send = {**SAMPLE_FIELDS, "topic": "AclSecret", "b": "AclSecret"}
    try:
        # Topic:Acl* allows Pub, Topic:AclSecret denies it: the literal entry wins
        response = await _call(pool, address, R.SEND_MESSAGE, ("pubUser", PASSWORD), send)
        assert _refused(response) and "the decision is deny" in (response.remark or "")
        # Group:farGroup is granted from 10.0.0.0/8 only
        far = {**SAMPLE_FIELDS, "consumerGroup": "farGroup"}
        response = await _call(
            pool, address, R.GET_CONSUMER_LIST_BY_GROUP, ("subUser", PASSWORD), far
        )
        assert _refused(response) and "no matched policies" in (response.remark or "")
        # dfltUser: Custom matches Topic:Other only; anything else falls to Default: Deny
        other = {**SAMPLE_FIELDS, "topic": "Other", "b": "Other"}
        response = await _call(pool, address, R.SEND_MESSAGE, ("dfltUser", PASSWORD), other)
        assert not _refused(response), response.remark
        response = await _call(pool, address, R.SEND_MESSAGE, ("dfltUser", PASSWORD), SAMPLE_FIELDS)
        assert _refused(response) and "the decision is deny (*)" in (response.remark or "")
        response = await _call(pool, address, R.SEND_MESSAGE, ("offUser", PASSWORD), send)
        assert _refused(response) and "disabled" in (response.remark or "")
        response = await _call(pool, address, R.SEND_MESSAGE, ("subUser", "wrong-pass"), send)
        assert _refused(response) and "check signature failed" in (response.remark or "")
    finally:
        await pool.close()


async def test_admin_codes_read_update_and_delete_the_store(
    cluster: Cluster, tmp_path: Path
) -> None:
    pool = ClientPool()
    address = cluster.brokers[0].address
    try:
        user = await _admin_ok(pool, address, R.AUTH_GET_USER, {"username": "pubUser"})
        assert json.loads(bytes(user.body)) == {
            "username": "pubUser", "userType": "Normal", "userStatus": "enable"
        }  # fmt: skip
        listed = await _admin_ok(pool, address, R.AUTH_LIST_USER, {"filter": "User"})
        assert sorted(u["username"] for u in json.loads(bytes(listed.body))) == [
            "dfltUser", "offUser", "pubUser", "subUser"
        ]  # fmt: skip
        update = {"subject": "User:pubUser", "policies": [{"entries": [
            {"resource": "Group:*", "actions": ["Sub"], "decision": "Allow"}]}]}  # fmt: skip
        await _admin_ok(pool, address, R.AUTH_UPDATE_ACL, {"subject": "User:pubUser"}, update)
        response = await _call(
            pool, address, R.GET_CONSUMER_LIST_BY_GROUP, ("pubUser", PASSWORD), SAMPLE_FIELDS
        )
        assert not _refused(response), response.remark  # granted at once
        await _admin_ok(
            pool, address, R.AUTH_DELETE_ACL,
            {"subject": "User:pubUser", "policyType": "Custom", "resource": "Group:*"},
        )  # fmt: skip
        acl = await _admin_ok(pool, address, R.AUTH_GET_ACL, {"subject": "User:pubUser"})
        resources = [e["resource"] for e in json.loads(bytes(acl.body))["policies"][0]["entries"]]
        assert resources == ["Topic:AclT*", "Topic:AclSecret"]
        listed = await _admin_ok(
            pool, address, R.AUTH_LIST_ACL, {"subjectFilter": "", "resourceFilter": "Group"}
        )
        assert [a["subject"] for a in json.loads(bytes(listed.body))] == ["User:subUser"]
        await _admin_ok(pool, address, R.AUTH_DELETE_USER, {"username": "nobody1"})
        stored = json.loads((tmp_path / "auth.json").read_text())
        assert "nobody1" not in [u["username"] for u in stored["users"]]
        assert ROOT[0] in [u["username"] for u in stored["users"] if u["userType"] == "Super"]
        # a Normal user may not manage users (Cluster Update)
        refused = await _call(
            pool, address, R.AUTH_CREATE_USER, ("subUser", PASSWORD), {"username": "x"},
            json.dumps({"username": "x", "password": "p"}).encode(),
        )  # fmt: skip
        assert _refused(refused)
    finally:
        await pool.close()


async def test_the_broker_says_which_model_is_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="bolide.broker.security"):
        async with Cluster(tmp_path / "v2", settings={"authorizationEnabled": "true"}):
            pass
        async with Cluster(tmp_path / "off"):
            pass
    assert "ACL 2.0 on (authentication off, authorization on)" in caplog.text
    assert "ACL off" in caplog.text
