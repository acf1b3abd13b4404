"""The broker's security wiring: the ACL on every listener, its hot reload, the signer of the
broker's own requests, and the one start-up warning about settings Bolide does not honour.

``aclEnable=true`` loads ``aclFile`` before the broker listens; a missing or malformed file
stops the start with :class:`~bolide.base.errors.ConfigError` naming the file and the reason
(a broker must not run open when its configuration says it is closed). Every listener shares
the broker's dispatcher (the VIP channel too), so one request check covers them all.
"""

from __future__ import annotations

import logging
from pathlib import Path

from bolide.acl import AclConfigError, AclFile, AclFileWatcher, acl_request_check, open_acl
from bolide.acl.guard import auth_v2_request_check
from bolide.acl.migration import migrate
from bolide.acl.v2_auth import AuthV2
from bolide.base.clock import Clock
from bolide.base.errors import ConfigError
from bolide.base.service import CrashHandler
from bolide.broker.config import NOT_HONOURED_KEYS, BrokerConfig
from bolide.broker.controller_mode.epochs import EPOCH_FILE_KEYS
from bolide.broker.controller_mode.settings import CONTROLLER_MODE_KEYS
from bolide.protocol.acl_signature import sign_request
from bolide.protocol.command import RemotingCommand
from bolide.remoting import Dispatcher
from bolide.remoting.client_pool import RequestHook
from bolide.remoting.tls import TlsClientSettings, TlsMode, TlsServerSettings

__all__ = [
    "BrokerSecurity",
    "acl_file_path",
    "auth_store_path",
    "inner_request_signer",
    "tls_client_settings",
    "tls_server_settings",
    "unhonoured_keys",
    "warn_unhonoured_keys",
]

_log = logging.getLogger("bolide.broker.security")


def acl_file_path(config: BrokerConfig) -> Path:
    """aclFile, or ``<storePathRootDir>/../conf/plain_acl.yml`` (``<data-dir>/conf/...``)."""
    if config.acl_file is not None:
        return config.acl_file
    return config.store_path_root_dir.parent / "conf" / "plain_acl.yml"


def auth_store_path(config: BrokerConfig) -> Path:
    """authStoreFile, or ``<storePathRootDir>/../conf/auth.json`` (``<data-dir>/conf/...``)."""
    if config.auth_store_file is not None:
        return config.auth_store_file
    return config.store_path_root_dir.parent / "conf" / "auth.json"


def tls_server_settings(config: BrokerConfig) -> TlsServerSettings | None:
    """The listeners' TLS from the tls.server.* keys; None when tls.server.mode=disabled."""
    if config.tls_server_mode is TlsMode.DISABLED:
        return None
    return TlsServerSettings(
        mode=config.tls_server_mode,
        cert_path=config.tls_server_cert_path,
        key_path=config.tls_server_key_path,
        trust_cert_path=config.tls_server_trust_cert_path,
        client_auth=config.tls_server_need_client_auth,
        key_password=config.tls_server_key_password,
    )


def tls_client_settings(config: BrokerConfig) -> TlsClientSettings | None:
    """TLS toward name servers (tls.enable and the tls.client.* keys); None when off."""
    if not config.tls_enable:
        return None
    return TlsClientSettings(
        trust_cert_path=config.tls_client_trust_cert_path,
        cert_path=config.tls_client_cert_path,
        key_path=config.tls_client_key_path,
        verify_server=config.tls_client_auth_server,
    )


def unhonoured_keys(config: BrokerConfig) -> list[str]:
    """Keys set that Bolide does not act on: unknown ones, and known ones listed in
    :data:`~bolide.broker.config.NOT_HONOURED_KEYS` (sorted)."""
    ignored = set(config.extra_properties) - CONTROLLER_MODE_KEYS - EPOCH_FILE_KEYS
    ignored.update(key for key in config.given_keys if key in NOT_HONOURED_KEYS)
    return sorted(ignored)


def warn_unhonoured_keys(config: BrokerConfig) -> list[str]:
    """Log, in one warning, every broker.conf key the broker does not know or act on."""
    keys = unhonoured_keys(config)
    if keys:
        _log.warning(
            "broker %s: these broker.conf keys are not known to Bolide or not honoured by it,"
            " their values have no effect: %s",
            config.broker_name,
            ", ".join(keys),
        )
    return keys


def inner_request_signer(config: BrokerConfig) -> RequestHook | None:
    """Signs the broker's requests to name servers with innerClientAuthenticationCredentials
    (None when the broker has none)."""
    credentials = config.inner_client_credentials
    if credentials is None:
        return None
    access_key, secret_key = credentials

    def sign(request: RemotingCommand) -> None:
        sign_request(request, access_key, secret_key)

    return sign


class BrokerSecurity:
    """The ACL of one broker (inactive when ``aclEnable=false``)."""

    def __init__(self, config: BrokerConfig, clock: Clock, on_crash: CrashHandler) -> None:
        self._config = config
        self._clock = clock
        self._on_crash = on_crash
        self.acl_file: AclFile | None = None
        self.watcher: AclFileWatcher | None = None
        self.auth: AuthV2 | None = None
        """ACL 2.0's users and policies (None unless it is on)."""

    def open(self, dispatcher: Dispatcher) -> None:
        """Guard ``dispatcher`` with the ACL model broker.conf turns on, and say which at
        start: ACL 2.0 (authenticationEnabled / authorizationEnabled, the auth store), ACL
        1.0 (aclEnable, the accounts file) or none.

        Raises ConfigError when the file is missing, unreadable or malformed, or when both
        models are turned on.
        """
        config = self._config
        if config.authentication_enabled or config.authorization_enabled:
            if config.acl_enable:
                raise ConfigError(
                    "aclEnable (ACL 1.0) and authenticationEnabled/authorizationEnabled (ACL"
                    " 2.0) are both on: choose one (docs/security.md)"
                )
            self._open_v2(dispatcher)
            return
        if not config.acl_enable:
            _log.info("ACL off (neither aclEnable nor authenticationEnabled is set)")
            return
        path = acl_file_path(config)
        try:
            self.acl_file, self.watcher = open_acl(
                path, self._clock, trace_topic=config.msg_trace_topic_name, on_crash=self._on_crash
            )
        except (AclConfigError, OSError) as error:
            raise ConfigError(
                f"aclEnable=true but the ACL file cannot be used, not starting: {error}"
                " (see docs/security.md)"
            ) from error
        dispatcher.request_check = acl_request_check(self.acl_file.validator)
        rules = self.acl_file.validator.rules
        _log.info(
            "ACL 1.0 on: %s, %d accounts, %d global white addresses",
            path,
            len(rules.accounts),
            len(rules.global_white_addresses),
        )

    def _open_v2(self, dispatcher: Dispatcher) -> None:
        config = self._config
        path = auth_store_path(config)
        try:
            self.auth = AuthV2(
                path,
                authentication=config.authentication_enabled,
                authorization=config.authorization_enabled,
                init_user=config.init_authentication_user,
                authentication_whitelist=config.authentication_whitelist,
                authorization_whitelist=config.authorization_whitelist,
            )
            if config.migrate_auth_from_v1_enabled:
                self._migrate_from_v1(self.auth)
        except (AclConfigError, OSError) as error:
            raise ConfigError(
                f"ACL 2.0 is on but its store cannot be used, not starting: {error}"
            ) from error
        dispatcher.request_check = auth_v2_request_check(self.auth)
        summary = self.auth.summary()
        _log.info(
            "ACL 2.0 on (authentication %s, authorization %s): %s, %d users, %d acls",
            "on" if config.authentication_enabled else "off",
            "on" if config.authorization_enabled else "off",
            path,
            summary["users"],
            summary["acls"],
        )

    def _migrate_from_v1(self, auth: AuthV2) -> None:
        """migrateAuthFromV1Enabled: the accounts of aclFile become users and policies (those
        not there yet). Raises AclConfigError, OSError (the file unreadable)."""
        path = acl_file_path(self._config)
        rules, _, _ = AclFile(path, None, self._clock).read()
        report = migrate(rules, auth)
        for warning in report.warnings:
            _log.warning("ACL 1.0 to 2.0 migration from %s: %s", path, warning)
        _log.info(
            "ACL 1.0 to 2.0 migration from %s: %d users created (%s), %d already there",
            path,
            len(report.created),
            ", ".join(report.created) or "none",
            len(report.skipped),
        )

    def start(self) -> None:
        if self.watcher is not None:
            self.watcher.start()

    async def stop(self, timeout_ms: int) -> None:
        watcher, self.watcher = self.watcher, None
        if watcher is not None:
            await watcher.stop(timeout_ms)
