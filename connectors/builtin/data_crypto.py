"""``data.crypto``: hash, HMAC or random values (Python's ``hashlib``, ``hmac``, ``secrets``).

- ``hash``: the digest of ``value`` with ``algorithm`` (MD5 and SHA-1 for checksums
  other systems ask for, not for security).
- ``hmac``: HMAC (RFC 2104) of ``value`` keyed with the ``secret`` field of a
  ``data.hmac_key`` credential, so the key is stored encrypted and never in the
  workflow; compare it with what a sender sent in constant time downstream.
- ``random``: ``length`` bytes from the operating system's CSPRNG (``secrets``), or a
  random UUID (version 4) with ``encoding`` ``uuid``.

``value`` is text (UTF-8); any other JSON value is hashed as its compact JSON with sorted
keys, so equal objects give equal digests. Output ``{"value", "operation", "algorithm",
"encoding"}``, ``value`` encoded as ``hex``, ``base64`` or ``base64url`` (unpadded).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import uuid
from typing import Annotated, Any, Literal, TypedDict

import msgspec

from connectors import sdk

__all__ = ["HMAC_KEY", "crypto"]


class HmacKeyFields(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """The key of an HMAC."""

    secret: Annotated[str, sdk.secret("Key")]


HMAC_KEY = sdk.credential_type(
    "data.hmac_key",
    label="HMAC key",
    kind="custom",
    fields=HmacKeyFields,
    description="Secret key of the Crypto node's HMAC",
)

Algorithm = Literal["md5", "sha1", "sha256", "sha384", "sha512", "sha3_256", "sha3_512", "blake2b"]
ALGORITHM_LABELS = {
    "md5": "MD5 (checksums only)",
    "sha1": "SHA-1 (checksums only)",
    "sha256": "SHA-256",
    "sha384": "SHA-384",
    "sha512": "SHA-512",
    "sha3_256": "SHA3-256",
    "sha3_512": "SHA3-512",
    "blake2b": "BLAKE2b",
}


class CryptoConfig(msgspec.Struct, kw_only=True):
    """Hash, sign (HMAC) or generate a random value."""

    operation: Annotated[
        Literal["hash", "hmac", "random"],
        msgspec.Meta(
            title="Operation",
            extra_json_schema={
                "x-enum-labels": {"hash": "Hash", "hmac": "HMAC", "random": "Random value"}
            },
        ),
    ] = "hash"
    value: Annotated[Any, msgspec.Meta(title="Value", description="Text or any JSON")] = None
    algorithm: Annotated[
        Algorithm,
        msgspec.Meta(title="Algorithm", extra_json_schema={"x-enum-labels": ALGORITHM_LABELS}),
    ] = "sha256"
    secret: Annotated[
        str,
        sdk.credential_meta("data.hmac_key"),
        msgspec.Meta(title="HMAC key", description="An HMAC key credential"),
    ] = ""
    encoding: Annotated[
        Literal["hex", "base64", "base64url", "uuid"],
        msgspec.Meta(
            title="Encoding",
            description="uuid: a random UUID (Random value only)",
            extra_json_schema={
                "x-enum-labels": {
                    "hex": "Hex",
                    "base64": "Base64",
                    "base64url": "Base64 URL-safe",
                    "uuid": "UUID",
                }
            },
        ),
    ] = "hex"
    length: Annotated[int, msgspec.Meta(title="Random bytes", ge=1, le=1024)] = 32


class CryptoOutput(TypedDict):
    """The encoded `value` and how it was made (`operation`, `algorithm`, `encoding`)."""

    value: str
    operation: str
    algorithm: str
    encoding: str


def _bytes(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode()
    return msgspec.json.encode(value, order="sorted")


def _encode(raw: bytes, encoding: str) -> str:
    if encoding == "hex":
        return raw.hex()
    if encoding == "base64":
        return base64.b64encode(raw).decode()
    if encoding == "base64url":
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    raise sdk.ConfigError("encoding uuid is for Random value only")


@sdk.action(
    "data.crypto",
    label="Crypto",
    config=CryptoConfig,
    category="Data",
    icon="fingerprint",
    expression_fields=("value",),
)
async def crypto(config: CryptoConfig, input: Any) -> CryptoOutput:
    """Hash or HMAC a value, or make a random one."""
    if config.operation == "random":
        value = (
            str(uuid.uuid4())
            if config.encoding == "uuid"
            else _encode(secrets.token_bytes(config.length), config.encoding)
        )
    elif config.operation == "hash":
        digest = hashlib.new(config.algorithm, _bytes(config.value)).digest()
        value = _encode(digest, config.encoding)
    else:
        if not config.secret:
            raise sdk.ConfigError("HMAC needs an HMAC key (a data.hmac_key credential)")
        key = sdk.credential("secret")["secret"].encode()
        digest = hmac.new(key, _bytes(config.value), config.algorithm).digest()
        value = _encode(digest, config.encoding)
    return {
        "value": value,
        "operation": config.operation,
        "algorithm": "" if config.operation == "random" else config.algorithm,
        "encoding": config.encoding,
    }
