"""SQL92 property filtering on the broker (``enablePropertyFilter=true``), for pulls and for
CHECK_CLIENT_CONFIG (46), as a RocketMQ broker does it.

* A subscription whose expressionType is not TAG needs enablePropertyFilter: without it pulls
  and the client check are answered SYSTEM_ERROR (Java consumers then fail at start, as
  against Apache's broker with the default broker.conf).
* Its expression is compiled once (:func:`bolide.broker.sql_filter.compile_sql`, cached); a
  bad one is SUBSCRIPTION_PARSE_FAILED (23) on a pull and SYSTEM_ERROR on CHECK_CLIENT_CONFIG,
  with a remark saying where it is wrong.
* A pull reads as a tag pull with every tag, then keeps the records whose properties make the
  expression TRUE; when none of those read match, the answer is NO_MATCHED_MESSAGE
  (PULL_RETRY_IMMEDIATELY with the next offset), so the consumer moves on.
"""

from __future__ import annotations

import dataclasses
import logging

from bolide.base.errors import ProtocolError
from bolide.broker.config import BrokerConfig
from bolide.broker.context import RefusedError
from bolide.broker.sql_filter import SqlFilter, SqlFilterError, compile_sql
from bolide.protocol.bodies import EXPRESSION_TYPE_SQL92, SubscriptionData
from bolide.protocol.codes import ResponseCode
from bolide.protocol.record import read_record_header, read_record_properties
from bolide.store.api import GetResult, GetStatus

__all__ = ["NOT_SUPPORTED_REMARK", "check_subscription", "matching_records"]

_log = logging.getLogger("bolide.broker.property_filter")

NOT_SUPPORTED_REMARK = (
    "The broker does not support consumer to filter message by {type}: "
    "set enablePropertyFilter=true in broker.conf"
)


def check_subscription(config: BrokerConfig, subscription: SubscriptionData) -> SqlFilter:
    """The compiled filter of a non-TAG ``subscription``.

    Raises:
        RefusedError: SYSTEM_ERROR when property filters are off or the type is unknown,
            SUBSCRIPTION_PARSE_FAILED when the expression does not compile (the remark says
            where).
    """
    kind = subscription.expression_type
    if not config.enable_property_filter:
        raise RefusedError(ResponseCode.SYSTEM_ERROR, NOT_SUPPORTED_REMARK.format(type=kind))
    if kind != EXPRESSION_TYPE_SQL92:
        raise RefusedError(ResponseCode.SYSTEM_ERROR, f"expression type {kind!r} not supported")
    try:
        return compile_sql(subscription.sub_string)
    except SqlFilterError as error:
        raise RefusedError(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(error)) from error


def matching_records(result: GetResult, sql: SqlFilter) -> GetResult:
    """``result`` with only the records ``sql`` matches; NO_MATCHED_MESSAGE when it read some
    and none match (a record whose properties do not decode does not match)."""
    if result.status is not GetStatus.FOUND:
        return result
    kept = []
    for record in result.buffers:
        try:
            properties = read_record_properties(record, read_record_header(record))
        except (ProtocolError, UnicodeDecodeError) as error:
            _log.warning("record without readable properties skipped by %r: %s", sql, error)
            continue
        if sql.matches(properties):
            kept.append(record)
    if len(kept) == len(result.buffers):
        return result
    if not kept:
        return dataclasses.replace(
            result, status=GetStatus.NO_MATCHED_MESSAGE, buffers=[], total_bytes=0
        )
    return dataclasses.replace(
        result, buffers=kept, total_bytes=sum(len(record) for record in kept)
    )
