"""The accounts files on disk: load them, watch them, and change them for the ACL admin
requests.

:class:`AclFile` reads ``plain_acl.yml`` (and the ``*.yml`` files of the ``acl/`` directory
beside it, as RocketMQ 4.9.3+ reads ``conf/acl/``) into one :class:`AclRules`, and applies
the changes of UPDATE_AND_CREATE_ACL_CONFIG (50), DELETE_ACL_CONFIG (51) and
UPDATE_GLOBAL_WHITE_ADDRS_CONFIG (53) to the file concerned: it is re-read, changed,
validated with the others, written atomically (temporary file, fsync, rename) with its
``dataVersion`` moved on, and the new rules are handed to the validator at once. Comments in
a file do not survive such a rewrite.

:class:`AclFileWatcher` is the hot reload: a :class:`~bolide.base.service.Service` that
looks at the files' modification times, sizes and inodes (and at files appearing or going)
every :data:`~bolide.base.limits.ACL_FILE_CHECK_INTERVAL_MS` and reloads them when they
change. Files that do not load keep the previous rules in force, logged with the reason.
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
    merge_rules,
    parse_account,
    parse_rules,
)
from bolide.acl.validator import AclValidator
from bolide.base import limits
from bolide.base.clock import Clock
from bolide.base.fileio import atomic_write
from bolide.base.service import CrashHandler, Service

__all__ = ["AclFile", "AclFileWatcher", "FileStamp", "FilesStamp", "file_stamp"]

_log = logging.getLogger("bolide.acl")

FileStamp = tuple[int, int, int]
"""(mtime ns, size, inode) of the file; (0, -1, 0) when it does not exist."""
FilesStamp = tuple[tuple[str, FileStamp], ...]
"""The stamps of every accounts file, by path."""
_MISSING: FileStamp = (0, -1, 0)


def file_stamp(path: Path) -> FileStamp:
    """What changes when the file is edited or replaced."""
    try:
        status = path.stat()
    except FileNotFoundError:
        return _MISSING
    return status.st_mtime_ns, status.st_size, status.st_ino


class AclFile:
    """The accounts: ``plain_acl.yml`` at ``path``, plus every ``*.yml`` / ``*.yaml`` under
    ``directory`` (RocketMQ 4.9.3+ reads ``conf/acl/`` beside ``conf/plain_acl.yml``; default:
    the ``acl`` directory beside ``path``, read when it exists), and the validator enforcing
    them. An access key defined in two files is refused.

    ``clock`` stamps ``dataVersion`` on writes. Raises :class:`AclConfigError` from
    :meth:`load` and the changes; OSError when a file cannot be read or written.
    """

    def __init__(
        self,
        path: Path,
        validator: AclValidator | None,
        clock: Clock,
        *,
        directory: Path | None = None,
    ) -> None:
        self.path = path
        self.directory = path.parent / "acl" if directory is None else directory
        self._clock = clock
        self.validator = validator or AclValidator(AclRules())
        self.stamp: FilesStamp = ()
        """The stamps of the files the rules in force were read from."""
        self._parsed: dict[Path, AclRules] = {}

    def paths(self) -> list[Path]:
        """The main file, then the directory's files (sorted)."""
        found: list[Path] = []
        if self.directory.is_dir():
            for pattern in ("*.yml", "*.yaml"):
                found += (p for p in self.directory.rglob(pattern) if p.is_file())
        return [self.path, *sorted(p for p in set(found) if p != self.path)]

    def current_stamp(self) -> FilesStamp:
        """What changes when a file is edited, replaced, added or removed."""
        return tuple((str(path), file_stamp(path)) for path in self.paths())

    def read(self) -> tuple[AclRules, FilesStamp, dict[Path, AclRules]]:
        """Parse the files as they are now (nothing is changed). Raises AclConfigError,
        OSError (the main file missing included)."""
        stamp = self.current_stamp()
        parsed: dict[Path, AclRules] = {}
        for name, (_, size, _) in stamp:
            path = Path(name)
            if size < 0:
                raise AclConfigError(f"ACL file {path} does not exist")
            if size > limits.ACL_FILE_MAX_BYTES:
                raise AclConfigError(f"{path}: {size} bytes, more than {limits.ACL_FILE_MAX_BYTES}")
            document = load_yaml_document(_read_text(path), str(path))
            parsed[path] = parse_rules(document, str(path))
        return _merged(parsed), stamp, parsed

    def load(self) -> AclRules:
        """Read the files and put their rules in force. Raises AclConfigError, OSError."""
        rules, stamp, parsed = self.read()
        self.use(rules, stamp, parsed)
        return rules

    def use(self, rules: AclRules, stamp: FilesStamp, parsed: dict[Path, AclRules]) -> None:
        """Put rules :meth:`read` returned in force (the watcher reads off the loop)."""
        self.validator.replace_rules(rules)
        self.stamp = stamp
        self._parsed = parsed

    # --- the admin requests -------------------------------------------------------------------

    def update_account(self, entry: dict[str, Any]) -> AclAccount:
        """Create or replace the account ``entry`` (plain_acl.yml keys), in the file that
        defines it (a new one: the main file). Fields the entry leaves out keep their value
        for an existing account (a new one needs a secretKey)."""
        key = str(entry.get("accessKey", ""))
        path = self._owner(key)
        document = self._document(path)
        accounts = _accounts_of(document, path)
        existing = next((a for a in accounts if str(a.get("accessKey")) == key), None)
        merged = dict(existing or {})
        merged.update({name: value for name, value in entry.items() if value is not None})
        account = parse_account(merged, f"account {key!r}")
        replacement = account_to_document(account)
        if existing is None:
            accounts.append(replacement)
        else:
            accounts[accounts.index(existing)] = replacement
        self._write(path, document)
        return account

    def delete_account(self, access_key: str) -> bool:
        """Remove the account; False when there is none with that access key."""
        path = self._owner(access_key)
        document = self._document(path)
        accounts = _accounts_of(document, path)
        kept = [a for a in accounts if str(a.get("accessKey")) != access_key]
        if len(kept) == len(accounts):
            return False
        document["accounts"] = kept
        self._write(path, document)
        return True

    def update_global_white_addresses(self, patterns: Iterable[str], file: str = "") -> list[str]:
        """Replace globalWhiteRemoteAddresses of ``file`` (one of :meth:`paths`; empty: the
        main file); each pattern is checked first."""
        texts = [text.strip() for text in patterns if text.strip()]
        for text in texts:
            compile_address_pattern(text)
        path = self.path
        if file:
            known = {str(known_path): known_path for known_path in self.paths()}
            if file not in known:
                raise AclConfigError(f"{file} is not one of the ACL files ({', '.join(known)})")
            path = known[file]
        document = self._document(path)
        document["globalWhiteRemoteAddresses"] = texts
        self._write(path, document)
        return texts

    def _owner(self, access_key: str) -> Path:
        source = self.validator.rules.sources.get(access_key)
        return self.path if source is None else Path(source)

    def _document(self, path: Path) -> dict[str, Any]:
        text = _read_text(path) if path.exists() else ""
        return load_yaml_document(text, str(path))

    def _write(self, path: Path, document: dict[str, Any]) -> None:
        counter, _ = self.validator.rules.file_versions.get(str(path), (0, 0))
        document["dataVersion"] = [{"counter": counter + 1, "timestamp": self._clock.now_ms()}]
        parsed = dict(self._parsed)
        parsed[path] = parse_rules(document, str(path))
        new_rules = _merged(parsed)  # never write what would not load
        data = yaml.safe_dump(document, sort_keys=False, allow_unicode=True).encode("utf-8")
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, data)
        self.use(new_rules, self.current_stamp(), parsed)
        _log.info("ACL file %s written (data version %d)", path, counter + 1)


def _merged(parsed: dict[Path, AclRules]) -> AclRules:
    return merge_rules([(str(path), rules) for path, rules in parsed.items()])


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
        self.failed_stamp: FilesStamp | None = None
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
        stamp = await asyncio.to_thread(acl_file.current_stamp)
        if stamp in (acl_file.stamp, self.failed_stamp):
            return
        try:
            rules, read_stamp, parsed = await asyncio.to_thread(acl_file.read)
        except (AclConfigError, OSError) as error:
            self.failed_stamp, self.last_error = stamp, error
            _log.error(
                "ACL file %s not reloaded, previous rules stay in force: %s", acl_file.path, error
            )
            return
        acl_file.use(rules, read_stamp, parsed)
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
