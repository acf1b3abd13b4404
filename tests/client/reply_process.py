"""A replier in its own process: ``python -m tests.client.reply_process NAMESRV TOPIC``.

A push consumer of group ``responders`` answers every message of TOPIC with a reply whose body
is ``b"re:" + body`` (bolide.client.reply.create_reply_message), sent by a plain producer.
Prints ``ready`` once started, then serves until its standard input closes.
"""

from __future__ import annotations

import asyncio
import sys

from bolide.client.config import ConsumeFrom
from bolide.client.consumer.listener import ConsumeResult
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.client.message import MessageExt
from bolide.client.producer.producer import Producer
from bolide.client.reply import create_reply_message


async def main(namesrv: str, topic: str) -> None:
    producer = Producer("responder-producers", namesrv)
    consumer = PushConsumer("responders", namesrv, consume_from=ConsumeFrom.FIRST_OFFSET)
    consumer.subscribe(topic, "*")

    async def answer(messages: list[MessageExt]) -> ConsumeResult:
        for message in messages:
            await producer.send(create_reply_message(message, b"re:" + message.body))
        return ConsumeResult.SUCCESS

    consumer.register_listener(answer)
    await producer.start()
    await consumer.start()
    print("ready", flush=True)
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, sys.stdin.read)
    await consumer.shutdown()
    await producer.shutdown()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
