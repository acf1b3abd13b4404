"""The accounts file on disk: load it, watch it, and change it for the ACL admin requests.

:class:`AclFile` reads ``plain_acl.yml`` into :class:`AclRules` and applies the changes of
UPDATE_AND_CREATE_ACL_CONFIG (50), DELETE_ACL_CONFIG (51) and
UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53): the file is re-read, changed, validated, written
atomically (temporary file, fsync, rename) with ``dataVersion`` moved on, and the new rules
are handed to the validator at once. Comments in the file do not survive such a rewrite.

:class:`AclFileWatcher` is the hot reload: a :class:`~bolide.base.service.Service` that
looks at the file's modification time, size and inode every
:data:`~bolide.base.limits.ACL_FILE_CHECK_INTERVAL_MS` and reloads it when they change. A file
that does not parse keeps the previous rules in force and is logged with the reason.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from bolide.acl.addresses import AclConfigError, compile_address_pattern
from bolide.acl.rules import (
    AclAccount,
    AclRules,
    account_to_document,
    load_yaml_document,
    parse_account,
    parse_rules,
)
from bolide.acl.validator import AclValidator
from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.fileio import atomic_write
from bolide.base.service import CrashHandler, Service

__all__ = ["AclFile", "AclFileWatcher", "FileStamp", "file_stamp"]

_log = logging.getLogger("bolide.acl")

FileStamp = tuple[int, int, int]
"""(mtime ns, size, inode) of the file; (0, -1, 0) when it does not exist."""
_MISSING: FileStamp = (0, -1, 0)


def file_stamp(path: Path) -> FileStamp:
    """What changes when the file is edited or replaced."""
    try:
        status = path.stat()
    except FileNotFoundError:
        return _MISSING
    return status.st_mtime_ns, status.st_size, status.st_ino


class AclFile:
    """``plain_acl.yml`` at ``path`` and the validator that enforces it.

    ``clock`` stamps ``dataVersion`` on writes. Raises :class:`AclConfigError` from
    :meth:`load` and the changes; OSError when the file cannot be read or written.
    """

    def __init__(self, path: Path, validator: AclValidator | None, clock: Clock) -> None:
        self.path = path
        self._clock = clock
        self.validator = validator or AclValidator(AclRules())
        self.stamp: FileStamp = _MISSING
        """The stamp of the file the rules in force were read from."""

    def read(self) -> tuple[AclRules, FileStamp]:
        """Parse the file as it is now (nothing is changed). Raises AclConfigError, OSError."""
        stamp = file_stamp(self.path)
        if stamp == _MISSING:
            raise AclConfigError(f"ACL file {self.path} does not exist")
        if stamp[1] > limits.ACL_FILE_MAX_BYTES:
            raise AclConfigError(
                f"{self.path}: {stamp[1]} bytes, more than {limits.ACL_FILE_MAX_BYTES}"
            )
        text = _read_text(self.path)
        return parse_rules(load_yaml_document(text, str(self.path)), str(self.path)), stamp

    def load(self) -> AclRules:
        """Read the file and put its rules in force. Raises AclConfigError, OSError."""
        rules, stamp = self.read()
        self.validator.replace_rules(rules)
        self.stamp = stamp
        return rules

    # --- the admin requests -------------------------------------------------------------------

    def update_account(self, entry: dict[str, Any]) -> AclAccount:
        """Create or replace the account ``entry`` (plain_acl.yml keys). Fields the entry
        leaves out keep their value for an existing account (a new one needs a secretKey)."""
        document = self._document()
        accounts = _accounts_of(document, self.path)
        key = str(entry.get("accessKey", ""))
        existing = next((a for a in accounts if str(a.get("accessKey")) == key), None)
        merged = dict(existing or {})
        merged.update({name: value for name, value in entry.items() if value is not None})
        account = parse_account(merged, f"account {key!r}")
        replacement = account_to_document(account)
        if existing is None:
            accounts.append(replacement)
        else:
            accounts[accounts.index(existing)] = replacement
        self._write(document)
        return account

    def delete_account(self, access_key: str) -> bool:
        """Remove the account; False when there is none with that access key."""
        document = self._document()
        accounts = _accounts_of(document, self.path)
        kept = [a for a in accounts if str(a.get("accessKey")) != access_key]
        if len(kept) == len(accounts):
            return False
        document["accounts"] = kept
        self._write(document)
        return True

    def update_global_white_addresses(self, patterns: Iterable[str]) -> list[str]:
        """Replace globalWhiteRemoteAddresses; each pattern is checked first."""
        texts = [text.strip() for text in patterns if text.strip()]
        for text in texts:
            compile_address_pattern(text)
        document = self._document()
        document["globalWhiteRemoteAddresses"] = texts
        self._write(document)
        return texts

    def _document(self) -> dict[str, Any]:
        text = _read_text(self.path) if self.path.exists() else ""
        return load_yaml_document(text, str(self.path))

    def _write(self, document: dict[str, Any]) -> None:
        rules = self.validator.rules
        document["dataVersion"] = [
            {"counter": rules.data_version_counter + 1, "timestamp": self._clock.now_ms()}
        ]
        new_rules = parse_rules(document, str(self.path))  # never write what would not load
        data = yaml.safe_dump(document, sort_keys=False, allow_unicode=True).encode("utf-8")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, data)
        self.validator.replace_rules(new_rules)
        self.stamp = file_stamp(self.path)
        _log.info(
            "ACL file %s written (data version %d)", self.path, new_rules.data_version_counter
        )


class AclFileWatcher:
    """Reloads ``acl_file`` when it changes on disk (see the module docstring)."""

    def __init__(
        self,
        acl_file: AclFile,
        clock: Clock,
        *,
        interval_ms: int = limits.ACL_FILE_CHECK_INTERVAL_MS,
        on_crash: CrashHandler | None = None,
    ) -> None:
        self._file = acl_file
        self.reload_count = 0
        """Successful reloads since start."""
        self.failed_stamp: FileStamp | None = None
        """The stamp of a file version that did not load (not retried until it changes)."""
        self.last_error: BaseException | None = None
        self._service = Service(
            f"acl-watch:{acl_file.path.name}",
            self._step,
            interval_ms=interval_ms,
            clock=clock,
            on_crash=on_crash,
        )

    def start(self) -> None:
        self._service.start()

    async def stop(self, timeout_ms: int = limits.REMOTING_STOP_GRACE_MS) -> None:
        await self._service.stop(timeout_ms)

    def wakeup(self) -> None:
        """Look at the file now."""
        self._service.wakeup()

    async def _step(self) -> None:
        acl_file = self._file
        stamp = file_stamp(acl_file.path)
        if stamp in (acl_file.stamp, self.failed_stamp):
            return
        try:
            rules, read_stamp = await asyncio.to_thread(acl_file.read)
        except (AclConfigError, OSError) as error:
            self.failed_stamp, self.last_error = stamp, error
            _log.error(
                "ACL file %s not reloaded, previous rules stay in force: %s", acl_file.path, error
            )
            return
        acl_file.validator.replace_rules(rules)
        acl_file.stamp = read_stamp
        self.failed_stamp, self.last_error = None, None
        self.reload_count += 1
        _log.info(
            "ACL file %s reloaded: %d accounts, %d global white addresses",
            acl_file.path,
            len(rules.accounts),
            len(rules.global_white_addresses),
        )


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise AclConfigError(f"{path}: not UTF-8 text: {error}") from error


def _accounts_of(document: dict[str, Any], path: Path) -> list[dict[str, Any]]:
    accounts = document.get("accounts")
    if accounts is None:
        accounts = document["accounts"] = []
    if not isinstance(accounts, list):
        raise AclConfigError(f"{path}: accounts must be a list")
    return accounts
