"""Encryption at rest: AES-256-GCM with the key from ``RAILYARD_ENCRYPTION_KEY``.

``encrypt(bytes) -> bytes`` and ``decrypt(bytes) -> bytes`` are the whole interface. The
key is 32 bytes, given as URL-safe base64 (``python -c "import secrets,base64;
print(base64.urlsafe_b64encode(secrets.token_bytes(32)).decode())"``); :func:`configure`
installs it (``build_runtime`` does, from settings). Token layout: ``b"\\x01"`` (format
version) + 12-byte random nonce + ciphertext with the 16-byte GCM tag.
"""

from __future__ import annotations

import base64
import binascii
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

_VERSION = b"\x01"
_key: bytes | None = None


class CryptoError(Exception):
    """No key is configured, the key is malformed, or a token cannot be decrypted."""


def parse_key(text: str) -> bytes:
    """Decode a base64 key; raises :class:`CryptoError` unless it is 32 bytes."""
    try:
        raw = base64.urlsafe_b64decode(text.strip() + "=" * (-len(text.strip()) % 4))
    except (binascii.Error, ValueError) as exc:
        raise CryptoError("RAILYARD_ENCRYPTION_KEY is not valid base64") from exc
    if len(raw) != 32:
        raise CryptoError(f"RAILYARD_ENCRYPTION_KEY must decode to 32 bytes, got {len(raw)}")
    return raw


def configure(key_b64: str) -> None:
    """Install the process's key (URL-safe base64 of 32 bytes)."""
    global _key
    _key = parse_key(key_b64)


def new_key() -> str:
    """A fresh random key in the settings format."""
    return base64.urlsafe_b64encode(os.urandom(32)).decode()


def _current() -> bytes:
    if _key is None:
        raise CryptoError("no encryption key: set RAILYARD_ENCRYPTION_KEY")
    return _key


def encrypt(data: bytes) -> bytes:
    """Encrypt ``data``; returns version + nonce + ciphertext + tag."""
    nonce = os.urandom(12)
    return _VERSION + nonce + AESGCM(_current()).encrypt(nonce, data, None)


def decrypt(token: bytes) -> bytes:
    """Decrypt a token from :func:`encrypt`; raises :class:`CryptoError` if it was altered."""
    if len(token) < 29 or token[:1] != _VERSION:
        raise CryptoError("not an encrypted token of a known format")
    try:
        return AESGCM(_current()).decrypt(token[1:13], token[13:], None)
    except InvalidTag as exc:
        raise CryptoError("cannot decrypt: wrong key or altered data") from exc
