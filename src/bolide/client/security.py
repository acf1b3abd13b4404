"""What a client needs toward a secured cluster: ACL credentials that sign every request, and
TLS settings for its connections.

``access_key=`` / ``secret_key=`` on Producer, PushConsumer, PullConsumer and AdminClient make
a :class:`SessionCredentials`; its :meth:`~SessionCredentials.sign` runs on every request the
client's connection pool sends (:mod:`bolide.protocol.acl_signature`: the signature RocketMQ's
brokers check). The secret key never leaves the process. ``tls=True`` (system CAs) or a
:class:`~bolide.remoting.tls.TlsClientSettings` connects over TLS.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bolide.base.errors import ConfigError
from bolide.protocol.acl_signature import sign_request
from bolide.protocol.command import RemotingCommand
from bolide.remoting.tls import TlsClientSettings

__all__ = ["SessionCredentials", "TlsClientSettings", "client_tls", "credentials_of"]


@dataclass(frozen=True, slots=True)
class SessionCredentials:
    """An ACL account's keys (the secret is left out of ``repr``)."""

    access_key: str
    secret_key: str = field(repr=False)
    security_token: str | None = field(default=None, repr=False)

    def sign(self, request: RemotingCommand) -> None:
        """Add AccessKey (and SecurityToken) and the Signature to ``request``."""
        sign_request(request, self.access_key, self.secret_key, security_token=self.security_token)


def credentials_of(access_key: str | None, secret_key: str | None) -> SessionCredentials | None:
    """Credentials from the two options; None when both are unset.

    Raises ConfigError when only one is given (a request signed with half the account would be
    refused by every broker, better said now).
    """
    if not access_key and not secret_key:
        return None
    if not access_key or not secret_key:
        raise ConfigError("give both access_key and secret_key (or neither)")
    return SessionCredentials(access_key, secret_key)


def client_tls(tls: TlsClientSettings | bool | None) -> TlsClientSettings | None:
    """``True`` -> TLS checked against the system's CAs; False/None -> plain TCP."""
    if tls is True:
        return TlsClientSettings()
    if tls is False or tls is None:
        return None
    return tls
