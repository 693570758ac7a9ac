"""Encryption at rest for secrets (credentials, webhook secrets): AES-256-GCM.

Keys come from settings: ``RAILYARD_ENCRYPTION_KEY`` (base64 of 32 random bytes; the key
new data is encrypted with) and ``RAILYARD_ENCRYPTION_OLD_KEYS`` (comma-separated, keys
that may still be read while ``railyard rotate-key`` re-encrypts). ``railyard dev``
generates a key once and keeps it in ``<data dir>/encryption.key`` (mode 0600).

Blob format (bytes, stored as ``bytea``)::

    version (1 byte, 0x01) | key id (8 bytes) | nonce (12 bytes) | ciphertext + GCM tag (16)

The key id is the first 8 bytes of SHA-256 of the key, so a blob names the key that
decrypts it and rotation can find every blob not under the current key
(:func:`key_id_of`). ``aad`` (associated data) binds a blob to its place, e.g.
``b"credential:<uuid>"``: a blob copied to another row fails to decrypt. Nonces are 96
random bits per encryption (NIST SP 800-38D §8.2.2; safe far beyond 2**32 encryptions per
key at our volumes).

Use either a :class:`Keyring` explicitly, or the module functions :func:`encrypt` /
:func:`decrypt` over the process keyring installed with :func:`configure` (the runtime
does this at startup from settings).
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = [
    "CryptoError",
    "Keyring",
    "configure",
    "configured_keyring",
    "decrypt",
    "encrypt",
    "ensure_dev_key",
    "generate_key",
    "key_id_of",
    "keyring_from_settings",
]

VERSION = 1
KEY_BYTES = 32
KEY_ID_BYTES = 8
NONCE_BYTES = 12
_HEADER = 1 + KEY_ID_BYTES + NONCE_BYTES
DEV_KEY_FILE = "encryption.key"


class CryptoError(Exception):
    """A key is missing or malformed, or a blob cannot be decrypted (wrong key, tampered,
    wrong ``aad``). The message never contains key material or plaintext."""


def generate_key() -> str:
    """A new random key, base64-encoded (the ``RAILYARD_ENCRYPTION_KEY`` format)."""
    return base64.b64encode(secrets.token_bytes(KEY_BYTES)).decode()


def _decode_key(text: str, what: str) -> bytes:
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        raise CryptoError(f"{what} is not valid base64") from None
    if len(raw) != KEY_BYTES:
        raise CryptoError(f"{what} must decode to {KEY_BYTES} bytes, got {len(raw)}")
    return raw


def _key_id(key: bytes) -> bytes:
    return hashlib.sha256(key).digest()[:KEY_ID_BYTES]


def key_id_of(blob: bytes) -> str:
    """Hex key id of the key that encrypted ``blob``; raises :class:`CryptoError`."""
    if len(blob) < _HEADER + 16 or blob[0] != VERSION:
        raise CryptoError("not a Railyard ciphertext (bad version or too short)")
    return blob[1 : 1 + KEY_ID_BYTES].hex()


@dataclass(frozen=True)
class Keyring:
    """The current key (encrypts and decrypts) plus old keys (decrypt only).

    Build with :meth:`from_base64`. ``current_id`` is the hex key id new blobs carry.
    """

    current: bytes
    old: tuple[bytes, ...] = ()
    _ciphers: dict[bytes, AESGCM] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        for key in (self.current, *self.old):
            if len(key) != KEY_BYTES:
                raise CryptoError(f"keys must be {KEY_BYTES} bytes")
            self._ciphers.setdefault(_key_id(key), AESGCM(key))

    @classmethod
    def from_base64(cls, current: str, old: tuple[str, ...] | list[str] = ()) -> Keyring:
        """Keyring from base64 key texts; raises :class:`CryptoError` naming the bad one."""
        return cls(
            _decode_key(current, "RAILYARD_ENCRYPTION_KEY"),
            tuple(
                _decode_key(k, f"RAILYARD_ENCRYPTION_OLD_KEYS[{i}]")
                for i, k in enumerate(old)
                if k.strip()
            ),
        )

    @property
    def current_id(self) -> str:
        """Hex id of the current key."""
        return _key_id(self.current).hex()

    def encrypt(self, plaintext: bytes, *, aad: bytes) -> bytes:
        """Encrypt ``plaintext`` under the current key, authenticating ``aad``."""
        key_id = _key_id(self.current)
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._ciphers[key_id].encrypt(nonce, plaintext, aad)
        return bytes([VERSION]) + key_id + nonce + sealed

    def decrypt(self, blob: bytes, *, aad: bytes) -> bytes:
        """Decrypt a blob from :meth:`encrypt` (under the current or an old key).

        Raises :class:`CryptoError` when the key is unknown, the blob was altered or
        ``aad`` differs from the one used to encrypt.
        """
        key_hex = key_id_of(blob)
        cipher = self._ciphers.get(bytes.fromhex(key_hex))
        if cipher is None:
            raise CryptoError(
                f"ciphertext was encrypted with key {key_hex}, which is neither "
                "RAILYARD_ENCRYPTION_KEY nor in RAILYARD_ENCRYPTION_OLD_KEYS"
            )
        nonce = blob[1 + KEY_ID_BYTES : _HEADER]
        try:
            return cipher.decrypt(nonce, blob[_HEADER:], aad)
        except InvalidTag:
            raise CryptoError("ciphertext failed authentication (altered or wrong aad)") from None

    def reencrypt(self, blob: bytes, *, aad: bytes) -> bytes:
        """Decrypt ``blob`` with whichever key it names and encrypt it under the current key."""
        return self.encrypt(self.decrypt(blob, aad=aad), aad=aad)


@functools.lru_cache(maxsize=8)
def _cached_keyring(current: str, old: tuple[str, ...]) -> Keyring:
    return Keyring.from_base64(current, old)


def keyring_from_settings(settings: Any) -> Keyring:
    """Keyring from ``settings.encryption_key`` / ``settings.encryption_old_keys``.

    Raises :class:`CryptoError` when no key is configured or a key is malformed.
    """
    current = getattr(settings, "encryption_key", "") or ""
    if not current:
        raise CryptoError(
            "RAILYARD_ENCRYPTION_KEY is not set: generate one with "
            "`railyard rotate-key --generate-key` (railyard dev creates one itself)"
        )
    return _cached_keyring(current, tuple(getattr(settings, "encryption_old_keys", ()) or ()))


_configured: Keyring | None = None


def configure(keyring: Keyring | None) -> None:
    """Install the process keyring used by :func:`encrypt` / :func:`decrypt`."""
    global _configured
    _configured = keyring


def configured_keyring() -> Keyring:
    """The process keyring; raises :class:`CryptoError` when none is configured."""
    if _configured is None:
        raise CryptoError("no encryption key configured (set RAILYARD_ENCRYPTION_KEY)")
    return _configured


def encrypt(plaintext: bytes, *, aad: bytes) -> bytes:
    """Encrypt with the process keyring (see :meth:`Keyring.encrypt`)."""
    return configured_keyring().encrypt(plaintext, aad=aad)


def decrypt(blob: bytes, *, aad: bytes) -> bytes:
    """Decrypt with the process keyring (see :meth:`Keyring.decrypt`)."""
    return configured_keyring().decrypt(blob, aad=aad)


def ensure_dev_key(data_dir: Path) -> str:
    """Read ``<data_dir>/encryption.key``, creating it (mode 0600) with a new key if absent.

    For ``railyard dev`` only; production passes ``RAILYARD_ENCRYPTION_KEY``.
    """
    path = data_dir / DEV_KEY_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        text = path.read_text().strip()
        _decode_key(text, str(path))
        return text
    key = generate_key()
    with os.fdopen(fd, "w") as handle:
        handle.write(key + "\n")
    return key
