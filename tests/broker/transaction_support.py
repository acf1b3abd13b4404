"""A raw-wire transactional producer for the broker's transaction tests.

:class:`WireProducer` speaks to a broker over a real socket as a Java TransactionMQProducer
does: HEART_BEAT with its producer group, half sends (TRAN_MSG / PGROUP / sysFlag PREPARED),
END_TRANSACTION, and it records the CHECK_TRANSACTION_STATE requests the broker sends it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from bolide.broker.broker import Broker
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)
from bolide.protocol.message import MessageExt, MessageSysFlag, PropertyKey
from bolide.protocol.msgid import decode_offset_message_id
from bolide.protocol.record import decode_record, decode_records, encode_properties
from bolide.remoting import ClientPool, Connection, Dispatcher
from tests.integration.wire import heartbeat_request, pull_request

TIMEOUT_MS = 10_000
COMMIT = int(MessageSysFlag.TRANSACTION_COMMIT)
ROLLBACK = int(MessageSysFlag.TRANSACTION_ROLLBACK)


@dataclass(frozen=True)
class Half:
    """A stored half message as the producer knows it from the send response."""

    unique_key: str
    queue_offset: int
    commit_log_offset: int
    offset_msg_id: str


@dataclass(frozen=True)
class Check:
    """One CHECK_TRANSACTION_STATE received."""

    fields: dict[str, str]
    header: CheckTransactionStateRequestHeader
    message: MessageExt
    connection: Connection


class WireProducer:
    """One producer connection of ``group`` to the broker at ``address``."""

    def __init__(self, address: str, group: str, client_id: str) -> None:
        self.address = address
        self.group = group
        self.client_id = client_id
        self.checks: asyncio.Queue[Check] = asyncio.Queue()
        dispatcher = Dispatcher()
        dispatcher.register(RequestCode.CHECK_TRANSACTION_STATE, self._on_check, family="client")
        self.pool = ClientPool(dispatcher)
        self._sequence = 0

    async def _on_check(self, connection: Connection, request: RemotingCommand) -> None:
        header = CheckTransactionStateRequestHeader.from_ext_fields(request.ext_fields)
        message, _ = decode_record(request.body)
        await self.checks.put(Check(dict(request.ext_fields), header, message, connection))

    async def invoke(self, request: RemotingCommand) -> RemotingCommand:
        return await self.pool.invoke(self.address, request, TIMEOUT_MS)

    async def heartbeat(self) -> None:
        response = await self.invoke(
            heartbeat_request(self.client_id, producer_groups=(self.group,))
        )
        assert response.code == ResponseCode.SUCCESS

    def half_request(
        self,
        topic: str,
        body: bytes,
        *,
        queue_id: int = 0,
        extra: dict[str, str] | None = None,
        sys_flag: int = int(MessageSysFlag.TRANSACTION_PREPARED),
        tran_msg: bool = True,
    ) -> tuple[RemotingCommand, str]:
        self._sequence += 1
        unique_key = f"{self.client_id}-{self._sequence:08d}".upper()
        properties = {
            PropertyKey.UNIQ_KEY: unique_key,
            PropertyKey.WAIT: "true",
            "PGROUP": self.group,
            PropertyKey.KEYS: f"k{self._sequence}",
            **(extra or {}),
        }
        if tran_msg:
            properties["TRAN_MSG"] = "true"
        header = SendMessageRequestHeader(
            producer_group=self.group,
            topic=topic,
            default_topic="TBW102",
            default_topic_queue_count=4,
            queue_id=queue_id,
            sys_flag=sys_flag,
            born_timestamp_ms=1_700_000_000_000,
            flag=0,
            properties=encode_properties(properties),
        )
        request = RemotingCommand.request(
            RequestCode.SEND_MESSAGE_V2, header.to_v2_ext_fields(), body
        )
        return request, unique_key

    async def send_half(self, topic: str, body: bytes, **options: object) -> Half:
        request, unique_key = self.half_request(topic, body, **options)  # type: ignore[arg-type]
        response = await self.invoke(request)
        assert response.code == ResponseCode.SUCCESS, response.remark
        fields = SendMessageResponseHeader.from_ext_fields(response.ext_fields)
        _, commit_log_offset = decode_offset_message_id(fields.msg_id)
        return Half(unique_key, fields.queue_offset, commit_log_offset, fields.msg_id)

    def end_request(
        self,
        half: Half,
        decision: int,
        *,
        from_check: bool = False,
        group: str | None = None,
        queue_offset: int | None = None,
        commit_log_offset: int | None = None,
        oneway: bool = False,
    ) -> RemotingCommand:
        header = EndTransactionRequestHeader(
            producer_group=group or self.group,
            tran_state_table_offset=half.queue_offset if queue_offset is None else queue_offset,
            commit_log_offset=(
                half.commit_log_offset if commit_log_offset is None else commit_log_offset
            ),
            commit_or_rollback=decision,
            msg_id=half.unique_key,
            from_transaction_check=from_check,
            transaction_id=half.unique_key,
        )
        return RemotingCommand.request(
            RequestCode.END_TRANSACTION, header.to_ext_fields(), oneway=oneway
        )

    async def end(self, half: Half, decision: int, **options: object) -> RemotingCommand:
        """END_TRANSACTION as a request (not oneway) so the test sees the broker's answer."""
        return await self.invoke(self.end_request(half, decision, **options))  # type: ignore[arg-type]

    async def answer(self, check: Check, decision: int) -> None:
        """Answer a check as the Java client does: oneway END on the check's connection."""
        half = Half(
            check.message.properties[PropertyKey.UNIQ_KEY],
            check.header.tran_state_table_offset,
            check.header.commit_log_offset,
            check.header.offset_msg_id or "",
        )
        await check.connection.invoke_oneway(
            self.end_request(half, decision, from_check=True), TIMEOUT_MS
        )

    async def next_check(self) -> Check:
        async with asyncio.timeout(TIMEOUT_MS / 1000):
            return await self.checks.get()

    async def close(self) -> None:
        await self.pool.close()


def topic_messages(broker: Broker, topic: str, queue_id: int = 0) -> list[MessageExt]:
    """Every message in a queue of ``topic`` (what consumers can see), in queue order."""
    store = broker.context.store
    messages: list[MessageExt] = []
    end = store.max_offset(topic, queue_id)
    for commit_log_offset, _, _ in store.consume_queue_entries(topic, queue_id, 0, end):
        record = store.read_record(commit_log_offset)
        assert record is not None
        messages.append(decode_record(record)[0])
    return messages


async def pull_all(producer: WireProducer, topic: str, queue_id: int = 0) -> list[MessageExt]:
    """What a consumer pulling from offset 0 gets (empty when nothing is there)."""
    response = await producer.invoke(pull_request(topic, queue_id, 0))
    if response.code != ResponseCode.SUCCESS:
        return []
    return decode_records(response.body)
