"""``bolide proxy``: the RocketMQ 5.x gRPC front end on its own, and the options
``bolide standalone`` uses to run it beside the broker.

    bolide proxy --namesrv 127.0.0.1:9876 [--host 127.0.0.1] [--port 8081] [--data-dir ./data]

prints ``bolide ready proxy=HOST:PORT`` once it accepts connections.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer

from bolide.acl import AclConfigError, AclFileWatcher, open_acl
from bolide.base import limits
from bolide.base.clock import SystemClock
from bolide.base.errors import ConfigError
from bolide.cli.runtime import (
    DEFAULT_DATA_DIR,
    TlsCertOption,
    TlsClientAuthOption,
    TlsKeyOption,
    TlsTrustCertOption,
    configure_file_logging,
    print_ready,
    run_until_signalled,
    tls_server_from_flags,
)
from bolide.cli.security import client_options
from bolide.client.security import credentials_of
from bolide.proxy.authorization import Authorizer
from bolide.proxy.server import ProxyConfig, ProxyServer
from bolide.proxy.service import Authenticator
from bolide.remoting.client_pool import RequestHook
from bolide.remoting.tls import TlsClientSettings, TlsServerSettings

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
    namesrv_addresses: list[str],
    host: str,
    port: int,
    min_invisible_time_ms: int,
    *,
    authenticator: Authenticator | None = None,
    authorizer: Authorizer | None = None,
    sign: RequestHook | None = None,
    tls: TlsClientSettings | None = None,
    server_tls: TlsServerSettings | None = None,
) -> ProxyServer:
    """A started proxy (raises OSError when the port cannot be bound). ``authenticator``,
    ``sign``, ``tls`` and ``server_tls``: see :class:`~bolide.proxy.server.ProxyConfig` (ACL
    and TLS)."""
    server = ProxyServer(
        namesrv_addresses,
        host=host,
        port=port,
        config=ProxyConfig(
            min_invisible_time_ms=min_invisible_time_ms,
            authenticator=authenticator,
            authorizer=authorizer,
            sign=sign,
            tls=tls,
            server_tls=server_tls,
        ),
    )
    try:
        await server.start()
    except OSError as error:
        raise OSError(
            error.errno,
            f"the 5.x gRPC proxy cannot listen on {host}:{port} ({error.strerror}); "
            "choose another --proxy-port, or --no-proxy",
        ) from error
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
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="Where logs/ goes. Default: ./data.")
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Ready line as JSON.")] = False,
    acl_file: Annotated[
        Path | None,
        typer.Option(
            "--acl-file",
            help="plain_acl.yml: check 5.x clients' authorization against these accounts "
            "(docs/security.md); sign the proxy's own requests with --access-key/--secret-key.",
        ),
    ] = None,
    tls_mode: Annotated[
        str, typer.Option("--tls-mode", help="gRPC port: disabled, permissive or enforcing.")
    ] = "disabled",
    tls_cert: TlsCertOption = None,
    tls_key: TlsKeyOption = None,
    tls_trust_cert: TlsTrustCertOption = None,
    tls_need_client_auth: TlsClientAuthOption = "none",
) -> None:
    """Run the 5.x gRPC proxy in front of the name servers' brokers."""
    server_tls = tls_server_from_flags(
        tls_mode, tls_cert, tls_key, tls_trust_cert, tls_need_client_auth
    )
    configure_file_logging(data_dir if data_dir is not None else DEFAULT_DATA_DIR)
    addresses = [part.strip() for part in namesrv_addresses.split(";") if part.strip()]

    options = client_options()
    credentials = credentials_of(options["access_key"], options["secret_key"])

    async def serve(stop: asyncio.Event) -> None:
        watcher: AclFileWatcher | None = None
        authenticator: Authenticator | None = None
        authorizer: Authorizer | None = None
        if acl_file is not None:
            try:
                accounts, watcher = open_acl(acl_file, SystemClock())
            except (AclConfigError, OSError) as error:
                raise ConfigError(
                    f"proxy ACL file cannot be used, not starting: {error}"
                ) from error
            authenticator = accounts.validator.verify_grpc_authorization
            authorizer = accounts.validator.authorize_grpc
            watcher.start()
        try:
            server = await start_proxy(
                addresses,
                host,
                port,
                min_invisible_ms,
                authenticator=authenticator,
                authorizer=authorizer,
                sign=None if credentials is None else credentials.sign,
                tls=options["tls"],
                server_tls=server_tls if server_tls.enabled else None,
            )
            try:
                print_ready(json_output, proxy=server.address)
                await stop.wait()
            finally:
                await server.stop()
        finally:
            if watcher is not None:
                await watcher.stop()

    run_until_signalled(serve)
