"""MessageSelector: what a consumer subscribes with, a tag expression or a SQL92 condition.

``subscribe(topic, "TagA || TagB")`` and ``subscribe(topic, MessageSelector.by_tag("TagA"))``
filter by tag (on the broker by tag hash, then exactly in the client). ``subscribe(topic,
MessageSelector.by_sql("region = 'eu' AND amount > 100"))`` filters on the broker by the
message properties, RocketMQ's SQL92 subset; the broker must run with
``enablePropertyFilter=true``, and the consumer asks it to check the expression when it starts
(CHECK_CLIENT_CONFIG), failing with the broker's remark when refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from bolide.base.errors import ConfigError
from bolide.protocol.bodies import (
    EXPRESSION_TYPE_SQL92,
    EXPRESSION_TYPE_TAG,
    BodyError,
    SubscriptionData,
)

__all__ = ["MessageSelector", "subscription_of"]


@dataclass(frozen=True, slots=True)
class MessageSelector:
    """A subscription's filter: ``expression_type`` TAG or SQL92 and its ``expression``."""

    expression_type: str
    expression: str

    @classmethod
    def by_tag(cls, expression: str = "*") -> MessageSelector:
        """Messages whose tag matches ``expression`` (``"*"``, ``"TagA || TagB"``)."""
        return cls(EXPRESSION_TYPE_TAG, expression)

    @classmethod
    def by_sql(cls, expression: str) -> MessageSelector:
        """Messages whose properties make the SQL92 ``expression`` true (the broker needs
        ``enablePropertyFilter=true``)."""
        if not expression or expression.isspace():
            raise ConfigError("a SQL92 selector needs an expression")
        return cls(EXPRESSION_TYPE_SQL92, expression)


def subscription_of(
    topic: str, selector: str | MessageSelector | None, sub_version: int
) -> SubscriptionData:
    """The SubscriptionData of ``topic`` with ``selector`` (a string: a tag expression).

    Raises:
        ConfigError: a tag expression without a tag.
    """
    if not isinstance(selector, MessageSelector):
        selector = MessageSelector.by_tag("*" if selector is None else selector)
    try:
        return SubscriptionData.from_expression(
            topic, selector.expression, sub_version, selector.expression_type
        )
    except BodyError as error:
        raise ConfigError(str(error)) from error
