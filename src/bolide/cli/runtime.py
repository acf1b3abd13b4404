"""What every server command shares at run time: logging (stderr, and a rotated file under
the data directory), the one ready line on stdout, running until SIGINT/SIGTERM with a bound
on the orderly stop, the advertised address of a listener and the TLS server flags.
``bolide standalone``, ``namesrv``, ``broker`` (:mod:`.servers`), ``controller``,
``dashboard`` and ``proxy`` use it; it imports none of them (no circle).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import logging.handlers
import os
import signal
import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import orjson
import typer

from bolide.base import limits
from bolide.base.errors import BolideError
from bolide.base.gc_pause import freeze_startup_objects
from bolide.remoting.loop import run
from bolide.remoting.tls import ClientAuth, TlsMode, TlsServerSettings

__all__ = [
    "DEFAULT_DATA_DIR",
    "TlsCertOption",
    "TlsClientAuthOption",
    "TlsKeyOption",
    "TlsTrustCertOption",
    "advertised_address",
    "advertised_host",
    "configure_console_logging",
    "configure_file_logging",
    "print_ready",
    "run_until_signalled",
    "tls_server_from_flags",
]

_log = logging.getLogger("bolide.cli")

DEFAULT_DATA_DIR = Path("./data")
_WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})
_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"

TlsCertOption = Annotated[Path | None, typer.Option("--tls-cert", help="Server cert (PEM).")]
TlsKeyOption = Annotated[Path | None, typer.Option("--tls-key", help="Server key (PEM).")]
TlsTrustCertOption = Annotated[
    Path | None, typer.Option("--tls-trust-cert", help="CA bundle for client certs.")
]
TlsClientAuthOption = Annotated[
    str, typer.Option("--tls-need-client-auth", help="none, optional or require.")
]


def tls_server_from_flags(
    mode: str, cert: Path | None, key: Path | None, trust: Path | None, client_auth: str
) -> TlsServerSettings:
    """The name server's TLS flags, as broker.conf's tls.server.* keys would give them."""
    try:
        return TlsServerSettings(
            mode=TlsMode(mode.lower()),
            cert_path=cert,
            key_path=key,
            trust_cert_path=trust,
            client_auth=ClientAuth(client_auth.lower()),
        )
    except ValueError as error:
        typer.echo(f"bolide: {error}", err=True)
        raise typer.Exit(code=2) from error


def advertised_host(host: str) -> str:
    """The address to tell others for a listener bound to ``host`` (loopback for a wildcard)."""
    return "127.0.0.1" if host in _WILDCARD_HOSTS else host


def advertised_address(host: str, port: int) -> str:
    """``host:port`` as others reach a listener bound to ``host``."""
    return f"{advertised_host(host)}:{port}"


def configure_console_logging() -> None:
    """INFO and above of ``bolide.*`` to stderr (commands without a data directory)."""
    logger = logging.getLogger("bolide")
    logger.setLevel(logging.INFO)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(_LOG_FORMAT))
    logger.addHandler(handler)


def configure_file_logging(data_dir: Path) -> None:
    """INFO and above of ``bolide.*`` to stderr and to ``<data_dir>/logs/bolide.log``."""
    logger = logging.getLogger("bolide")
    logger.setLevel(logging.INFO)
    formatter = logging.Formatter(_LOG_FORMAT)
    to_stderr = logging.StreamHandler(sys.stderr)
    to_stderr.setFormatter(formatter)
    logger.addHandler(to_stderr)
    log_dir = data_dir / "logs"
    try:
        log_dir.mkdir(parents=True, exist_ok=True)
        to_file = logging.handlers.RotatingFileHandler(
            log_dir / "bolide.log",
            maxBytes=limits.SERVER_LOG_FILE_MAX_BYTES,
            backupCount=limits.SERVER_LOG_FILE_BACKUP_COUNT,
            encoding="utf-8",
        )
    except OSError as error:
        _log.warning("logging to stderr only: cannot open %s: %s", log_dir, error)
        return
    to_file.setFormatter(formatter)
    logger.addHandler(to_file)


def print_ready(json_output: bool, **addresses: str) -> None:
    """Print the one ready line on stdout, flushed at once (scripts and tests wait for it).
    The startup is over: its objects leave the collector's scans (base/gc_pause.py)."""
    frozen_count = freeze_startup_objects()
    if json_output:
        line = orjson.dumps(addresses).decode()
    else:
        line = "bolide ready " + " ".join(f"{key}={value}" for key, value in addresses.items())
    print(line, flush=True)
    _log.info("%d start-up objects exempt from full GC passes", frozen_count)


def run_until_signalled(serve: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    """Run ``serve`` on a fresh (uv)loop until SIGINT/SIGTERM sets its stop event.

    Exits with code 1 when the servers cannot start (port in use, damaged store...).
    """

    async def main() -> None:
        stop = asyncio.Event()
        with _signals_set(stop):
            await serve(stop)

    try:
        run(main())
    except (BolideError, OSError) as error:
        _log.error("bolide stopped: %s", error)
        typer.echo(f"bolide: {error}", err=True)
        raise typer.Exit(code=1) from error
    _log.info("bolide stopped cleanly")


@contextlib.contextmanager
def _signals_set(stop: asyncio.Event) -> Iterator[None]:
    """SIGINT/SIGTERM set ``stop``; the orderly stop then has ``SERVER_SIGNAL_STOP_TIMEOUT_MS``,
    after which the process exits with code 1 (logged) instead of lingering."""
    loop = asyncio.get_running_loop()
    handled = (signal.SIGINT, signal.SIGTERM)
    deadline: list[asyncio.TimerHandle] = []

    def overran() -> None:
        _log.error(
            "stop took over %d ms: exiting without finishing it",
            limits.SERVER_SIGNAL_STOP_TIMEOUT_MS,
        )
        logging.shutdown()
        os._exit(1)

    def on_signal(number: Any) -> None:
        _log.info("received %s: stopping", signal.Signals(number).name)
        stop.set()
        if not deadline:
            bound_s = limits.SERVER_SIGNAL_STOP_TIMEOUT_MS / 1000
            deadline.append(loop.call_later(bound_s, overran))

    for number in handled:
        loop.add_signal_handler(number, on_signal, number)
    try:
        yield
    finally:
        for number in handled:
            loop.remove_signal_handler(number)
        for handle in deadline:
            handle.cancel()
