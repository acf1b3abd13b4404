"""Helpers for tests that drive the official RocketMQ 5.x Python SDK (PyPI
``rocketmq-python-client==5.1.2``) against ``bolide standalone`` and its gRPC proxy.

The standalone runs as a real process (started and stopped by pid); the SDK, which runs its
own threads and event loop, runs in the test process. Topics and groups are created with
Bolide's admin client before the SDK starts.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bolide
from bolide.base.children import child_environment
from bolide.protocol.bodies import SubscriptionGroupConfig

BOLIDE = str(Path(sys.executable).parent / "bolide")
READY_TIMEOUT_S = 60.0
WAIT_TIMEOUT_S = 60.0
SDK_REQUEST_TIMEOUT_S = 30
"""The SDK's deadline on each RPC (its route query, send, ack...). Generous on purpose: on a
loaded 2-core CI machine a route query to a proxy that has just started took more than the
5 s it used to be, and the SDK then fails the whole call ("failed to fetch topic route").
A receive still returns after its own long-polling time: the proxy answers by then."""


@dataclass
class Standalone:
    process: subprocess.Popen[bytes]
    ready: str
    data_dir: Path

    def address(self, role: str) -> str:
        fields = dict(part.split("=", 1) for part in self.ready.split()[2:])
        return fields[role]

    @property
    def proxy(self) -> str:
        return self.address("proxy")

    @property
    def namesrv(self) -> str:
        return self.address("namesrv")

    def kill(self) -> None:
        """kill -9, as a crash."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(READY_TIMEOUT_S)
        self._close_pipe()

    def _close_pipe(self) -> None:
        if self.process.stdout is not None:
            self.process.stdout.close()

    def stop(self) -> int:
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGTERM)
        code = self.process.wait(READY_TIMEOUT_S)
        self._close_pipe()
        return code


def start_standalone(data_dir: Path, *extra: str) -> Standalone:
    """``bolide standalone`` on free ports, with 1 s as the shortest receive invisible time."""
    process = subprocess.Popen(
        [
            BOLIDE, "standalone", "--data-dir", str(data_dir), "--namesrv-port", "0",
            "--broker-port", "0", "--proxy-port", "0", "--proxy-min-invisible-ms", "1000",
            "--no-metrics", "--no-dashboard", *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=child_environment(),  # a killed pytest leaves no server behind (issue 30)
    )  # fmt: skip
    try:
        line = _ready_line(process)
    except BaseException:  # no ready line (or the test was interrupted): stop it by its pid
        process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()
        raise
    return Standalone(process, line, data_dir)


def _ready_line(process: subprocess.Popen[bytes]) -> str:
    """The ``bolide ready`` line, waited for at most READY_TIMEOUT_S in all."""
    assert process.stdout is not None
    deadline = time.monotonic() + READY_TIMEOUT_S
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while True:
            left_s = deadline - time.monotonic()
            if left_s <= 0 or not selector.select(left_s):
                raise TimeoutError("bolide standalone printed no ready line in time")
            line = process.stdout.readline()
            if line.startswith(b"bolide ready"):
                return line.decode().strip()
            if not line:
                process.wait(READY_TIMEOUT_S)
                raise RuntimeError(f"bolide standalone exited with {process.returncode}")


@contextlib.contextmanager
def standalone(data_dir: Path, *extra: str) -> Iterator[Standalone]:
    server = start_standalone(data_dir, *extra)
    try:
        yield server
    finally:
        server.stop()


def create_topic(namesrv: str, topic: str, message_type: str = "NORMAL", queues: int = 4) -> None:
    with bolide.AdminClient(namesrv) as admin:
        admin.create_topic(
            topic,
            queue_count=queues,
            order=message_type == "FIFO",
            attributes={"message.type": message_type},
        )


def create_group(
    namesrv: str, group: str, *, orderly: bool = False, retry_max_times: int = 16
) -> None:
    config = SubscriptionGroupConfig(
        group, consume_orderly_enable=orderly, retry_max_times=retry_max_times
    )
    with bolide.AdminClient(namesrv) as admin:
        admin.create_group(config)


def wait_until(predicate: Callable[[], bool], timeout_s: float = WAIT_TIMEOUT_S) -> None:
    """Poll ``predicate`` until it holds; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.05)


def sdk_message(topic: str, body: bytes, **fields: Any) -> Any:
    from rocketmq import Message

    message = Message()
    message.topic = topic
    message.body = body
    for name, value in fields.items():
        if name == "keys":
            message.keys = value
        elif name == "properties":
            for key, text in value.items():
                message.add_property(key, text)
        else:
            setattr(message, name, value)
    return message


def configuration(endpoint: str) -> Any:
    from rocketmq import ClientConfiguration, Credentials

    return ClientConfiguration(endpoint, Credentials(), request_timeout=SDK_REQUEST_TIMEOUT_S)
