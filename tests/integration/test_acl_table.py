"""ACL 1.0 on every request code the broker serves, over real sockets (issue 29, finding 2).

One table, written here apart from ``acl/permissions.py`` so that it checks it: for every
served code the topic permission and the group permission it needs. Each code is sent signed
by five accounts (none, PUB only, SUB only, topics but no group, everything); the accounts
lacking a permission must be refused with the AclException remark, the others must pass the
ACL (the handler may still answer an error of its own for the sample fields). Admin codes
need an admin account; the remaining codes must be listed in ``SIGNATURE_ONLY_CODES``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bolide.acl.permissions import ADMIN_REQUEST_CODES, SIGNATURE_ONLY_CODES
from bolide.acl.validator import ACL_EXCEPTION_PREFIX
from bolide.client.admin import AdminClient
from bolide.protocol.acl_signature import compute_signature, sign_request
from bolide.protocol.bodies.heartbeat import ConsumerData, HeartbeatData, SubscriptionData
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand
from bolide.remoting import ClientPool
from bolide.testing.cluster import Cluster

pytestmark = pytest.mark.timeout(300)

R = RequestCode
TOPIC = "AclTable"
GROUP = "tableGroup"
SECRET = "table-secret"
REQUEST_TIMEOUT_MS = 10_000

ACCOUNTS = {
    # name: (defaultTopicPerm, defaultGroupPerm)
    "noneUser1": ("DENY", "DENY"),
    "pubUser01": ("PUB", "SUB"),
    "subUser01": ("SUB", "SUB"),
    "topicOnly": ("PUB|SUB", "DENY"),
    "everyUser": ("PUB|SUB", "SUB"),
}
ACL_YAML = (
    "accounts:\n"
    + "".join(
        f"  - accessKey: {name}\n    secretKey: {SECRET}\n"
        f"    defaultTopicPerm: {topic}\n    defaultGroupPerm: {group}\n"
        for name, (topic, group) in ACCOUNTS.items()
    )
    + f"  - accessKey: admin001\n    secretKey: {SECRET}\n    admin: true\n"
)

# code -> (topic permission needed: "PUB" / "SUB" / "ANY" / None, a consumer group needed)
EXPECTED: dict[int, tuple[str | None, bool]] = {
    R.SEND_MESSAGE: ("PUB", False),
    R.SEND_MESSAGE_V2: ("PUB", False),
    R.SEND_BATCH_MESSAGE: ("PUB", False),
    R.SEND_REPLY_MESSAGE: ("PUB", False),
    R.SEND_REPLY_MESSAGE_V2: ("PUB", False),
    R.RECALL_MESSAGE: ("PUB", False),
    R.END_TRANSACTION: ("PUB", False),
    R.RESUME_CHECK_HALF_MESSAGE: ("PUB", False),
    R.CONSUMER_SEND_MSG_BACK: (None, True),
    R.PULL_MESSAGE: ("SUB", True),
    R.POP_MESSAGE: ("SUB", True),
    R.ACK_MESSAGE: ("SUB", True),
    R.CHANGE_MESSAGE_INVISIBLETIME: ("SUB", True),
    R.QUERY_CONSUMER_OFFSET: ("SUB", True),
    R.UPDATE_CONSUMER_OFFSET: ("SUB", True),
    R.QUERY_MESSAGE: ("SUB", False),
    R.VIEW_MESSAGE_BY_ID: ("SUB", False),
    R.SEARCH_OFFSET_BY_TIMESTAMP: ("ANY", False),
    R.GET_MAX_OFFSET: ("ANY", False),
    R.GET_MIN_OFFSET: ("ANY", False),
    R.GET_EARLIEST_MSG_STORETIME: ("ANY", False),
    R.GET_TOPIC_STATS_INFO: ("ANY", False),
    R.QUERY_TOPIC_CONSUME_BY_WHO: ("ANY", False),
    R.BOLIDE_GET_STATS_HISTORY: ("ANY", True),  # the sample names a group too
    R.HEART_BEAT: ("SUB", True),
    R.UNREGISTER_CLIENT: (None, True),
    R.GET_CONSUMER_LIST_BY_GROUP: (None, True),
    R.GET_CONSUMER_CONNECTION_LIST: (None, True),
    R.GET_CONSUMER_RUNNING_INFO: (None, True),
    R.GET_CONSUME_STATS: ("SUB", True),
    R.CONSUME_MESSAGE_DIRECTLY: ("SUB", True),
    R.QUERY_CONSUME_TIME_SPAN: ("SUB", True),
    R.QUERY_CONSUME_QUEUE: ("SUB", True),
    R.LOCK_BATCH_MQ: (None, True),
    R.UNLOCK_BATCH_MQ: (None, True),
    R.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: ("SUB", True),
    R.QUERY_CORRECTION_OFFSET: ("SUB", True),
}

SAMPLE_FIELDS = {
    # a superset of what the codes above read; every value harmless
    "topic": TOPIC,
    "b": TOPIC,
    "a": "tableProducers",
    "producerGroup": "tableProducers",
    "consumerGroup": GROUP,
    "group": GROUP,
    "compareGroup": GROUP,
    "clientId": "127.0.0.1@table",
    "queueId": "0",
    "queueOffset": "0",
    "offset": "0",
    "commitOffset": "0",
    "maxMsgNums": "1",
    "sysFlag": "0",
    "suspendTimeoutMillis": "0",
    "subVersion": "0",
    "invisibleTime": "60000",
    "pollTime": "0",
    "bornTime": "0",
    "initMode": "0",
    "extraInfo": "0 0 60000 0 0 broker-a 0 0",
    "key": "k",
    "maxNum": "1",
    "beginTimestamp": "0",
    "endTimestamp": "0",
    "timestamp": "0",
    "index": "0",
    "count": "1",
    "msgId": "7F00000100002A9F0000000000000000",
    "recallHandle": "bad",
    "tranStateTableOffset": "0",
    "commitLogOffset": "0",
    "commitOrRollback": "12",  # a rollback (0, "unknown", is not answered)
    "delayLevel": "0",
}


def _body(code: int) -> bytes:
    if code == R.HEART_BEAT:
        subscription = SubscriptionData(TOPIC, "*")
        consumer = ConsumerData(GROUP, subscription_data_set=(subscription,))
        return HeartbeatData("127.0.0.1@table", consumer_data_set=(consumer,)).to_json()
    if code in (R.LOCK_BATCH_MQ, R.UNLOCK_BATCH_MQ):
        return b'{"consumerGroup":"%s","clientId":"127.0.0.1@table","mqSet":[]}' % GROUP.encode()
    return b""


def _allowed(account: str, topic_need: str | None, group_need: bool) -> bool:
    topic_perm, group_perm = ACCOUNTS[account]
    owned = set(topic_perm.split("|"))
    if topic_need == "ANY":
        topic_ok = bool(owned & {"PUB", "SUB"})
    else:
        topic_ok = topic_need is None or topic_need in owned
    return topic_ok and (not group_need or group_perm == "SUB")


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[Cluster]:
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACL_YAML)
    settings = {"aclEnable": "true", "aclFile": str(acl_file)}
    async with Cluster(tmp_path / "cluster", settings=settings) as running:
        async with AdminClient(
            running.namesrv_address, access_key="admin001", secret_key=SECRET
        ) as admin:
            await admin.create_topic(TOPIC, queue_count=1)
        yield running


async def _send(
    pool: ClientPool, address: str, code: int, account: str | None, **extra: str
) -> RemotingCommand:
    request = RemotingCommand.request(code, {**SAMPLE_FIELDS, **extra}, _body(code))
    if account is not None:
        sign_request(request, account, SECRET)
    return await pool.invoke(address, request, REQUEST_TIMEOUT_MS)


def _refused(response: RemotingCommand) -> bool:
    return (response.remark or "").startswith(ACL_EXCEPTION_PREFIX)


async def test_every_served_code_is_checked_against_its_resources(cluster: Cluster) -> None:
    broker = cluster.brokers[0]
    served = {code for code in RequestCode if broker._dispatcher.is_registered(code)}
    unclassified = served - set(EXPECTED) - ADMIN_REQUEST_CODES - set(SIGNATURE_ONLY_CODES)
    assert not unclassified, f"served codes without an ACL rule: {sorted(unclassified)}"
    assert {R.POP_MESSAGE, R.ACK_MESSAGE, R.VIEW_MESSAGE_BY_ID, R.RECALL_MESSAGE} <= served
    pool = ClientPool()
    wrong: list[str] = []
    try:
        for code in sorted(served & set(EXPECTED)):
            topic_need, group_need = EXPECTED[code]
            for account in ACCOUNTS:
                response = await _send(pool, broker.address, code, account)
                if _refused(response) == _allowed(account, topic_need, group_need):
                    wrong.append(f"code {code} {account}: {response.code} {response.remark}")
        for code in sorted(served & ADMIN_REQUEST_CODES):
            if not _refused(await _send(pool, broker.address, code, "everyUser")):
                wrong.append(f"admin code {code} served to a non-admin")
        for code in sorted(served & set(SIGNATURE_ONLY_CODES)):
            if _refused(await _send(pool, broker.address, code, "noneUser1")):
                wrong.append(f"signature-only code {code} refused to a signed request")
            if not _refused(await _send(pool, broker.address, code, None)):
                wrong.append(f"signature-only code {code} served unsigned")
    finally:
        await pool.close()
    assert wrong == []


async def test_view_by_id_without_a_topic_needs_the_signature_only(cluster: Cluster) -> None:
    pool = ClientPool()
    try:
        address = cluster.brokers[0].address
        bare = RemotingCommand.request(R.VIEW_MESSAGE_BY_ID, {"offset": "0"})
        sign_request(bare, "noneUser1", SECRET)
        assert not _refused(await pool.invoke(address, bare, REQUEST_TIMEOUT_MS))
        named = RemotingCommand.request(R.VIEW_MESSAGE_BY_ID, {"offset": "0", "topic": TOPIC})
        sign_request(named, "noneUser1", SECRET)
        response = await pool.invoke(address, named, REQUEST_TIMEOUT_MS)
        assert response.remark == (
            f"{ACL_EXCEPTION_PREFIX}No SUB permission for topic={TOPIC}, accessKey=noneUser1"
        )
    finally:
        await pool.close()


@pytest.mark.parametrize(
    ("version", "flag_signed", "accepted"),
    [
        (399, False, True),  # V4_9_3 and older: the flag outside the signed header
        (399, True, False),
        (401, True, True),  # V4_9_4 and newer sign every ext field (finding 8)
        (479, True, True),
        (401, False, False),
    ],
)
async def test_query_message_signature_follows_the_client_version(
    cluster: Cluster, version: int, flag_signed: bool, accepted: bool
) -> None:
    fields = {
        "AccessKey": "everyUser",
        "topic": TOPIC,
        "key": "k",
        "maxNum": "32",
        "beginTimestamp": "0",
        "endTimestamp": "9999999999999",
        "_UNIQUE_KEY_QUERY": "true",
    }
    signed = {key: value for key, value in fields.items() if flag_signed or key[0] != "_"}
    content = "".join(signed[key] for key in sorted(signed)).encode()
    request = RemotingCommand.request(R.QUERY_MESSAGE, dict(fields))
    request.version = version
    request.ext_fields["Signature"] = compute_signature(SECRET, content)
    pool = ClientPool()
    try:
        response = await pool.invoke(cluster.brokers[0].address, request, REQUEST_TIMEOUT_MS)
    finally:
        await pool.close()
    if accepted:
        assert not _refused(response), response.remark
    else:
        assert response.remark == (
            f"{ACL_EXCEPTION_PREFIX}Check signature failed for accessKey=everyUser"
        )
