"""Dashboard sessions, logins and cross-site request protection.

* **Sessions**: a random token in an HttpOnly, SameSite=Strict cookie names a server-side
  session (memory only; a restart logs everyone out). Every visitor gets one, logged in or
  not, because every form carries the session's CSRF token.
* **CSRF**: every POST must carry the session's token in the ``csrf`` field, and its
  ``Origin`` (or ``Referer``) header, when present, must be the dashboard's own host.
  Either check failing answers 403 and changes nothing.
* **Accounts**: with ACL on, only accounts of the broker's plain_acl.yml log in (access key
  and secret key): ``admin: true`` accounts may change things, the others only look (the
  rocketmq-dashboard "ordinary" role). The check goes through :class:`AccountChecker`, so
  the broker's own ACL validator can be plugged in; :class:`PlainAclAccounts` reads the
  file (re-read when it changes). Without ACL the dashboard is open, as rocketmq-dashboard's
  default ``loginRequired=false``.
"""

from __future__ import annotations

import enum
import hmac
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import yaml

from bolide.base import limits

__all__ = [
    "AccountChecker",
    "PlainAclAccounts",
    "Role",
    "Session",
    "SessionStore",
]

SESSION_COOKIE = "bolide_session"


class Role(enum.Enum):
    ADMIN = "admin"
    READ_ONLY = "read-only"


class AccountChecker(Protocol):
    """Who may log in: the role of (access key, secret key), or None."""

    def check(self, access_key: str, secret_key: str) -> Role | None: ...


class PlainAclAccounts:
    """The ``accounts`` of a RocketMQ plain_acl.yml (``accessKey``, ``secretKey``, ``admin``),
    read again when the file's modification time changes."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._stamp: tuple[int, int] | None = None
        self._accounts: dict[str, tuple[str, bool]] = {}

    def check(self, access_key: str, secret_key: str) -> Role | None:
        accounts = self._load()
        found = accounts.get(access_key)
        if found is None or not hmac.compare_digest(found[0], secret_key):
            return None
        return Role.ADMIN if found[1] else Role.READ_ONLY

    def _load(self) -> dict[str, tuple[str, bool]]:
        try:
            status = self._path.stat()
        except OSError:
            return {}
        stamp = (status.st_mtime_ns, status.st_size)
        if stamp != self._stamp:
            self._accounts = _parse_accounts(self._path.read_text(encoding="utf-8"))
            self._stamp = stamp
        return self._accounts


def _parse_accounts(text: str) -> dict[str, tuple[str, bool]]:
    try:
        document: Any = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        return {}
    accounts: dict[str, tuple[str, bool]] = {}
    for account in document.get("accounts") or []:
        if not isinstance(account, dict):
            continue
        access_key, secret_key = account.get("accessKey"), account.get("secretKey")
        if isinstance(access_key, str) and isinstance(secret_key, str):
            admin = str(account.get("admin", False)).lower() == "true"
            accounts[access_key] = (secret_key, admin)
    return accounts


@dataclass(slots=True)
class Session:
    token: str
    csrf: str
    expires_s: float
    user: str | None = None
    role: Role | None = None
    credentials: tuple[str, str] | None = None
    flashes: list[str] = field(default_factory=list)


class SessionStore:
    """Sessions by token, expiring DASHBOARD_SESSION_MAX_AGE_MS after their creation."""

    def __init__(self, max_sessions: int = limits.DASHBOARD_SESSIONS_MAX_COUNT) -> None:
        self._sessions: dict[str, Session] = {}
        self._max_sessions = max_sessions

    def get(self, token: str | None) -> Session | None:
        if token is None:
            return None
        session = self._sessions.get(token)
        if session is None:
            return None
        if session.expires_s < time.monotonic():
            del self._sessions[token]
            return None
        return session

    def create(self) -> Session:
        if len(self._sessions) >= self._max_sessions:
            self._expire()
        if len(self._sessions) >= self._max_sessions:  # still full: drop the oldest
            oldest = min(self._sessions.values(), key=lambda s: s.expires_s)
            del self._sessions[oldest.token]
        session = Session(
            token=secrets.token_urlsafe(32),
            csrf=secrets.token_urlsafe(32),
            expires_s=time.monotonic() + limits.DASHBOARD_SESSION_MAX_AGE_MS / 1000,
        )
        self._sessions[session.token] = session
        return session

    def drop(self, token: str) -> None:
        self._sessions.pop(token, None)

    def _expire(self) -> None:
        now = time.monotonic()
        for token in [t for t, s in self._sessions.items() if s.expires_s < now]:
            del self._sessions[token]


def csrf_ok(session: Session, submitted: str | None) -> bool:
    return submitted is not None and hmac.compare_digest(session.csrf, submitted)


def same_origin(headers: dict[str, str], host: str) -> bool:
    """Whether ``Origin`` (else ``Referer``), when the browser sent one, is this host."""
    origin = headers.get("origin") or headers.get("referer")
    if not origin or origin == "null":
        return origin is None
    without_scheme = origin.split("://", 1)[-1]
    return without_scheme.split("/", 1)[0] == host
