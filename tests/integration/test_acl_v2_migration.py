"""From ACL 1.0 to 2.0 (issue 29): a broker started with ``migrateAuthFromV1Enabled`` makes
users and policies of ``aclFile``'s accounts, which then decide requests as the accounts did;
``bolide acl migrate`` does the same on running brokers; the authentication and authorization
whitelists let the request codes they name skip that step."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from bolide.acl.migration import acl_of_account, migrate
from bolide.acl.rules import AclRules, load_yaml_document, parse_rules
from bolide.acl.v2_auth import AuthV2
from bolide.acl.v2_model import Action, Decision, PolicyType, Resource, UserType
from bolide.client.admin import AdminClient
from bolide.protocol.acl_signature import sign_request
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import ClientPool
from bolide.testing.cluster import Cluster
from tests.cli.conftest import run_bolide
from tests.integration.wire import send_request

R = RequestCode
ROOT = ("root01", "root-secret")
PLAIN_ACL = """\
globalWhiteRemoteAddresses: [10.10.*.*]
accounts:
  - accessKey: adminKey1
    secretKey: admin-secret
    admin: true
  - accessKey: writerKey
    secretKey: writer-secret
    whiteRemoteAddress: 192.168.0.*
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms: [Orders=PUB|SUB, Secret=DENY]
"""


def _rules(tmp_path: Path) -> tuple[Path, AclRules]:
    path = tmp_path / "plain_acl.yml"
    path.write_text(PLAIN_ACL)
    return path, parse_rules(load_yaml_document(PLAIN_ACL, str(path)), str(path))


def test_accounts_become_users_and_policies_once(tmp_path: Path) -> None:
    _, rules = _rules(tmp_path)
    auth = AuthV2(tmp_path / "auth.json")
    report = migrate(rules, auth)
    assert report.created == ["adminKey1", "writerKey"]
    assert len(report.warnings) == 2  # the two white lists are named, not carried over
    assert auth.users["adminKey1"].user_type is UserType.SUPER
    assert auth.users["writerKey"].user_type is UserType.NORMAL
    acl = auth.acls["User:writerKey"]
    assert {e.resource.key: e.decision for e in acl.policies[PolicyType.CUSTOM]} == {
        "Topic:Orders": Decision.ALLOW,
        "Topic:Secret": Decision.DENY,
    }
    assert [e.resource.key for e in acl.policies[PolicyType.DEFAULT]] == ["Topic:*", "Group:*"]
    topic = Resource.parse("Topic:Orders")
    assert auth.decide("writerKey", topic, [Action.PUB], "127.0.0.1")[0] is Decision.ALLOW
    other = Resource.parse("Topic:Other")
    assert auth.decide("writerKey", other, [Action.SUB], "127.0.0.1")[0] is Decision.DENY
    group = Resource.parse("Group:anyGroup")
    assert auth.decide("writerKey", group, [Action.SUB], "127.0.0.1")[0] is Decision.ALLOW
    again = migrate(rules, AuthV2(tmp_path / "auth.json"))
    assert again.created == [] and again.skipped == ["adminKey1", "writerKey"]
    assert acl_of_account(rules.accounts["writerKey"]) == acl


async def _send(pool: ClientPool, address: str, topic: str, user: tuple[str, str]) -> int:
    request = send_request(topic, b"x")
    sign_request(request, *user)
    return (await pool.invoke(address, request, 10_000)).code


async def test_a_broker_migrates_its_acl_file_at_start(tmp_path: Path) -> None:
    acl_file, _ = _rules(tmp_path)
    settings = {
        "authenticationEnabled": "true",
        "authorizationEnabled": "true",
        "authStoreFile": str(tmp_path / "auth.json"),
        "migrateAuthFromV1Enabled": "true",
        "aclFile": str(acl_file),
    }
    async with Cluster(tmp_path / "cluster", settings=settings) as cluster:
        auth = cluster.brokers[0].auth
        assert auth is not None and set(auth.users) == {"adminKey1", "writerKey"}
        async with AdminClient(
            cluster.namesrv_address, access_key="adminKey1", secret_key="admin-secret"
        ) as admin:
            await admin.create_topic("Orders", queue_count=1)  # the Super user administers
            await admin.create_topic("Secret", queue_count=1)
        pool = ClientPool()
        try:
            address = cluster.brokers[0].address
            writer = ("writerKey", "writer-secret")
            assert await _send(pool, address, "Orders", writer) == ResponseCode.SUCCESS
            assert await _send(pool, address, "Secret", writer) == ResponseCode.NO_PERMISSION
            assert await _send(pool, address, "TBW102x", writer) == ResponseCode.NO_PERMISSION
        finally:
            await pool.close()


async def test_the_migrate_command_creates_users_on_running_brokers(tmp_path: Path) -> None:
    acl_file, _ = _rules(tmp_path)
    settings = {
        "authenticationEnabled": "true",
        "authorizationEnabled": "true",
        "initAuthenticationUser": json.dumps({"username": ROOT[0], "password": ROOT[1]}),
        "authStoreFile": str(tmp_path / "auth.json"),
    }
    signed = ("--access-key", ROOT[0], "--secret-key", ROOT[1])
    async with Cluster(tmp_path / "cluster", settings=settings) as cluster:
        namesrv = cluster.namesrv_address
        dry = await asyncio.to_thread(
            run_bolide, "acl", "migrate", str(acl_file), "--dry-run", "--json", *signed,
            namesrv=namesrv,
        )  # fmt: skip
        assert dry.code == 0, dry.stderr
        assert dry.json() == {"created": ["adminKey1", "writerKey"], "skipped": [],
                              "dryRun": True}  # fmt: skip
        auth = cluster.brokers[0].auth
        assert auth is not None and set(auth.users) == {ROOT[0]}
        done = await asyncio.to_thread(
            run_bolide, "acl", "migrate", str(acl_file), *signed, namesrv=namesrv
        )
        assert done.code == 0, done.stderr
        assert "created 2 user(s): adminKey1, writerKey" in done.stdout
        assert "whiteRemoteAddress of writerKey is not migrated" in done.stderr
        assert set(auth.users) == {ROOT[0], "adminKey1", "writerKey"}
        assert auth.acls["User:writerKey"] == acl_of_account(
            parse_rules(load_yaml_document(PLAIN_ACL, "x"), "x").accounts["writerKey"]
        )
        again = await asyncio.to_thread(
            run_bolide, "acl", "migrate", str(acl_file), "--json", *signed, namesrv=namesrv
        )
        assert again.json()["skipped"] == ["adminKey1", "writerKey"]


async def test_whitelisted_codes_skip_their_step(tmp_path: Path) -> None:
    settings = {
        "authenticationEnabled": "true",
        "authorizationEnabled": "true",
        "initAuthenticationUser": json.dumps({"username": ROOT[0], "password": ROOT[1]}),
        "authStoreFile": str(tmp_path / "auth.json"),
        "authenticationWhitelist": f"{int(R.GET_BROKER_RUNTIME_INFO)},{int(R.GET_MAX_OFFSET)}",
        "authorizationWhitelist": str(int(R.GET_MAX_OFFSET)),
    }
    async with Cluster(tmp_path / "cluster", settings=settings) as cluster:
        pool = ClientPool()
        try:
            address = cluster.brokers[0].address

            async def unsigned(code: int, fields: dict[str, str] | None = None) -> int:
                request = RemotingCommand.request(code, fields)
                return (await pool.invoke(address, request, 10_000)).code

            # 28 skips authentication only: unsigned, no user to authorize -> refused
            assert await unsigned(R.GET_BROKER_RUNTIME_INFO) == ResponseCode.NO_PERMISSION
            # 30 skips both: answered unsigned
            fields = {"topic": "Orders", "queueId": "0"}
            assert await unsigned(R.GET_MAX_OFFSET, fields) != ResponseCode.NO_PERMISSION
            # 31 is not listed: refused unsigned
            assert await unsigned(R.GET_MIN_OFFSET, fields) == ResponseCode.NO_PERMISSION
        finally:
            await pool.close()
