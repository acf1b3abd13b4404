"""The options every client command takes toward a secured cluster:

    --access-key KEY      ACL account (default: $BOLIDE_ACCESS_KEY)
    --secret-key SECRET   its secret (default: $BOLIDE_SECRET_KEY; prefer the variable: a
                          command line is visible to other users of the machine)
    --tls                 connect over TLS (default: $BOLIDE_TLS=1)
    --tls-trust-cert PEM  CA bundle the servers' certificates are checked against
                          (default: $BOLIDE_TLS_TRUST_CERT, else the system's CAs)
    --tls-cert PEM, --tls-key PEM   a client certificate, for servers that require one
    --tls-no-verify       accept any server certificate (testing only)

They are options of the ``bolide`` command itself (:func:`security_options`, the app's
callback), and :func:`hoist_security_options` moves them there from wherever they are typed,
so ``bolide topic list --access-key K`` and ``bolide --access-key K topic list`` are the same.
:func:`client_options` gives the clients of the running command their values.
"""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from bolide.client.security import TlsClientSettings

__all__ = ["CliSecurity", "client_options", "hoist_security_options", "security_options"]

_VALUED = frozenset({"--access-key", "--secret-key", "--tls-trust-cert", "--tls-cert", "--tls-key"})
_FLAGS = frozenset({"--tls", "--tls-no-verify"})


@dataclass(frozen=True, slots=True)
class CliSecurity:
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    tls: bool = False
    tls_trust_cert: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    tls_no_verify: bool = False

    def client_options(self) -> dict[str, Any]:
        """``access_key``, ``secret_key`` and ``tls`` for a client constructor."""
        tls: TlsClientSettings | None = None
        if self.tls or self.tls_trust_cert or self.tls_cert:
            tls = TlsClientSettings(
                trust_cert_path=self.tls_trust_cert,
                cert_path=self.tls_cert,
                key_path=self.tls_key,
                verify_server=not self.tls_no_verify,
            )
        return {"access_key": self.access_key, "secret_key": self.secret_key, "tls": tls}


_CURRENT: contextvars.ContextVar[CliSecurity | None] = contextvars.ContextVar(
    "bolide_cli_security", default=None
)


def client_options() -> dict[str, Any]:
    """The running command's options for a client constructor (none given: plain, unsigned)."""
    return (_CURRENT.get() or CliSecurity()).client_options()


_PEM = {"exists": True, "dir_okay": False, "show_default": False}


def security_options(
    access_key: Annotated[
        str | None,
        typer.Option("--access-key", envvar="BOLIDE_ACCESS_KEY", help="ACL access key."),
    ] = None,
    secret_key: Annotated[
        str | None,
        typer.Option(
            "--secret-key",
            envvar="BOLIDE_SECRET_KEY",
            help="ACL secret key (prefer $BOLIDE_SECRET_KEY).",
            show_envvar=True,
        ),
    ] = None,
    tls: Annotated[
        bool, typer.Option("--tls", envvar="BOLIDE_TLS", help="Connect over TLS.")
    ] = False,
    tls_trust_cert: Annotated[
        Path | None,
        typer.Option(
            "--tls-trust-cert",
            envvar="BOLIDE_TLS_TRUST_CERT",
            help="CA bundle (PEM) for the servers' certificates.",
            **_PEM,
        ),
    ] = None,
    tls_cert: Annotated[
        Path | None,
        typer.Option("--tls-cert", help="Client certificate (PEM).", **_PEM),
    ] = None,
    tls_key: Annotated[
        Path | None, typer.Option("--tls-key", help="Client key (PEM).", **_PEM)
    ] = None,
    tls_no_verify: Annotated[
        bool, typer.Option("--tls-no-verify", help="Accept any server certificate (tests).")
    ] = False,
) -> None:
    """Bolide: a message queue that speaks the Apache RocketMQ 4.x wire protocol.

    The ACL and TLS options may be given before or after the command name.
    """
    _CURRENT.set(
        CliSecurity(access_key, secret_key, tls, tls_trust_cert, tls_cert, tls_key, tls_no_verify)
    )


SERVER_COMMANDS = frozenset({"standalone", "namesrv"})
"""Commands with server-side TLS options of the same names (``--tls-cert``...): left as is."""


def _command_name(arguments: Sequence[str]) -> str | None:
    index = 0
    while index < len(arguments):
        argument = arguments[index]
        if not argument.startswith("-"):
            return argument
        if argument in _VALUED:
            index += 1
        index += 1
    return None


def hoist_security_options(arguments: Sequence[str]) -> list[str]:
    """``arguments`` (without the program name) with the security options moved to the front,
    where the app's callback reads them. Nothing after ``--`` is touched, nor the arguments of
    the server commands (their TLS options are the server's own)."""
    if _command_name(arguments) in SERVER_COMMANDS:
        return list(arguments)
    hoisted: list[str] = []
    rest: list[str] = []
    index = 0
    while index < len(arguments):
        argument = arguments[index]
        if argument == "--":
            rest.extend(arguments[index:])
            break
        name = argument.split("=", 1)[0]
        if name in _FLAGS or (name in _VALUED and "=" in argument):
            hoisted.append(argument)
        elif name in _VALUED and index + 1 < len(arguments):
            hoisted += [argument, arguments[index + 1]]
            index += 1
        else:
            rest.append(argument)
        index += 1
    return hoisted + rest
