"""Body parsing edge cases and encryption at rest of webhook secrets (no I/O)."""

from __future__ import annotations

import uuid

import pytest

from backend import crypto
from backend.engine.nodes.base import NodeError
from backend.engine.nodes.trigger_webhook import WebhookConfig, webhook_config
from backend.services.triggers.webhooks import secret_aad
from backend.triggers.webhook_auth import AuthFailure, verify
from backend.triggers.webhook_input import BodyError, parse_request_body


def test_unknown_charset_falls_back_to_utf8() -> None:
    assert parse_request_body("text/plain; charset=klingon", "é".encode()).body == "é"


def test_bytes_without_type_are_text_when_utf8_else_base64() -> None:
    assert parse_request_body("", b"plain").body == "plain"
    assert parse_request_body("", b"\xff\x00").body["$base64"] == "/wA="
    assert parse_request_body("", b"").body is None


def test_multipart_without_boundary_or_truncated_is_a_400() -> None:
    with pytest.raises(BodyError, match="boundary"):
        parse_request_body("multipart/form-data", b"x")
    with pytest.raises(BodyError, match="malformed multipart"):
        parse_request_body("multipart/form-data; boundary=zz", b"--zz\r\nContent-Dispo")


def test_json_error_names_the_place() -> None:
    with pytest.raises(BodyError, match=r"line 2, column 3"):
        parse_request_body("application/json", b'{"a": 1,\n  oops}')


def test_webhook_secret_encryption_roundtrip_tamper_and_binding() -> None:
    workflow_id, other = uuid.uuid4(), uuid.uuid4()
    try:
        previous: crypto.Keyring | None = crypto.configured_keyring()
    except crypto.CryptoError:
        previous = None
    crypto.configure(crypto.Keyring.from_base64(crypto.generate_key()))
    try:
        blob = crypto.encrypt(b"secret", aad=secret_aad(workflow_id))
        assert b"secret" not in blob
        assert crypto.decrypt(blob, aad=secret_aad(workflow_id)) == b"secret"
        with pytest.raises(crypto.CryptoError):
            crypto.decrypt(blob[:-1] + bytes([blob[-1] ^ 1]), aad=secret_aad(workflow_id))
        # a blob moved to another workflow's row does not decrypt
        with pytest.raises(crypto.CryptoError):
            crypto.decrypt(blob, aad=secret_aad(other))
    finally:
        crypto.configure(previous)
    with pytest.raises(crypto.CryptoError, match="32 bytes"):
        crypto.Keyring.from_base64("c2hvcnQ=")


def test_auth_kinds_reject_without_secret_and_unknown_kind() -> None:
    with pytest.raises(AuthFailure, match="no secret"):
        verify(WebhookConfig(auth="hmac"), None, {}, b"", 0)
    with pytest.raises(NodeError, match="auth") as caught:  # refused where it is decoded
        webhook_config({"auth": "magic"})
    assert caught.value.field == "auth" and caught.value.kind == "invalid_config"
    verify(WebhookConfig(), None, {}, b"", 0)


def test_malformed_json_message_says_at_once() -> None:
    """The decoder's "Invalid control character at" is not followed by a second "at"."""
    with pytest.raises(BodyError) as caught:
        parse_request_body("application/json", b'{"a": "x\ny"}')
    message = str(caught.value)
    assert "Invalid control character at line 1, column 9" in message, message
    assert "at at" not in message
