"""END_TRANSACTION (37), RESUME_CHECK_HALF_MESSAGE (323) and Bolide's QUERY_HALF_MESSAGES
(round2-facts §5).

END_TRANSACTION arrives oneway from producers (Java, C++, Bolide, the 5.x proxy): nothing is
sent back then. Sent as an ordinary request it gets what a Java broker answers:

* a slave: SLAVE_NOT_AVAILABLE;
* commitOrRollback 0 (unknown) or another value: no answer at all (Java returns null) — the
  transaction stays pending and the checker asks again;
* a half that cannot be found, belongs to another group or another offset, or was already
  decided: SYSTEM_ERROR with the Java remark ("Find prepared transaction message failed",
  "The producer group wrong", "The transaction state table offset wrong"); nothing changes;
* a commit whose put fails: the code and remark of Java's sendFinalMessage.
"""

from __future__ import annotations

import logging

from bolide.base.errors import invariant
from bolide.broker.context import BrokerContext
from bolide.broker.transactions import HalfFilter, TransactionService
from bolide.protocol.bodies.transaction import (
    QueryHalfMessagesRequestHeader,
    ResumeCheckHalfMessageRequestHeader,
)
from bolide.protocol.codes import RequestCode, ResponseCode
from bolide.protocol.command import RemotingCommand
from bolide.protocol.headers import EndTransactionRequestHeader, HeaderError
from bolide.protocol.message import MessageSysFlag
from bolide.remoting import Connection, Dispatcher

__all__ = ["TransactionHandlers"]

_log = logging.getLogger("bolide.broker.transactions")

_DECISIONS = {
    int(MessageSysFlag.TRANSACTION_COMMIT): "commit",
    int(MessageSysFlag.TRANSACTION_ROLLBACK): "rollback",
}


class TransactionHandlers:
    """The transaction requests of one broker."""

    def __init__(self, context: BrokerContext) -> None:
        invariant(context.transactions is not None, "transaction handlers need the service")
        self._context = context

    @property
    def _service(self) -> TransactionService:
        service = self._context.transactions
        assert service is not None  # for mypy; checked in __init__
        return service

    def install(self, dispatcher: Dispatcher) -> None:
        """Register END_TRANSACTION and QUERY_HALF_MESSAGES in the ``transaction`` family."""
        dispatcher.register(RequestCode.END_TRANSACTION, self.end_transaction, family="transaction")
        dispatcher.register(
            RequestCode.BOLIDE_QUERY_HALF_MESSAGES, self.query_half_messages, family="transaction"
        )
        dispatcher.register(
            RequestCode.RESUME_CHECK_HALF_MESSAGE, self.resume_check_half_message, family="admin"
        )

    async def end_transaction(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand | None:
        """Commit or roll back a half message; see the module docstring."""
        if not self._context.role.is_master:
            _log.warning("END_TRANSACTION refused: this broker is a slave")
            return request.make_response(ResponseCode.SLAVE_NOT_AVAILABLE, None)
        try:
            header = EndTransactionRequestHeader.from_ext_fields(request.ext_fields)
        except HeaderError as error:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(error))
        decision = _DECISIONS.get(header.commit_or_rollback)
        source = "check answer" if header.from_transaction_check else "end of transaction"
        if decision is None:
            _log.info(
                "producer %s: %s of %s is still unknown (commitOrRollback=%d); remark: %s",
                connection.remote_address, source, header.msg_id, header.commit_or_rollback,
                request.remark,
            )  # fmt: skip
            return None
        outcome = await self._service.end_transaction(header)
        if outcome.ok and self._context.trace is not None:
            self._context.trace.transaction_ended(
                header.commit_log_offset, header.producer_group, decision == "commit",
                header.transaction_id or "", from_check=header.from_transaction_check,
            )  # fmt: skip
        if outcome.ok:
            _log.debug("producer %s: %s %s of %s", connection.remote_address, source, decision,
                       header.msg_id)  # fmt: skip
        else:
            # A check answered after the END it overtook is a normal race, not a problem.
            level = logging.INFO if header.from_transaction_check else logging.WARNING
            _log.log(
                level,
                "producer %s: %s %s of %s (offset %d) refused: %s",
                connection.remote_address, source, decision, header.msg_id,
                header.commit_log_offset, outcome.remark,
            )  # fmt: skip
        return request.make_response(outcome.code, outcome.remark)

    async def query_half_messages(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """The broker's pending half messages (oldest first) and its transaction counters."""
        del connection
        try:
            header = QueryHalfMessagesRequestHeader.from_ext_fields(request.ext_fields)
        except HeaderError as error:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(error))
        service = self._service
        wanted = HalfFilter(header.producer_group, header.topic, header.max_count)
        listing = (service.list_given_up if header.given_up else service.list_pending)(
            self._context.config.broker_name, wanted
        )
        return request.make_response(ResponseCode.SUCCESS, body=listing.to_json())

    async def resume_check_half_message(
        self, connection: Connection, request: RemotingCommand
    ) -> RemotingCommand:
        """RESUME_CHECK_HALF_MESSAGE (323): a given-up half message is checked again."""
        try:
            header = ResumeCheckHalfMessageRequestHeader.from_ext_fields(request.ext_fields)
        except HeaderError as error:
            return request.make_response(ResponseCode.SYSTEM_ERROR, str(error))
        outcome = await self._service.resume(header.msg_id)
        _log.info("%s asked to resume transaction %s: %s", connection.remote_address,
                  header.msg_id, outcome.remark or "done")  # fmt: skip
        return request.make_response(outcome.code, outcome.remark)
