"""The options every client command takes toward a secured cluster:

    --access-key KEY      ACL account (default: $BOLIDE_ACCESS_KEY)
    --secret-key SECRET   its secret (default: $BOLIDE_SECRET_KEY; prefer the variable: a
                          command line is visible to other users of the machine)
    --tls                 connect over TLS (default: $BOLIDE_TLS=1)
    --tls-trust-cert PEM  CA bundle the servers' certificates are checked against
                          (default: $BOLIDE_TLS_TRUST_CERT, else the system's CAs)
    --tls-cert PEM, --tls-key PEM   a client certificate, for servers that require one
    --tls-no-verify       accept any server certificate (testing only)
    --namespace NS        topics and groups named in the command are NS's (Java's
                          withNamespace: sent as ``NS%name``; default: $BOLIDE_NAMESPACE)

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

_VALUED = frozenset(
    {"--access-key", "--secret-key", "--tls-trust-cert", "--tls-cert", "--tls-key", "--namespace"}
)
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
    namespace: str | None = None

    def client_options(self) -> dict[str, Any]:
        """``access_key``, ``secret_key``, ``tls`` and ``namespace`` for a client constructor."""
        tls: TlsClientSettings | None = None
        if self.tls or self.tls_trust_cert or self.tls_cert:
            tls = TlsClientSettings(
                trust_cert_path=self.tls_trust_cert,
                cert_path=self.tls_cert,
                key_path=self.tls_key,
                verify_server=not self.tls_no_verify,
            )
        return {
            "access_key": self.access_key,
            "secret_key": self.secret_key,
            "tls": tls,
            "namespace": self.namespace,
        }


_CURRENT: contextvars.ContextVar[CliSecurity | None] = contextvars.ContextVar(
    "bolide_cli_security", default=None
)


def client_options() -> dict[str, Any]:
    """The running command's options for a client constructor (none given: plain, unsigned)."""
    return (_CURRENT.get() or CliSecurity()).client_options()


_PEM = {"exists": True, "dir_okay": False, "show_default": False}


NAMESPACE_FREE_COMMANDS = frozenset(
    {"standalone", "namesrv", "dashboard", "controller", "proxy", "version", "bench", "acl",
     "user", "ha"}
)  # fmt: skip
"""Commands that name no topic or group of a client's: ``--namespace`` there is refused."""


def security_options(
    context: typer.Context,
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
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace",
            envvar="BOLIDE_NAMESPACE",
            help="Namespace of the topics and groups named (sent as NAMESPACE%name).",
        ),
    ] = None,
) -> None:
    """Bolide: a message queue that speaks the Apache RocketMQ 4.x wire protocol.

    The ACL, TLS and namespace options may be given before or after the command name.
    """
    if namespace is not None and context.invoked_subcommand in NAMESPACE_FREE_COMMANDS:
        raise typer.BadParameter(
            f"`bolide {context.invoked_subcommand}` names no topic or group of a client; "
            "--namespace is for topic, group, offset, message, cluster and transaction",
            param_hint="--namespace",
        )
    _CURRENT.set(
        CliSecurity(
            access_key, secret_key, tls, tls_trust_cert, tls_cert, tls_key, tls_no_verify, namespace
        )
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
