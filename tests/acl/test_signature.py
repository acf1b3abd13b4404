"""The request signature, checked against an independent HMAC-SHA1 (the openssl command)."""

from __future__ import annotations

import base64
import shutil
import subprocess

import pytest

from bolide.protocol.acl_signature import (
    compute_signature,
    sign_request,
    signature_content,
)
from bolide.protocol.codes import RequestCode
from bolide.protocol.command import RemotingCommand


def _openssl_signature(secret: str, content: bytes) -> str:
    digest = subprocess.run(
        ["openssl", "dgst", "-sha1", "-hmac", secret, "-binary"],
        input=content,
        capture_output=True,
        check=True,
    ).stdout
    return base64.b64encode(digest).decode()


def test_content_is_values_sorted_by_key_then_body() -> None:
    fields = {"topic": "T", "AccessKey": "ak", "Signature": "old", "OnsChannel": "ALIYUN", "a": "1"}
    assert signature_content(fields, b"BODY") == b"akALIYUN1TBODY"


def test_content_sorts_as_java_treemap_uppercase_first() -> None:
    # Java's TreeMap sorts by UTF-16 code unit: "B" < "a"; Python's str order agrees on ASCII.
    assert signature_content({"a": "x", "B": "y", "_Z": "z"}) == b"yzx"


def test_unique_key_query_flag_is_signed_after_v4_9_3_only() -> None:
    fields = {"topic": "t", "_UNIQUE_KEY_QUERY": "true"}
    assert signature_content(fields, version=399) == b"t"  # V4_9_3: left out
    assert signature_content(fields, version=401) == b"truet"  # V4_9_4: signed, "_" sorts first
    assert signature_content(fields) == b"truet"  # Bolide sends V4_9_4


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl command missing")
def test_signature_matches_openssl_hmac_sha1() -> None:
    content = signature_content({"AccessKey": "RocketMQ", "topic": "orders"}, b"\x00\xffbody")
    assert compute_signature("12345678", content) == _openssl_signature("12345678", content)


def test_sign_request_is_idempotent_and_keeps_the_secret_out() -> None:
    request = RemotingCommand.request(RequestCode.SEND_MESSAGE, {"topic": "orders"}, b"hello")
    sign_request(request, "RocketMQ", "secret-123")
    first = dict(request.ext_fields)
    sign_request(request, "RocketMQ", "secret-123")
    assert request.ext_fields == first
    assert first["AccessKey"] == "RocketMQ"
    assert "secret-123" not in "".join(first.values())
    expected = compute_signature("secret-123", b"RocketMQorders" + b"hello")
    assert first["Signature"] == expected
