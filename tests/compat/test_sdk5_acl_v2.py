"""ACL 2.0 through ``bolide standalone``: users and policies made with ``bolide user`` and
``bolide acl policy`` (signed by the Super user from ``initAuthenticationUser``), then the
official 5.x SDK signing as a Normal user through the proxy, which decides with the broker's
users and policies: the granted topic sends, a topic outside the policy is refused, a wrong
password is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import bolide
from tests.cli.conftest import run_bolide
from tests.compat.sdk5_support import SDK_REQUEST_TIMEOUT_S, sdk_message, standalone

pytestmark = [pytest.mark.compat, pytest.mark.timeout(240)]

pytest.importorskip("rocketmq.v5")

ROOT = ("rootUser", "root-secret")
SUPER = {"BOLIDE_ACCESS_KEY": ROOT[0], "BOLIDE_SECRET_KEY": ROOT[1]}


def _producer(endpoint: str, user: str, password: str, topic: str) -> object:
    from rocketmq import ClientConfiguration, Credentials, Producer

    config = ClientConfiguration(
        endpoint, Credentials(user, password), request_timeout=SDK_REQUEST_TIMEOUT_S
    )
    producer = Producer(config, (topic,))
    producer.startup()
    return producer


def test_cli_made_policies_hold_for_the_5x_sdk(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "authenticationEnabled=true\nauthorizationEnabled=true\n"
        f"initAuthenticationUser={json.dumps({'username': ROOT[0], 'password': ROOT[1]})}\n"
    )
    with standalone(tmp_path / "data", "-c", str(conf)) as server:
        with bolide.AdminClient(server.namesrv, access_key=ROOT[0], secret_key=ROOT[1]) as admin:
            admin.create_topic("Granted2", queue_count=2)
            admin.create_topic("Closed2", queue_count=2)
        made = run_bolide(
            "user", "create", "app2user", "--password", "app2-secret", "--json",
            namesrv=server.namesrv, env=SUPER,
        )  # fmt: skip
        assert made.code == 0, made.stderr
        granted = run_bolide(
            "acl", "policy", "create", "app2user", "-r", "Topic:Granted*", "-a", "Pub",
            namesrv=server.namesrv, env=SUPER,
        )  # fmt: skip
        assert granted.code == 0, granted.stderr
        shown = run_bolide("user", "list", "--json", namesrv=server.namesrv, env=SUPER)
        assert {"username": "app2user", "userType": "Normal", "userStatus": "enable"} in (
            json.loads(shown.stdout)
        )
        refused = run_bolide(
            "user", "list", namesrv=server.namesrv,
            env={"BOLIDE_ACCESS_KEY": "app2user", "BOLIDE_SECRET_KEY": "app2-secret"},
        )  # fmt: skip
        assert refused.code != 0  # a Normal user may not read the users (Cluster Get)

        producer = _producer(server.proxy, "app2user", "app2-secret", "Granted2")
        try:
            assert producer.send(sdk_message("Granted2", b"allowed")).message_id  # type: ignore[attr-defined]
            with pytest.raises(Exception):  # noqa: B017
                producer.send(sdk_message("Closed2", b"not in the policy"))  # type: ignore[attr-defined]
        finally:
            producer.shutdown()  # type: ignore[attr-defined]
        wrong = _producer(server.proxy, "app2user", "not-the-password", "Granted2")
        try:
            with pytest.raises(Exception):  # noqa: B017
                wrong.send(sdk_message("Granted2", b"bad password"))  # type: ignore[attr-defined]
        finally:
            wrong.shutdown()  # type: ignore[attr-defined]
        with bolide.AdminClient(server.namesrv, access_key=ROOT[0], secret_key=ROOT[1]) as admin:
            granted_status = admin.topic_status("Granted2")
            closed_status = admin.topic_status("Closed2")
    assert sum(q.max_offset for q in granted_status) == 1
    assert sum(q.max_offset for q in closed_status) == 0
