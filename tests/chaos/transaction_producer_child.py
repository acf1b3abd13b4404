"""Child process for the producer-kill test: a transaction producer that leaves one
transaction undecided, then waits to be killed.

Usage: ``python transaction_producer_child.py NAMESRV GROUP TOPIC``. Prints
``SENT <msg id>`` once the half message is stored and its END_TRANSACTION (UNKNOW) sent; its
checker answers UNKNOW too, so only another producer of the group can settle it.
"""

from __future__ import annotations

import asyncio
import sys

from bolide.client.message import Message, MessageExt
from bolide.client.producer.transaction import LocalTransactionState, TransactionProducer


def undecided(message: MessageExt) -> LocalTransactionState:
    return LocalTransactionState.UNKNOW


async def main(namesrv: str, group: str, topic: str) -> None:
    producer = TransactionProducer(group, namesrv, checker=undecided, instance_name="doomed")
    await producer.start()
    result = await producer.send_in_transaction(
        Message(topic, b"orphaned by a kill"), lambda message, arg: LocalTransactionState.UNKNOW
    )
    print(f"SENT {result.msg_id}", flush=True)
    await asyncio.Event().wait()  # until the parent kills this process


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
