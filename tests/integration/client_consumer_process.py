"""A push consumer in its own process, for the rebalance test (which kills it with SIGKILL).

``python -m tests.integration.client_consumer_process NAMESRV GROUP TOPIC INSTANCE`` prints
one line per event on stdout, flushed at once so that nothing is lost when it is killed::

    STARTING                  about to start (the join begins)
    READY                     started
    OWN <id>,<id>,...         the queue ids of TOPIC it holds after a rebalance changed them
    MSG <key>                 a message consumed (printed before the listener returns, so a
                              committed offset never covers an unprinted message)
"""

from __future__ import annotations

import asyncio
import sys

from bolide.client.config import ConsumeFrom
from bolide.client.consumer.listener import ConsumeResult
from bolide.client.consumer.push_consumer import PushConsumer
from bolide.protocol.bodies import MessageQueue
from bolide.protocol.message import MessageExt


class ReportingConsumer(PushConsumer):
    def on_assignment_changed(self, topic: str, assigned: frozenset[MessageQueue]) -> None:
        super().on_assignment_changed(topic, assigned)
        held = sorted(queue.queue_id for queue in self.process_queues if queue.topic == topic)
        if not topic.startswith("%RETRY%"):
            print("OWN " + ",".join(str(queue_id) for queue_id in held), flush=True)


async def report(messages: list[MessageExt]) -> ConsumeResult:
    for message in messages:
        print(f"MSG {message.keys}", flush=True)
    return ConsumeResult.SUCCESS


async def main(namesrv: str, group: str, topic: str, instance_name: str) -> None:
    consumer = ReportingConsumer(
        group, namesrv=namesrv, instance_name=instance_name, consume_from=ConsumeFrom.FIRST_OFFSET
    )
    consumer.subscribe(topic)
    consumer.register_listener(report)
    print("STARTING", flush=True)
    await consumer.start()
    print("READY", flush=True)
    await asyncio.Event().wait()  # until killed


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
