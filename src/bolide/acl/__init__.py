"""RocketMQ ACL 1.0 for every Bolide listener: accounts (plain_acl.yml), signatures,
permissions, white lists, hot reload, and the admin changes of the accounts file.

Front ends use :class:`AclValidator`: remoting servers through :func:`acl_request_check`, the
dashboard and metrics through :meth:`AclValidator.is_admin`, the 5.x proxy through
:meth:`AclValidator.verify_grpc_authorization` then :meth:`AclValidator.authorize_grpc` (what each
call needs: :func:`grpc_required_resources`).
:func:`open_acl` loads a file and builds the validator and its watcher.
"""

from __future__ import annotations

from pathlib import Path

from bolide.acl.addresses import AclConfigError, AddressPattern, compile_address_pattern
from bolide.acl.guard import acl_request_check
from bolide.acl.permissions import (
    ADMIN_REQUEST_CODES,
    NAMESRV_ADMIN_REQUEST_CODES,
    Perm,
    RequestParseError,
    grpc_required_resources,
    required_resources,
    retry_topic,
)
from bolide.acl.rules import AclAccount, AclRules, parse_rules
from bolide.acl.store import AclFile, AclFileWatcher
from bolide.acl.validator import ACL_EXCEPTION_PREFIX, AclDeniedError, AclValidator
from bolide.base.clock import Clock
from bolide.base.service import CrashHandler
from bolide.protocol.system_topics import DEFAULT_TRACE_TOPIC

__all__ = [
    "ACL_EXCEPTION_PREFIX",
    "ADMIN_REQUEST_CODES",
    "NAMESRV_ADMIN_REQUEST_CODES",
    "AclAccount",
    "AclConfigError",
    "AclDeniedError",
    "AclFile",
    "AclFileWatcher",
    "AclRules",
    "AclValidator",
    "AddressPattern",
    "Perm",
    "RequestParseError",
    "acl_request_check",
    "compile_address_pattern",
    "grpc_required_resources",
    "open_acl",
    "parse_rules",
    "required_resources",
    "retry_topic",
]


def open_acl(
    path: Path,
    clock: Clock,
    *,
    trace_topic: str = DEFAULT_TRACE_TOPIC,
    on_crash: CrashHandler | None = None,
) -> tuple[AclFile, AclFileWatcher]:
    """Load ``path`` (raises AclConfigError / OSError when it is missing or malformed: a
    server with ACL on must not start without working rules) and make its watcher (not
    started)."""
    validator = AclValidator(AclRules(), trace_topic=trace_topic)
    acl_file = AclFile(path, validator, clock)
    acl_file.load()
    return acl_file, AclFileWatcher(acl_file, clock, on_crash=on_crash)
