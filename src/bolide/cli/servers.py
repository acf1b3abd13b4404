"""``bolide standalone``, ``bolide namesrv`` and ``bolide broker``: run the servers.

Each command logs to stderr and to ``<data-dir>/logs/bolide.log`` (rotated), prints exactly
one line on stdout once its listeners accept connections, and stops cleanly on SIGINT or
SIGTERM (brokers unregister, write consumer offsets and tables, and close the store with a
checkpoint). The ready lines::

    bolide ready namesrv=127.0.0.1:9876 broker=127.0.0.1:10911 proxy=127.0.0.1:8081 \
        metrics=127.0.0.1:5557 dashboard=127.0.0.1:8080                (standalone)
    bolide ready namesrv=127.0.0.1:9876                              (namesrv)
    bolide ready broker=127.0.0.1:10911                              (broker)

With ``--json`` the line is a JSON object instead (``{"namesrv": "...", "broker": "..."}``).
Port 0 asks the system for a free port; the ready line shows the real one.

A broker reads RocketMQ's broker.conf (``-c/--config``, RocketMQ key names); command-line
flags win over the file. The data directory holds ``store/`` (commit log, consume queues,
index, ``config/*.json``) and ``logs/``.
"""

from __future__ import annotations

import asyncio
import logging
import logging.handlers
import secrets
from pathlib import Path
from typing import Annotated, Any

import typer

from bolide.base import limits
from bolide.base.errors import BolideError
from bolide.broker.broker import Broker
from bolide.broker.config import DEFAULT_METRICS_PORT, BrokerConfig, read_broker_conf
from bolide.broker.security import (
    acl_file_path,
    inner_request_signer,
    tls_client_settings,
    tls_server_settings,
)
from bolide.cli.controller import controller as controller_command
from bolide.cli.controller import start_controller
from bolide.cli.dashboard import (
    DEFAULT_DASHBOARD_PORT,
    auth_v2_accounts,
    start_dashboard,
    validator_accounts,
)
from bolide.cli.dashboard import dashboard as dashboard_command
from bolide.cli.proxy import DEFAULT_PROXY_PORT, MinInvisibleOption, start_proxy
from bolide.cli.runtime import (
    DEFAULT_DATA_DIR,
    TlsCertOption,
    TlsClientAuthOption,
    TlsKeyOption,
    TlsTrustCertOption,
    advertised_address,
    advertised_host,
    configure_file_logging,
    print_ready,
    run_until_signalled,
    tls_server_from_flags,
)
from bolide.controller.settings import DEFAULT_CONTROLLER_PORT
from bolide.namesrv.namesrv import NameServer
from bolide.remoting.tls import TlsMode
from bolide.standalone.assembly import Assembly

__all__ = ["broker", "namesrv", "register", "standalone"]

_log = logging.getLogger("bolide.cli")

DEFAULT_NAMESRV_PORT = 9876
DEFAULT_BROKER_PORT = 10911
DEFAULT_NAMESRV_ADDRESS = "127.0.0.1:9876"


def register(app: typer.Typer) -> None:
    """Add the server commands to ``app``."""
    app.command("standalone")(standalone)
    app.command("namesrv")(namesrv)
    app.command("broker")(broker)
    app.command("dashboard")(dashboard_command)
    app.command("controller")(controller_command)


# --- commands ---------------------------------------------------------------------------------

DataDirOption = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Data directory (store/ and logs/). Default: ./data."),
]
HostOption = Annotated[str, typer.Option("--host", help="Address the listeners bind.")]
FlushOption = Annotated[str | None, typer.Option("--flush", help="async or sync disk flush.")]
ConfigOption = Annotated[
    Path | None, typer.Option("-c", "--config", help="RocketMQ broker.conf to read.")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print the ready line as JSON.")]
NoVipOption = Annotated[
    bool,
    typer.Option(
        "--no-vip",
        help="Do not open the VIP channel (port - 2, clients up to RocketMQ 4.4.0 use it). "
        "broker.conf: vipChannelEnabled=false.",
    ),
]


def standalone(
    data_dir: DataDirOption = None,
    host: HostOption = "127.0.0.1",
    namesrv_port: Annotated[int, typer.Option("--namesrv-port", help="0: any.")] = (
        DEFAULT_NAMESRV_PORT
    ),
    broker_port: Annotated[
        int | None,
        typer.Option("--broker-port", help="Broker port, 0: any. Default: 10911 or listenPort."),
    ] = None,
    flush: FlushOption = None,
    config: ConfigOption = None,
    json_output: JsonOption = False,
    proxy_port: Annotated[
        int, typer.Option("--proxy-port", help="5.x gRPC proxy port, 0: any.")
    ] = DEFAULT_PROXY_PORT,
    no_proxy: Annotated[bool, typer.Option("--no-proxy", help="Run without the proxy.")] = False,
    proxy_min_invisible_ms: MinInvisibleOption = limits.PROXY_MIN_INVISIBLE_TIME_FOR_RECEIVE_MS,
    metrics_port: Annotated[
        int, typer.Option("--metrics-port", help="Prometheus /metrics port, 0: any.")
    ] = DEFAULT_METRICS_PORT,
    no_metrics: Annotated[
        bool, typer.Option("--no-metrics", help="Serve no Prometheus /metrics.")
    ] = False,
    dashboard_port: Annotated[
        int, typer.Option("--dashboard-port", help="Web dashboard port, 0: any.")
    ] = DEFAULT_DASHBOARD_PORT,
    no_dashboard: Annotated[
        bool, typer.Option("--no-dashboard", help="Run no web dashboard.")
    ] = False,
    no_vip: NoVipOption = False,
) -> None:
    """Run a name server, a broker and the 5.x gRPC proxy in one process."""
    flags = {"vipChannelEnabled": "false"} if no_vip else {}
    if not no_metrics:
        flags.update(_metrics_flags(host, metrics_port))
    broker_config, directory = _broker_config(config, data_dir, host, broker_port, flush, flags)
    configure_file_logging(directory)

    async def serve(stop: asyncio.Event) -> None:
        name_server, inner_config, inner = _standalone_name_server(
            broker_config, host, namesrv_port
        )
        assembly = Assembly()
        try:
            await assembly.start_name_server(name_server)
            namesrv_address = f"{advertised_host(host)}:{name_server.port}"
            server = await assembly.start_broker(
                Broker(
                    inner_config.replace(namesrv_addresses=(namesrv_address,)),
                    host=host,
                    config_file=config,
                )
            )
            proxy = web = None
            try:
                listeners = {"namesrv": namesrv_address, "broker": server.address}
                if not no_proxy:
                    proxy = await start_proxy(
                        [namesrv_address],
                        host,
                        proxy_port,
                        proxy_min_invisible_ms,
                        **_proxy_security(server, inner_config, inner),
                    )
                    listeners["proxy"] = f"{advertised_host(host)}:{proxy.port}"
                listeners.update(_metrics_listener(server))
                if not no_dashboard:
                    web = await start_dashboard(
                        namesrv_address,
                        host,
                        dashboard_port,
                        accounts=server_accounts(server),
                        tls=tls_client_settings(inner_config),
                    )
                if web is not None:
                    listeners["dashboard"] = advertised_address(host, web.port)
                print_ready(json_output, **listeners)
                await stop.wait()
            finally:
                if web is not None:
                    await web.stop()
                if proxy is not None:
                    await proxy.stop()
        finally:
            await assembly.stop()

    run_until_signalled(serve)


def namesrv(
    host: HostOption = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="Name server port, 0: any.")] = (
        DEFAULT_NAMESRV_PORT
    ),
    data_dir: Annotated[Path, typer.Option("--data-dir", help="Where logs/ goes.")] = (
        DEFAULT_DATA_DIR
    ),
    json_output: JsonOption = False,
    acl_file: Annotated[
        Path | None,
        typer.Option("--acl-file", help="plain_acl.yml: turn the ACL on (docs/security.md)."),
    ] = None,
    tls_mode: Annotated[
        str, typer.Option("--tls-mode", help="disabled, permissive or enforcing.")
    ] = "disabled",
    tls_cert: TlsCertOption = None,
    tls_key: TlsKeyOption = None,
    tls_trust_cert: TlsTrustCertOption = None,
    tls_need_client_auth: TlsClientAuthOption = "none",
    controller_etcd: Annotated[
        str | None,
        typer.Option(
            "--controller-etcd",
            help="Embed a controller (enableControllerInNamesrv) on etcd H:P[,H:P...].",
        ),
    ] = None,
    controller_port: Annotated[
        int, typer.Option("--controller-port", help="The embedded controller's port, 0: any.")
    ] = DEFAULT_CONTROLLER_PORT,
) -> None:
    """Run a name server (with --controller-etcd, a controller beside it)."""
    configure_file_logging(data_dir)
    tls = tls_server_from_flags(tls_mode, tls_cert, tls_key, tls_trust_cert, tls_need_client_auth)

    async def serve(stop: asyncio.Event) -> None:
        name_server = NameServer(host, port, tls=tls, acl_file=acl_file)
        await name_server.start()
        embedded = None
        try:
            listeners = {"namesrv": f"{advertised_host(host)}:{name_server.port}"}
            if controller_etcd is not None:
                embedded = await start_controller(controller_etcd, host, controller_port)
                listeners["controller"] = embedded.address
            print_ready(json_output, **listeners)
            await stop.wait()
        finally:
            if embedded is not None:
                await embedded.stop()
            await name_server.stop()

    run_until_signalled(serve)


def broker(
    config: ConfigOption = None,
    namesrv_addresses: Annotated[
        str | None,
        typer.Option(
            "--namesrv",
            envvar="BOLIDE_NAMESRV",
            help="Name servers, host:port separated by ';'. Default: namesrvAddr or "
            "127.0.0.1:9876.",
        ),
    ] = None,
    host: HostOption = "127.0.0.1",
    port: Annotated[
        int | None,
        typer.Option("--port", help="Broker port, 0: any. Default: 10911 or listenPort."),
    ] = None,
    data_dir: DataDirOption = None,
    name: Annotated[
        str | None, typer.Option("--name", help="brokerName. Default: broker-a.")
    ] = None,
    flush: FlushOption = None,
    json_output: JsonOption = False,
    no_vip: NoVipOption = False,
) -> None:
    """Run a broker that registers with the given name servers."""
    flags = {} if name is None else {"brokerName": name}
    if no_vip:
        flags["vipChannelEnabled"] = "false"
    if namesrv_addresses is not None:
        flags["namesrvAddr"] = namesrv_addresses
    broker_config, directory = _broker_config(config, data_dir, host, port, flush, flags)
    if not broker_config.namesrv_addresses:
        broker_config = broker_config.replace(namesrv_addresses=(DEFAULT_NAMESRV_ADDRESS,))
    configure_file_logging(directory)

    async def serve(stop: asyncio.Event) -> None:
        server = Broker(broker_config, host=host, config_file=config)
        await server.start()
        try:
            print_ready(json_output, broker=server.address, **_metrics_listener(server))
            await stop.wait()
        finally:
            await server.stop()

    run_until_signalled(serve)


# --- configuration ----------------------------------------------------------------------------


def _standalone_name_server(
    config: BrokerConfig, host: str, port: int
) -> tuple[NameServer, BrokerConfig, tuple[tuple[str, str], ...]]:
    """The name server of ``bolide standalone``: the broker's TLS and accounts file. With the
    ACL on, the broker registers with a fresh in-memory admin account (unless broker.conf's
    innerClientAuthenticationCredentials names one); over enforced TLS it registers over TLS
    on loopback, in the same process, without checking its own certificate. Returns the name
    server, the broker's config, and the in-memory account (if one was made)."""
    inner: tuple[tuple[str, str], ...] = ()
    secured = config.acl_enable or config.authentication_enabled
    if secured and config.inner_client_credentials is None:
        credentials = (f"bolide-inner-{secrets.token_hex(8)}", secrets.token_urlsafe(24))
        config = config.replace(inner_client_credentials=credentials)
        inner = (credentials,)
    if config.tls_server_mode is TlsMode.ENFORCING and not config.tls_enable:
        config = config.replace(tls_enable=True, tls_client_auth_server=False)
    name_server = NameServer(
        host,
        port,
        tls=tls_server_settings(config),
        acl_file=acl_file_path(config) if config.acl_enable else None,
        inner_accounts=inner,
    )
    return name_server, config, inner


def server_accounts(server: Broker) -> Any:
    """The dashboard's logins in a standalone: ACL 2.0's users (Super: admin), else ACL 1.0's
    accounts, else None (an open dashboard)."""
    if server.auth is not None:
        return auth_v2_accounts(server.auth)
    return validator_accounts(server.acl)


def _proxy_security(
    broker: Broker, config: BrokerConfig, inner: tuple[tuple[str, str], ...]
) -> dict[str, Any]:
    """The standalone proxy's ACL and TLS: it checks 5.x clients' authorization headers
    against the broker's accounts and reaches the broker and name server like the broker
    does (the in-memory account, which the broker then accepts too; TLS when enforced); its
    gRPC port takes the broker's tls.server.* settings (disabled, permissive, enforcing)."""
    tls = {"tls": tls_client_settings(config), "server_tls": tls_server_settings(config)}
    auth = broker.auth
    if auth is not None:  # ACL 2.0: the same users and decision as the broker's
        for username, password in inner:
            auth.add_inner_user(username, password)
        return {
            "authenticator": auth.verify_grpc_authorization,
            "authorizer": auth.authorize_grpc,
            "sign": inner_request_signer(config),
            **tls,
        }
    validator = broker.acl
    if validator is None:
        return tls
    for access_key, secret_key in inner:
        validator.add_inner_account(access_key, secret_key)
    return {
        "authenticator": validator.verify_grpc_authorization,
        "authorizer": validator.authorize_grpc,
        "sign": inner_request_signer(config),
        **tls,
    }


def _broker_config(
    config_path: Path | None,
    data_dir: Path | None,
    host: str,
    port: int | None,
    flush: str | None,
    flags: dict[str, str],
) -> tuple[BrokerConfig, Path]:
    """broker.conf (if any) with the flags on top (``flags``: more of them, by broker.conf
    key), and the data directory for logs.

    The store goes to ``<data-dir>/store`` when ``--data-dir`` is given, else to the file's
    storePathRootDir, else to ``./data/store``. Exits with code 2 on a configuration error.
    """
    try:
        values = read_broker_conf(config_path) if config_path is not None else {}
        overrides: dict[str, object] = {}
        if data_dir is not None or "storePathRootDir" not in values:
            directory = data_dir if data_dir is not None else DEFAULT_DATA_DIR
            overrides["storePathRootDir"] = str(directory / "store")
        else:
            directory = Path(values["storePathRootDir"]).expanduser().parent
        if port is not None:
            overrides["listenPort"] = str(port)
        elif "listenPort" not in values:
            overrides["listenPort"] = str(DEFAULT_BROKER_PORT)
        if "brokerIP1" not in values:
            overrides["brokerIP1"] = advertised_host(host)
        if flush is not None:
            overrides["flushDiskType"] = _flush_disk_type(flush)
        overrides.update(flags)
        return BrokerConfig.from_mapping(values, overrides), directory
    except BolideError as error:
        typer.echo(f"bolide: {error}", err=True)
        raise typer.Exit(code=2) from error


def _metrics_flags(host: str, port: int) -> dict[str, str]:
    """broker.conf keys that turn /metrics on at ``host:port`` (standalone's default)."""
    return {
        "metricsExporterType": "PROM",
        "metricsPromExporterHost": host,
        "metricsPromExporterPort": str(port),
    }


def _metrics_listener(server: Broker) -> dict[str, str]:
    """``{"metrics": "H:P"}`` for the ready line when the broker serves /metrics."""
    address = server.metrics_address
    if address is None:
        return {}
    host, port = address.rsplit(":", 1)
    return {"metrics": f"{advertised_host(host)}:{port}"}


def _flush_disk_type(text: str) -> str:
    lowered = text.lower()
    if lowered not in ("async", "sync"):
        raise typer.BadParameter(f"--flush must be async or sync, not {text!r}")
    return "SYNC_FLUSH" if lowered == "sync" else "ASYNC_FLUSH"
