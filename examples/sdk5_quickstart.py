"""The official RocketMQ 5.x Python SDK against Bolide, unchanged: a producer and a simple
consumer through the gRPC proxy that ``bolide standalone`` runs on port 8081.

    bolide standalone --data-dir ./data       # ... proxy=127.0.0.1:8081
    bolide topic create orders --type normal
    pip install rocketmq-python-client==5.1.2
    python examples/sdk5_quickstart.py --endpoint 127.0.0.1:8081 --messages 10
"""

from __future__ import annotations

import argparse
from typing import Any


def main(endpoint: str, count: int) -> None:
    from rocketmq import (
        ClientConfiguration,
        Credentials,
        FilterExpression,
        Message,
        Producer,
        SimpleConsumer,
    )

    config = ClientConfiguration(endpoint, Credentials())
    producer = Producer(config, ("orders",))
    producer.startup()
    consumer = SimpleConsumer(config, "billing", {"orders": FilterExpression("*")}, 5)
    consumer.startup()
    try:
        for index in range(count):
            message: Any = Message()
            message.topic = "orders"
            message.body = f'{{"id": {index}}}'.encode()
            message.tag = "paid"
            message.keys = f"order-{index}"
            receipt = producer.send(message)
            print("sent", receipt.message_id)
        received = 0
        while received < count:
            messages = consumer.receive(16, 30)  # up to 16, invisible for 30 s unless acked
            if not messages:
                break
            for message in messages:
                print("received", message.keys, message.body)
                consumer.ack(message)
                received += 1
    finally:
        consumer.shutdown()
        producer.shutdown()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--endpoint", default="127.0.0.1:8081")
    parser.add_argument("--messages", type=int, default=10)
    arguments = parser.parse_args()
    main(arguments.endpoint, arguments.messages)
