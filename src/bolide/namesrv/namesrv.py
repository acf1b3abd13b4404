"""NameServer: the composition root of one name server (no logic of its own).

It wires route tables, KV config, handlers, a remoting server and the expiry scan together.
Every instance owns all of its state, so several name servers can run side by side in one
process (tests, ``bolide standalone``).
"""

from __future__ import annotations

import logging
from pathlib import Path

from bolide.acl import (
    NAMESRV_ADMIN_REQUEST_CODES,
    AclConfigError,
    AclFile,
    AclFileWatcher,
    acl_request_check,
    open_acl,
)
from bolide.base import limits
from bolide.base.clock import Clock, SystemClock
from bolide.base.errors import ConfigError, ConnectionClosedError
from bolide.base.service import Service
from bolide.namesrv.config_handlers import NamesrvConfigHandlers
from bolide.namesrv.handlers import HANDLER_FAMILY, NameServerHandlers
from bolide.namesrv.housekeeping import BrokerHousekeeping
from bolide.namesrv.kv_config import KvConfig
from bolide.namesrv.routes import ConnectionKey, RouteTables
from bolide.remoting import Connection, Dispatcher, RemotingServer
from bolide.remoting.tls import TlsServerSettings

_log = logging.getLogger("bolide.namesrv")


class NameServer:
    """One name server listening on ``host:port`` (port 0 picks a free port).

    ``clock`` (default the system clock) times broker expiry; ``order_message_enable``
    (default False) adds ``orderTopicConf`` to routes from the ORDER_TOPIC_CONFIG KV items.
    ``tls`` serves TLS as its mode says. ``acl_file`` (RocketMQ's plain_acl.yml) turns the ACL
    on: every request needs a valid signature, and the admin requests (broker registration,
    KV changes, topic deletion...) an admin account; ``inner_accounts`` are (access key,
    secret) pairs accepted as admin besides the file's (``bolide standalone``'s broker).
    Call :meth:`start` before use and :meth:`stop` when done.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        clock: Clock | None = None,
        *,
        order_message_enable: bool = False,
        scan_interval_ms: int = limits.NAMESRV_SCAN_INTERVAL_MS,
        tls: TlsServerSettings | None = None,
        acl_file: Path | None = None,
        inner_accounts: tuple[tuple[str, str], ...] = (),
        delete_topic_with_broker_registration: bool = False,
    ) -> None:
        self._clock = clock or SystemClock()
        self._acl_path = acl_file
        self._inner_accounts = inner_accounts
        self.acl: AclFile | None = None
        """The accounts file in force (None: ACL off)."""
        self._acl_watcher: AclFileWatcher | None = None
        self.routes = RouteTables(
            self._clock,
            delete_topic_with_broker_registration=delete_topic_with_broker_registration,
        )
        """The route tables (read them for inspection; requests change them)."""
        self.kv_config = KvConfig()
        self._handlers = NameServerHandlers(
            self.routes, self.kv_config, order_message_enable=order_message_enable
        )
        dispatcher = Dispatcher()
        self._handlers.install(dispatcher)
        self._scan_interval_ms = scan_interval_ms
        NamesrvConfigHandlers(
            self._config_settings, self._handlers.set_order_message_enable
        ).install(dispatcher, HANDLER_FAMILY)
        self._dispatcher = dispatcher
        self._housekeeping = BrokerHousekeeping(
            self.routes,
            self._clock,
            close_connection=_close_expired,
            scan_interval_ms=scan_interval_ms,
            on_crash=self._crashed,
        )
        self._server = RemotingServer(
            dispatcher,
            host,
            port,
            on_connection_close=self._connection_closed,
            tls=tls if tls is not None and tls.enabled else None,
        )
        self.crash: BaseException | None = None
        """Set when the expiry scan died; the name server keeps answering without it."""

    def _config_settings(self) -> dict[str, str]:
        """The settings GET_NAMESRV_CONFIG (319) shows, broker.conf-style names."""
        return {
            "listenPort": str(self.port),  # requests come only once the server listens
            "deleteTopicWithBrokerRegistration": str(
                self.routes.delete_topic_with_broker_registration
            ).lower(),
            "orderMessageEnable": str(self._handlers.order_message_enable).lower(),
            "scanNotActiveBrokerInterval": str(self._scan_interval_ms),
        }

    @property
    def address(self) -> str:
        """``"host:port"`` that brokers and clients use; valid after :meth:`start`."""
        return self._server.address

    @property
    def port(self) -> int:
        """The port listened on; valid after :meth:`start`."""
        return self._server.port

    @property
    def connections(self) -> frozenset[Connection]:
        """The connections open right now (brokers, clients and admin tools alike)."""
        return self._server.connections

    @property
    def housekeeping(self) -> BrokerHousekeeping:
        return self._housekeeping

    async def start(self) -> None:
        """Load the ACL (if any), listen, then start the expiry scan.

        Raises OSError when the port cannot be bound, ConfigError when the ACL file or a TLS
        file cannot be used (the name server does not start open).
        """
        if self._acl_path is not None:
            self._open_acl(self._acl_path)
        await self._server.start()
        self._housekeeping.start()
        if self._acl_watcher is not None:
            self._acl_watcher.start()
        _log.info("name server listening on %s", self.address)

    async def stop(self, timeout_ms: int = limits.REMOTING_STOP_GRACE_MS) -> None:
        """Stop the scan and the listener, closing every connection. Idempotent."""
        watcher, self._acl_watcher = self._acl_watcher, None
        if watcher is not None:
            await watcher.stop(timeout_ms)
        await self._housekeeping.stop(timeout_ms)
        await self._server.stop(timeout_ms)

    def _open_acl(self, path: Path) -> None:
        try:
            self.acl, self._acl_watcher = open_acl(path, self._clock, on_crash=self._acl_crashed)
        except (AclConfigError, OSError) as error:
            raise ConfigError(
                f"name server ACL file cannot be used, not starting: {error}"
            ) from error
        for access_key, secret_key in self._inner_accounts:
            self.acl.validator.add_inner_account(access_key, secret_key)
        self._dispatcher.request_check = acl_request_check(
            self.acl.validator, admin_codes=NAMESRV_ADMIN_REQUEST_CODES
        )
        _log.info("name server ACL on: %s", path)

    def _acl_crashed(self, service: Service, error: BaseException) -> None:
        self.crash = error
        _log.error("name server %s: %s stopped; ACL file changes are not loaded", self.address,
                   service.name)  # fmt: skip

    def _connection_closed(self, connection: Connection) -> None:
        self._housekeeping.on_connection_close(connection)

    def _crashed(self, service: Service, error: BaseException) -> None:
        self.crash = error
        _log.error(
            "name server %s: %s stopped; brokers no longer expire", self.address, service.name
        )


def _close_expired(connection_key: ConnectionKey) -> None:
    if isinstance(connection_key, Connection):
        connection_key.close(ConnectionClosedError("broker registration expired"))
