"""``bolide proxy``: the RocketMQ 5.x gRPC front end on its own, and the options
``bolide standalone`` uses to run it beside the broker.

    bolide proxy --namesrv 127.0.0.1:9876 [--host 127.0.0.1] [--port 8081]

prints ``bolide ready proxy=HOST:PORT`` once it accepts connections.
"""

from __future__ import annotations

import asyncio
from typing import Annotated

import typer

from bolide.base import limits
from bolide.proxy.server import ProxyConfig, ProxyServer

__all__ = ["DEFAULT_PROXY_PORT", "MinInvisibleOption", "proxy", "register", "start_proxy"]

DEFAULT_PROXY_PORT = 8081

MinInvisibleOption = Annotated[
    int,
    typer.Option(
        "--proxy-min-invisible-ms",
        min=0,
        help="Shortest invisible time a 5.x receive may ask for (Apache's "
        "minInvisibleTimeMillsForRecv, 10 s).",
    ),
]


def register(app: typer.Typer) -> None:
    app.command("proxy")(proxy)


async def start_proxy(
    namesrv_addresses: list[str], host: str, port: int, min_invisible_time_ms: int
) -> ProxyServer:
    """A started proxy (raises OSError when the port cannot be bound)."""
    server = ProxyServer(
        namesrv_addresses,
        host=host,
        port=port,
        config=ProxyConfig(min_invisible_time_ms=min_invisible_time_ms),
    )
    await server.start()
    return server


def proxy(
    namesrv_addresses: Annotated[
        str,
        typer.Option(
            "--namesrv", envvar="BOLIDE_NAMESRV", help="Name servers, host:port separated by ';'."
        ),
    ] = "127.0.0.1:9876",
    host: Annotated[str, typer.Option("--host", help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="gRPC port, 0: any.")] = DEFAULT_PROXY_PORT,
    min_invisible_ms: MinInvisibleOption = limits.PROXY_MIN_INVISIBLE_TIME_FOR_RECEIVE_MS,
    json_output: Annotated[bool, typer.Option("--json", help="Ready line as JSON.")] = False,
) -> None:
    """Run the 5.x gRPC proxy in front of the name servers' brokers."""
    # Imported here: the server helpers live beside the other server commands.
    from bolide.cli.servers import DEFAULT_DATA_DIR, _configure_logging, _ready, _run

    _configure_logging(DEFAULT_DATA_DIR)
    addresses = [part.strip() for part in namesrv_addresses.split(";") if part.strip()]

    async def serve(stop: asyncio.Event) -> None:
        server = await start_proxy(addresses, host, port, min_invisible_ms)
        try:
            _ready(json_output, proxy=server.address)
            await stop.wait()
        finally:
            await server.stop()

    _run(serve)
