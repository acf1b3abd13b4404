"""RocketMQ ACL 1.0 request signatures (sans-IO): what clients add and what servers check.

A signed request carries three extra ext fields: ``AccessKey`` (the account), ``Signature``
and, for temporary credentials, ``SecurityToken``. The secret key itself never travels.

What is signed (the same on both ends, so any client's signature verifies here)::

    content   = value(k1) + value(k2) + ... + value(kn)   ext fields sorted by key,
                                                           "Signature" left out,
                                                           "AccessKey" included
              + body bytes                                 (nothing when there is no body)
    Signature = Base64( HMAC-SHA1( key = UTF-8(secretKey), data = UTF-8(values) + body ) )

The C++ client (``set_session_credentials``) adds an ``OnsChannel`` field before signing; it
is an ordinary ext field here and is signed like the others. ``_UNIQUE_KEY_QUERY`` is left
out on both ends: the Java client adds it to QUERY_MESSAGE outside the header it signs.
"""

from __future__ import annotations

import base64
import hmac
from collections.abc import Mapping

from bolide.protocol.command import BOLIDE_WIRE_VERSION, Body, RemotingCommand

__all__ = [
    "ACCESS_KEY_FIELD",
    "ONS_CHANNEL_FIELD",
    "SECURITY_TOKEN_FIELD",
    "SIGNATURE_FIELD",
    "UNIQUE_KEY_QUERY_FIELD",
    "UNIQUE_KEY_UNSIGNED_MAX_VERSION",
    "compute_signature",
    "sign_request",
    "signature_content",
    "signatures_equal",
]

ACCESS_KEY_FIELD = "AccessKey"
SIGNATURE_FIELD = "Signature"
SECURITY_TOKEN_FIELD = "SecurityToken"
ONS_CHANNEL_FIELD = "OnsChannel"
UNIQUE_KEY_QUERY_FIELD = "_UNIQUE_KEY_QUERY"
UNIQUE_KEY_UNSIGNED_MAX_VERSION = 399
"""MQVersion ordinal V4_9_3: requests of this version or older do not sign
``_UNIQUE_KEY_QUERY`` (V4_9_4 is 401)."""
_UNSIGNED_FIELDS_OLD = frozenset({SIGNATURE_FIELD, UNIQUE_KEY_QUERY_FIELD})
_UNSIGNED_FIELDS = frozenset({SIGNATURE_FIELD})


def signature_content(
    ext_fields: Mapping[str, str], body: Body = b"", *, version: int = BOLIDE_WIRE_VERSION
) -> bytes:
    """The bytes a signature covers: the values of ``ext_fields`` sorted by key (without
    ``Signature``, and without ``_UNIQUE_KEY_QUERY`` when ``version``, the request's MQVersion
    ordinal, is at most V4_9_3), UTF-8, followed by ``body``. ``version`` defaults to the
    one Bolide sends (V4_9_4)."""
    left_out = (
        _UNSIGNED_FIELDS_OLD if version <= UNIQUE_KEY_UNSIGNED_MAX_VERSION else _UNSIGNED_FIELDS
    )
    # sorted keys then lookups, a list not a generator: the fastest form measured (bench/acl.py)
    values = "".join([ext_fields[key] for key in sorted(ext_fields) if key not in left_out])
    head = values.encode("utf-8", "surrogatepass")
    return head + bytes(body) if body else head


def compute_signature(secret_key: str, content: bytes) -> str:
    """``Base64(HmacSHA1(secret_key, content))`` as an ASCII string."""
    digest = hmac.digest(secret_key.encode("utf-8"), content, "sha1")  # OpenSSL's one-shot HMAC
    return base64.b64encode(digest).decode("ascii")


def signatures_equal(expected: str, received: str) -> bool:
    """Compare two signatures in constant time (no timing hint to a forger)."""
    return hmac.compare_digest(
        expected.encode("ascii", "replace"), received.encode("ascii", "replace")
    )


def sign_request(
    request: RemotingCommand,
    access_key: str,
    secret_key: str,
    *,
    security_token: str | None = None,
) -> None:
    """Add ``AccessKey`` (and ``SecurityToken``) to ``request`` and sign it in place.

    Signing twice (a retried request) gives the same result: the old ``Signature`` is not
    part of the content and is replaced.
    """
    fields = request.ext_fields
    fields[ACCESS_KEY_FIELD] = access_key
    if security_token is not None:
        fields[SECURITY_TOKEN_FIELD] = security_token
    body: Body = request.body
    if request.body_parts is not None:
        body = b"".join(bytes(part) for part in request.body_parts)
    content = signature_content(fields, body, version=request.version)
    fields[SIGNATURE_FIELD] = compute_signature(secret_key, content)
