"""The async client API: the same names as ``bolide``, as coroutines on your event loop::

async with bolide.aio.Producer("order-producers", namesrv="127.0.0.1:9876") as producer:
    result = await producer.send(bolide.aio.Message("orders", b"{}", tags="paid"))
"""

from __future__ import annotations

from bolide.client.admin import AdminClient
from bolide.client.config import ConsumeFrom
from bolide.client.consumer.consume_orderly import OrderlyContext
from bolide.client.consumer.listener import ConsumeContext, ConsumeResult, OrderlyResult
from bolide.client.consumer.options import ConsumerOptions
from bolide.client.consumer.pull_consumer import PullConsumer
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.client.consumer.selector import MessageSelector
from bolide.client.instance import ClientInstance
from bolide.client.message import Message, MessageExt, SendResult, SendStatus
from bolide.client.producer.producer import Producer
from bolide.client.producer.request import RequestProducer
from bolide.client.producer.transaction import (
    LocalTransactionState,
    TransactionProducer,
    TransactionSendResult,
)
from bolide.protocol.bodies import MessageModel, MessageQueue
from bolide.protocol.compression import CompressionType

__all__ = [
    "AdminClient",
    "ClientInstance",
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
    "RequestProducer",
    "SendResult",
    "SendStatus",
    "TransactionProducer",
    "TransactionSendResult",
]
