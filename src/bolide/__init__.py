"""Bolide: a message queue in Python that speaks the Apache RocketMQ 4.x wire protocol.

The blocking client API lives here; ``bolide.aio`` has the async twins::

    producer = bolide.Producer("order-producers", namesrv="127.0.0.1:9876")
    producer.start()
    result = producer.send(bolide.Message("orders", b'{"id": 17}', tags="paid", keys="order-17"))
    producer.shutdown()

Names are imported on first use, so ``import bolide.base`` (servers, tools) does not load the
client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from bolide import aio as aio
    from bolide.client.blocking.admin import AdminClient
    from bolide.client.blocking.consumers import PullConsumer, PushConsumer
    from bolide.client.blocking.producer import Producer
    from bolide.client.blocking.request import RequestProducer
    from bolide.client.blocking.transaction import TransactionProducer
    from bolide.client.config import ConsumeFrom
    from bolide.client.consumer.consume_orderly import OrderlyContext
    from bolide.client.consumer.listener import ConsumeContext, ConsumeResult, OrderlyResult
    from bolide.client.consumer.options import ConsumerOptions
    from bolide.client.consumer.selector import MessageSelector
    from bolide.client.message import Message, MessageExt, SendResult, SendStatus
    from bolide.client.producer.transaction import LocalTransactionState, TransactionSendResult
    from bolide.client.reply import ReplyTimeoutError, create_reply_message
    from bolide.protocol.bodies import MessageModel, MessageQueue
    from bolide.protocol.compression import CompressionType

_EXPORTS = {
    "AdminClient": "bolide.client.blocking.admin",
    "ConsumeContext": "bolide.client.consumer.listener",
    "ConsumeFrom": "bolide.client.config",
    "ConsumeResult": "bolide.client.consumer.listener",
    "ConsumerOptions": "bolide.client.consumer.options",
    "Message": "bolide.client.message",
    "MessageExt": "bolide.client.message",
    "MessageModel": "bolide.protocol.bodies",
    "MessageQueue": "bolide.protocol.bodies",
    "OrderlyContext": "bolide.client.consumer.consume_orderly",
    "OrderlyResult": "bolide.client.consumer.listener",
    "Producer": "bolide.client.blocking.producer",
    "PullConsumer": "bolide.client.blocking.consumers",
    "PushConsumer": "bolide.client.blocking.consumers",
    "SendResult": "bolide.client.message",
    "SendStatus": "bolide.client.message",
    "LocalTransactionState": "bolide.client.producer.transaction",
    "TransactionProducer": "bolide.client.blocking.transaction",
    "RequestProducer": "bolide.client.blocking.request",
    "create_reply_message": "bolide.client.reply",
    "ReplyTimeoutError": "bolide.client.reply",
    "TransactionSendResult": "bolide.client.producer.transaction",
    "CompressionType": "bolide.protocol.compression",
    "MessageSelector": "bolide.client.consumer.selector",
}

__all__ = [
    "AdminClient",
    "CompressionType",
    "ConsumeContext",
    "ConsumeFrom",
    "ConsumeResult",
    "ConsumerOptions",
    "LocalTransactionState",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "MessageSelector",
    "OrderlyContext",
    "OrderlyResult",
    "Producer",
    "PullConsumer",
    "PushConsumer",
    "ReplyTimeoutError",
    "RequestProducer",
    "SendResult",
    "SendStatus",
    "TransactionProducer",
    "TransactionSendResult",
    "__version__",
    "create_reply_message",
]


def __getattr__(name: str) -> Any:
    if name == "aio":  # the async API, a submodule: ``import bolide; bolide.aio.Producer``
        return importlib.import_module("bolide.aio")
    module_name = _EXPORTS.get(name)
    if module_name is None:
        raise AttributeError(f"module 'bolide' has no attribute {name!r}")
    value = getattr(importlib.import_module(module_name), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
