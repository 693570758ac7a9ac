"""Built-in S3 connector (aiobotocore): ``s3.upload``, ``s3.download``, ``s3.list``,
``s3.delete`` on Amazon S3 or any S3-compatible store (MinIO, Ceph, R2, ...).

The ``s3`` credential holds the access key pair, the region and, for an S3-compatible
store, its endpoint URL (``path_style`` for stores that do not serve bucket names as
host names). Requests are signed with AWS Signature Version 4 by botocore. The
endpoint's host is checked against the deployment's SSRF policy before the client
connects (the default endpoint, ``https://s3.<region>.amazonaws.com``, is public).

- ``s3.upload`` -> ``{"bucket", "key", "size", "etag", "version_id"}``: stores ``file``
  (a file reference or text; default the step input) at ``key`` with its content type.
- ``s3.download`` -> a file reference (name: the key's last segment); an object over
  ``max_bytes`` fails the step before its body is read (kind ``file_too_large``).
- ``s3.list`` -> ``{"items": [{"key", "size", "etag", "last_modified"}], "count",
  "truncated"}``: the objects under ``prefix`` in key order, following continuation
  tokens up to ``max_keys`` (``truncated`` when more remain).
- ``s3.delete`` -> ``{"bucket", "key", "deleted"}`` (S3 answers the same whether the
  key existed or not).

Errors: S3's error code becomes the kind ``s3_<code>`` (``s3_no_such_key``,
``s3_no_such_bucket``, ``s3_access_denied``, ``s3_invalid_access_key_id``,
``s3_signature_does_not_match``, ...), not retryable; ``SlowDown``, throttling and 5xx
answers (``s3_slow_down``, ``s3_internal_error``, ...) and unreachable endpoints
(``s3_connect``) are retryable.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Annotated, Any, TypedDict
from urllib.parse import urlsplit

import aiobotocore.session
import botocore.exceptions
import msgspec
from aiobotocore.config import AioConfig

from connectors import sdk
from connectors.builtin.files.common import (
    DEFAULT_MAX_BYTES,
    FileInput,
    FileRef,
    MaxBytes,
    file_bytes,
    file_ref,
)

__all__ = ["S3", "connector", "delete", "download", "list_objects", "upload"]

RETRYABLE = frozenset(
    {
        "SlowDown",
        "Throttling",
        "ThrottlingException",
        "RequestTimeout",
        "InternalError",
        "ServiceUnavailable",
        "RequestTimeTooSkewed",
    }
)


class S3Fields(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """An S3 access key pair, region and (for S3-compatible stores) endpoint."""

    access_key_id: Annotated[str, msgspec.Meta(title="Access key id", min_length=1)]
    secret_access_key: Annotated[str, sdk.secret("Secret access key")]
    region: Annotated[str, msgspec.Meta(title="Region")] = "us-east-1"
    endpoint_url: Annotated[
        str,
        msgspec.Meta(
            title="Endpoint URL",
            description="Empty for Amazon S3; e.g. https://minio.example.com",
        ),
    ] = ""
    path_style: Annotated[
        bool,
        msgspec.Meta(
            title="Path-style addressing", description="Needed by most S3-compatible stores"
        ),
    ] = False


S3 = sdk.credential_type(
    "s3",
    label="S3 / S3-compatible storage",
    kind="custom",
    fields=S3Fields,
    description="Access key pair for Amazon S3 or an S3-compatible store",
)
CredentialField = Annotated[str, sdk.credential_meta("s3", title="Storage")]
Bucket = Annotated[str, msgspec.Meta(title="Bucket", min_length=3, max_length=63)]
Key = Annotated[str, msgspec.Meta(title="Key", min_length=1, max_length=1024)]


class UploadConfig(msgspec.Struct, kw_only=True):
    """Config of ``s3.upload``."""

    credential: CredentialField
    bucket: Bucket
    key: Key
    file: FileInput = None
    content_type: Annotated[
        str, msgspec.Meta(title="Content type", description="Empty: the file's own")
    ] = ""
    max_bytes: MaxBytes = DEFAULT_MAX_BYTES


class ObjectConfig(msgspec.Struct, kw_only=True):
    """Config of ``s3.download`` and ``s3.delete``."""

    credential: CredentialField
    bucket: Bucket
    key: Key
    max_bytes: MaxBytes = DEFAULT_MAX_BYTES


class ListConfig(msgspec.Struct, kw_only=True):
    """Config of ``s3.list``."""

    credential: CredentialField
    bucket: Bucket
    prefix: Annotated[str, msgspec.Meta(title="Prefix")] = ""
    max_keys: Annotated[int, msgspec.Meta(title="At most", ge=1, le=100_000)] = 1000


class Uploaded(TypedDict):
    """Where the object went (`bucket`, `key`), its `size` in bytes, the `etag` S3
    gave it and its `version_id` (null when the bucket is not versioned)."""

    bucket: str
    key: str
    size: int
    etag: str
    version_id: str | None


class ObjectInfo(TypedDict):
    """One object: `key`, `size` in bytes, `etag`, `last_modified` (ISO 8601)."""

    key: str
    size: int
    etag: str
    last_modified: str


class Listing(TypedDict):
    """The objects as `items`, their `count`, and `truncated` when more remain."""

    items: list[ObjectInfo]
    count: int
    truncated: bool


class Deleted(TypedDict):
    """The `bucket` and `key` deleted; `deleted` is always true."""

    bucket: str
    key: str
    deleted: bool


def _kind(code: str) -> str:
    return "s3_" + re.sub(r"(?<!^)(?=[A-Z])", "_", code).lower().replace("__", "_")


def _error(err: Exception, where: str) -> sdk.ActionError:
    if isinstance(err, botocore.exceptions.ClientError):
        error = err.response.get("Error", {})
        status = int(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 0)
        code = str(error.get("Code") or status or "Error")
        if code.isdigit():  # HEAD answers carry no body: only the status
            code = {"404": "NoSuchKey", "403": "AccessDenied"}.get(code, f"Http{code}")
        message = f"S3 {where}: {code}: {error.get('Message') or ''}".rstrip(": ")
        details = {"code": code, "status": status}
        if code in RETRYABLE or status >= 500 or status == 429:
            return sdk.ActionError(message, kind=_kind(code), details=details)
        return sdk.NonRetryableError(message, kind=_kind(code), details=details)
    return sdk.ActionError(f"S3 {where}: cannot reach the endpoint: {err}", kind="s3_connect")


@asynccontextmanager
async def _client() -> AsyncIterator[Any]:
    login = sdk.credential("credential")
    endpoint = login.get("endpoint_url") or None
    region = login.get("region") or "us-east-1"
    host = urlsplit(endpoint or f"https://s3.{region}.amazonaws.com")
    if host.scheme not in ("http", "https") or not host.hostname:
        raise sdk.ConfigError(f"the endpoint URL {endpoint!r} is not an http(s) URL")
    await sdk.current_context().ssrf.resolve_and_check(
        host.hostname, host.port or (443 if host.scheme == "https" else 80)
    )
    config = AioConfig(
        connect_timeout=10,
        read_timeout=60,
        retries={"max_attempts": 1},
        s3={"addressing_style": "path" if login.get("path_style") else "auto"},
    )
    session = aiobotocore.session.get_session()
    async with session.create_client(
        "s3",
        region_name=region,
        endpoint_url=endpoint,
        aws_access_key_id=login["access_key_id"],
        aws_secret_access_key=login["secret_access_key"],
        config=config,
    ) as client:
        yield client


_FAILURES = (botocore.exceptions.ClientError, botocore.exceptions.BotoCoreError, OSError)


@sdk.action(
    "s3.upload",
    label="S3: upload",
    config=UploadConfig,
    category="Storage",
    icon="cloud",
    description="Store a file as an object.",
    expression_fields=("bucket", "key", "file", "content_type"),
)
async def upload(config: UploadConfig, input: Any) -> Uploaded:
    """``PutObject``."""
    data, _name = file_bytes(config.file, input, config.max_bytes)
    source = config.file if config.file is not None else input
    content_type = config.content_type or (
        str(source.get("content_type") or "") if isinstance(source, dict) else "text/plain"
    )
    try:
        async with _client() as client:
            answer = await client.put_object(
                Bucket=config.bucket,
                Key=config.key,
                Body=data,
                ContentType=content_type or "application/octet-stream",
            )
    except _FAILURES as err:
        raise _error(err, f"upload to {config.bucket}/{config.key}") from None
    return {
        "bucket": config.bucket,
        "key": config.key,
        "size": len(data),
        "etag": str(answer.get("ETag", "")).strip('"'),
        "version_id": answer.get("VersionId"),
    }


@sdk.action(
    "s3.download",
    label="S3: download",
    config=ObjectConfig,
    category="Storage",
    icon="cloud",
    description="Read an object as a file.",
    expression_fields=("bucket", "key"),
)
async def download(config: ObjectConfig, input: Any) -> FileRef:
    """``GetObject``, refusing an object over the size limit before reading it."""
    where = f"download of {config.bucket}/{config.key}"
    try:
        async with _client() as client:
            answer = await client.get_object(Bucket=config.bucket, Key=config.key)
            async with answer["Body"] as body:
                if int(answer.get("ContentLength") or 0) > config.max_bytes:
                    raise sdk.NonRetryableError(
                        f"S3 {where}: the object is larger than the size limit "
                        f"({config.max_bytes} bytes)",
                        kind="file_too_large",
                    )
                data = await body.read()
    except _FAILURES as err:
        raise _error(err, where) from None
    name = posixpath.basename(config.key) or config.key
    return file_ref(data, name, str(answer.get("ContentType") or "application/octet-stream"))


@sdk.action(
    "s3.list",
    label="S3: list objects",
    config=ListConfig,
    category="Storage",
    icon="cloud",
    description="List the objects under a prefix.",
    expression_fields=("bucket", "prefix"),
)
async def list_objects(config: ListConfig, input: Any) -> Listing:
    """``ListObjectsV2``, following continuation tokens."""
    items: list[ObjectInfo] = []
    truncated = False
    try:
        async with _client() as client:
            paginator = client.get_paginator("list_objects_v2")
            pages = paginator.paginate(
                Bucket=config.bucket,
                Prefix=config.prefix,
                PaginationConfig={"PageSize": min(config.max_keys, 1000)},
            )
            async for page in pages:
                for entry in page.get("Contents", []):
                    if len(items) >= config.max_keys:
                        truncated = True
                        break
                    items.append(
                        {
                            "key": entry["Key"],
                            "size": int(entry.get("Size", 0)),
                            "etag": str(entry.get("ETag", "")).strip('"'),
                            "last_modified": entry["LastModified"].isoformat(),
                        }
                    )
                if truncated or (len(items) >= config.max_keys and page.get("IsTruncated")):
                    truncated = True
                    break
    except _FAILURES as err:
        raise _error(err, f"listing of {config.bucket}/{config.prefix}") from None
    return {"items": items, "count": len(items), "truncated": truncated}


@sdk.action(
    "s3.delete",
    label="S3: delete object",
    config=ObjectConfig,
    category="Storage",
    icon="cloud",
    description="Delete an object.",
    expression_fields=("bucket", "key"),
)
async def delete(config: ObjectConfig, input: Any) -> Deleted:
    """``DeleteObject``."""
    try:
        async with _client() as client:
            await client.delete_object(Bucket=config.bucket, Key=config.key)
    except _FAILURES as err:
        raise _error(err, f"delete of {config.bucket}/{config.key}") from None
    return {"bucket": config.bucket, "key": config.key, "deleted": True}


connector = sdk.Connector(
    name="s3",
    label="S3 storage",
    version="1.0.0",
    description="Upload, download, list and delete objects in S3-compatible storage",
    actions=[upload, download, list_objects, delete],
    credential_types=[S3],
    icon="cloud",
)
