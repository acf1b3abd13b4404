"""The broker's security wiring: the ACL on every listener, its hot reload, the signer of the
broker's own requests, and the one start-up warning about settings Bolide does not honour.

``aclEnable=true`` loads ``aclFile`` before the broker listens; a missing or malformed file
stops the start with :class:`~bolide.base.errors.ConfigError` naming the file and the reason
(a broker must not run open when its configuration says it is closed). Every listener shares
the broker's dispatcher (the VIP channel too), so one request check covers them all.
"""

from __future__ import annotations

import logging

from bolide.acl import AclConfigError, AclFile, AclFileWatcher, acl_request_check, open_acl
from bolide.base.clock import Clock
from bolide.base.errors import ConfigError
from bolide.base.service import CrashHandler
from bolide.broker.config import BrokerConfig
from bolide.protocol.acl_signature import sign_request
from bolide.protocol.command import RemotingCommand
from bolide.remoting import Dispatcher
from bolide.remoting.client_pool import RequestHook

__all__ = ["BrokerSecurity", "inner_request_signer", "warn_unhonoured_keys"]

_log = logging.getLogger("bolide.broker.security")


def warn_unhonoured_keys(config: BrokerConfig) -> list[str]:
    """Log, in one warning, every broker.conf key the broker does not know or act on."""
    keys = config.unhonoured_keys()
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

    def open(self, dispatcher: Dispatcher) -> None:
        """Load the accounts file and guard ``dispatcher`` with it (aclEnable=true only).

        Raises ConfigError when the file is missing, unreadable or malformed.
        """
        config = self._config
        if not config.acl_enable:
            return
        path = config.acl_file_path
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
            "ACL on: %s, %d accounts, %d global white addresses",
            path,
            len(rules.accounts),
            len(rules.global_white_addresses),
        )

    def start(self) -> None:
        if self.watcher is not None:
            self.watcher.start()

    async def stop(self, timeout_ms: int) -> None:
        watcher, self.watcher = self.watcher, None
        if watcher is not None:
            await watcher.stop(timeout_ms)
