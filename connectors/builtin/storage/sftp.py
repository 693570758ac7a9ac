"""Built-in SFTP connector (asyncssh): ``sftp.upload``, ``sftp.download``, ``sftp.list``,
``sftp.delete``.

The ``sftp`` credential holds the server, the login (a password, a private key in
OpenSSH or PEM form with its passphrase, or both) and the server's **host key** (one
line of ``known_hosts`` or ``ssh-keyscan`` output, ``ssh-ed25519 AAAA...``): the
connection is refused unless the server proves it holds that key, so nobody in between
can read the files or the password. An empty host key is refused unless *Accept any host
key* is ticked (a test server only). The host must pass the deployment's SSRF policy;
the connection goes to the address that was checked.

- ``sftp.upload`` -> ``{"path", "size"}``: writes ``file`` (a file reference or text;
  default the step input) to ``path``, replacing it.
- ``sftp.download`` -> a file reference (name: the path's last segment); a file over
  ``max_bytes`` fails before it is read (kind ``file_too_large``).
- ``sftp.list`` -> ``{"items": [{"name", "path", "type", "size", "modified"}],
  "count"}``: the entries of a directory (``.`` and ``..`` left out) by name; ``type``
  is ``file``, ``directory``, ``link`` or ``other``, ``modified`` ISO 8601 UTC.
- ``sftp.delete`` -> ``{"path", "deleted"}``: removes a file.

Errors: a wrong login (``sftp_auth``), a host key that does not match
(``sftp_host_key``), a missing path (``sftp_no_such_file``), a denied one
(``sftp_permission_denied``) and other SFTP status codes (``sftp_<code>``) are not
retryable; a refused or lost connection and timeouts (``sftp_connect``) are.
"""

from __future__ import annotations

import posixpath
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, TypedDict

import asyncssh
import msgspec

from connectors import sdk
from connectors.builtin.databases.sql import dial_host
from connectors.builtin.files.common import (
    DEFAULT_MAX_BYTES,
    FileInput,
    FileRef,
    MaxBytes,
    file_bytes,
    file_ref,
)

__all__ = ["SFTP", "connector", "delete", "download", "list_directory", "upload"]


class SftpFields(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """An SFTP server, its host key and a login (password and/or private key)."""

    host: Annotated[str, msgspec.Meta(title="Host", min_length=1)]
    port: Annotated[int, msgspec.Meta(title="Port", ge=1, le=65535)] = 22
    username: Annotated[str, msgspec.Meta(title="Username", min_length=1)]
    password: Annotated[str, sdk.secret("Password")] = ""
    private_key: Annotated[str, sdk.secret("Private key", "OpenSSH or PEM")] = ""
    passphrase: Annotated[str, sdk.secret("Key passphrase")] = ""
    host_key: Annotated[
        str,
        msgspec.Meta(
            title="Server host key",
            description="A known_hosts line or ssh-keyscan output, e.g. ssh-ed25519 AAAA...",
        ),
    ] = ""
    accept_any_host_key: Annotated[
        bool, msgspec.Meta(title="Accept any host key", description="Test servers only")
    ] = False


SFTP = sdk.credential_type(
    "sftp",
    label="SFTP server",
    kind="custom",
    fields=SftpFields,
    description="An SSH login for file transfer, with the server's host key",
)
CredentialField = Annotated[str, sdk.credential_meta("sftp", title="Server")]
Path = Annotated[str, msgspec.Meta(title="Path", min_length=1)]


class UploadConfig(msgspec.Struct, kw_only=True):
    """Config of ``sftp.upload``."""

    credential: CredentialField
    path: Path
    file: FileInput = None
    max_bytes: MaxBytes = DEFAULT_MAX_BYTES


class PathConfig(msgspec.Struct, kw_only=True):
    """Config of ``sftp.download``, ``sftp.list`` and ``sftp.delete``."""

    credential: CredentialField
    path: Path
    max_bytes: MaxBytes = DEFAULT_MAX_BYTES


class Written(TypedDict):
    """The `path` written and its `size` in bytes."""

    path: str
    size: int


class Entry(TypedDict):
    """A directory entry: `name`, full `path`, `type` (file, directory, link, other),
    `size` in bytes and `modified` (ISO 8601, UTC; null when the server gives none)."""

    name: str
    path: str
    type: Literal["file", "directory", "link", "other"]
    size: int
    modified: str | None


class Directory(TypedDict):
    """The entries as `items` (by name) and their `count`."""

    items: list[Entry]
    count: int


class Removed(TypedDict):
    """The `path` removed; `deleted` is always true."""

    path: str
    deleted: bool


_TYPES: dict[int, Literal["file", "directory", "link"]] = {
    asyncssh.FILEXFER_TYPE_REGULAR: "file",
    asyncssh.FILEXFER_TYPE_DIRECTORY: "directory",
    asyncssh.FILEXFER_TYPE_SYMLINK: "link",
}
_CODES = {
    asyncssh.FX_NO_SUCH_FILE: "sftp_no_such_file",
    asyncssh.FX_PERMISSION_DENIED: "sftp_permission_denied",
}


def _known_hosts(login: dict[str, Any]) -> Any:
    line = (login.get("host_key") or "").strip()
    if not line:
        if login.get("accept_any_host_key"):
            return None
        raise sdk.ConfigError(
            "the SFTP credential has no server host key: paste the server's key "
            "(ssh-keyscan output) or tick 'Accept any host key' for a test server"
        )
    parts = line.split()
    # a known_hosts line starts with the host names; the key starts at its type
    start = next((i for i, p in enumerate(parts) if p.startswith(("ssh-", "ecdsa-", "sk-"))), 0)
    try:
        key = asyncssh.import_public_key(" ".join(parts[start : start + 2]))
    except (asyncssh.KeyImportError, ValueError) as err:
        raise sdk.ConfigError(f"the server host key is not a valid SSH public key: {err}") from None
    return ([key], [], [])


@asynccontextmanager
async def _session() -> AsyncIterator[asyncssh.SFTPClient]:
    login = sdk.credential("credential")
    port = int(login.get("port") or 22)
    where = f"{login['host']}:{port}"
    options: dict[str, Any] = {"known_hosts": _known_hosts(login)}
    if login.get("private_key"):
        try:
            key = asyncssh.import_private_key(login["private_key"], login.get("passphrase") or None)
        except (asyncssh.KeyImportError, ValueError) as err:
            raise sdk.ConfigError(f"the private key cannot be read: {err}") from None
        options["client_keys"] = [key]
    else:
        options["client_keys"] = None
    address = await dial_host(login["host"], port, verify_name=False)
    try:
        async with asyncssh.connect(
            address,
            port,
            username=login["username"],
            password=login.get("password") or None,
            connect_timeout=20,
            login_timeout=20,
            agent_path=None,
            config=None,
            **options,
        ) as connection:
            async with connection.start_sftp_client() as client:
                yield client
    except asyncssh.PermissionDenied as err:
        raise sdk.NonRetryableError(
            f"SFTP {where} refused the login: {err.reason}", kind="sftp_auth"
        ) from None
    except asyncssh.HostKeyNotVerifiable as err:
        raise sdk.NonRetryableError(
            f"SFTP {where} did not prove the host key in the credential: {err.reason}",
            kind="sftp_host_key",
        ) from None
    except asyncssh.SFTPError as err:
        kind = _CODES.get(err.code, f"sftp_{err.code}")
        raise sdk.NonRetryableError(f"SFTP {where}: {err.reason}", kind=kind) from None
    except (asyncssh.Error, OSError, TimeoutError) as err:
        raise sdk.ActionError(
            f"cannot reach SFTP {where}: {type(err).__name__}: {err}", kind="sftp_connect"
        ) from None


def _modified(attrs: asyncssh.SFTPAttrs) -> str | None:
    if attrs.mtime is None:
        return None
    return datetime.fromtimestamp(attrs.mtime, UTC).isoformat().replace("+00:00", "Z")


@sdk.action(
    "sftp.upload",
    label="SFTP: upload",
    config=UploadConfig,
    category="Storage",
    icon="folder-sync",
    description="Write a file to the server.",
    expression_fields=("path", "file"),
)
async def upload(config: UploadConfig, input: Any) -> Written:
    """Write (create or replace) the file."""
    data, _name = file_bytes(config.file, input, config.max_bytes)
    async with _session() as client, client.open(config.path, "wb") as remote:
        await remote.write(data)
    return {"path": config.path, "size": len(data)}


@sdk.action(
    "sftp.download",
    label="SFTP: download",
    config=PathConfig,
    category="Storage",
    icon="folder-sync",
    description="Read a file from the server.",
    expression_fields=("path",),
)
async def download(config: PathConfig, input: Any) -> FileRef:
    """Read the file, refusing one over the size limit before reading it."""
    async with _session() as client:
        attrs = await client.stat(config.path)
        if (attrs.size or 0) > config.max_bytes:
            raise sdk.NonRetryableError(
                f"{config.path} is larger than the size limit ({config.max_bytes} bytes)",
                kind="file_too_large",
            )
        async with client.open(config.path, "rb") as remote:
            data: bytes = await remote.read(config.max_bytes + 1)  # type: ignore[assignment]
    if len(data) > config.max_bytes:
        raise sdk.NonRetryableError(
            f"{config.path} is larger than the size limit ({config.max_bytes} bytes)",
            kind="file_too_large",
        )
    return file_ref(data, posixpath.basename(config.path), "application/octet-stream")


@sdk.action(
    "sftp.list",
    label="SFTP: list directory",
    config=PathConfig,
    category="Storage",
    icon="folder-sync",
    description="List the entries of a directory.",
    expression_fields=("path",),
)
async def list_directory(config: PathConfig, input: Any) -> Directory:
    """``readdir`` of the path."""
    async with _session() as client:
        names = await client.readdir(config.path)
    items: list[Entry] = [
        {
            "name": str(entry.filename),
            "path": posixpath.join(config.path, str(entry.filename)),
            "type": _TYPES.get(entry.attrs.type or 0, "other"),
            "size": int(entry.attrs.size or 0),
            "modified": _modified(entry.attrs),
        }
        for entry in names
        if entry.filename not in (".", "..")
    ]
    items.sort(key=lambda e: e["name"])
    return {"items": items, "count": len(items)}


@sdk.action(
    "sftp.delete",
    label="SFTP: delete file",
    config=PathConfig,
    category="Storage",
    icon="folder-sync",
    description="Remove a file from the server.",
    expression_fields=("path",),
)
async def delete(config: PathConfig, input: Any) -> Removed:
    """``remove`` the path."""
    async with _session() as client:
        await client.remove(config.path)
    return {"path": config.path, "deleted": True}


connector = sdk.Connector(
    name="sftp",
    label="SFTP",
    version="1.0.0",
    description="Upload, download, list and delete files on an SFTP server",
    actions=[upload, download, list_directory, delete],
    credential_types=[SFTP],
    icon="folder-sync",
)
