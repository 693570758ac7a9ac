"""S3 and SFTP nodes against real local servers: moto's S3 server with authentication on,
and asyncssh's SSH server with SFTP (tests/storage_servers.py)."""

from __future__ import annotations

import base64
import uuid
from typing import Any

import asyncssh
import pytest

from connectors import sdk
from connectors.builtin.storage import s3, sftp
from connectors.testing import ActionTestEnvironment
from tests.fakes.smtp import free_port
from tests.storage_servers import S3Server, SftpServer
from tests.unit.connectors.output_schema import assert_declared_output


def _s3_env(server: S3Server, **login: Any) -> ActionTestEnvironment:
    fields = {
        "access_key_id": server.access_key_id,
        "secret_access_key": server.secret_access_key,
        "endpoint_url": server.url,
        "path_style": True,
        **login,
    }
    return ActionTestEnvironment(
        credentials={"s3": {"type": "s3", **fields}}, credential_types=[s3.S3]
    )


async def _run(env: ActionTestEnvironment, action: sdk.ActionDefinition, **config: Any) -> Any:
    cred = "s3" if action.type.startswith("s3.") else "sftp"
    out = await env.run(action, {"credential": cred, **config}, None)
    assert_declared_output(action, out)
    return out


@pytest.fixture
def bucket(s3_server: S3Server) -> str:
    name = f"bucket-{uuid.uuid4().hex[:12]}"
    s3_server.client().create_bucket(Bucket=name)
    return name


async def test_s3_upload_list_download_delete(s3_server: S3Server, bucket: str) -> None:
    env = _s3_env(s3_server)
    file = {"filename": "r.csv", "content_type": "text/csv", "size": 4, "base64": "YSxiCg=="}
    up = await _run(env, s3.upload, bucket=bucket, key="reports/r.csv", file=file)
    assert up["size"] == 4 and up["etag"] and up["key"] == "reports/r.csv"
    await _run(env, s3.upload, bucket=bucket, key="reports/notes.txt", file="hello")
    await _run(env, s3.upload, bucket=bucket, key="other/x", file="x")
    listed = await _run(env, s3.list_objects, bucket=bucket, prefix="reports/")
    assert [i["key"] for i in listed["items"]] == ["reports/notes.txt", "reports/r.csv"]
    assert listed["truncated"] is False and listed["items"][1]["size"] == 4
    capped = await _run(env, s3.list_objects, bucket=bucket, max_keys=2)
    assert capped["count"] == 2 and capped["truncated"] is True
    down = await _run(env, s3.download, bucket=bucket, key="reports/r.csv")
    assert down["filename"] == "r.csv" and down["content_type"] == "text/csv"
    assert base64.b64decode(down["base64"]) == b"a,b\n"
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(env, s3.download, bucket=bucket, key="reports/r.csv", max_bytes=2)
    assert err.value.kind == "file_too_large"
    assert (await _run(env, s3.delete, bucket=bucket, key="reports/r.csv"))["deleted"] is True
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(env, s3.download, bucket=bucket, key="reports/r.csv")
    assert err.value.kind == "s3_no_such_key"


async def test_s3_wrong_credentials_and_missing_bucket(s3_server: S3Server, bucket: str) -> None:
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(_s3_env(s3_server, secret_access_key="wrong"), s3.list_objects, bucket=bucket)
    assert err.value.kind == "s3_signature_does_not_match"
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(_s3_env(s3_server, access_key_id="AKIANOBODY"), s3.list_objects, bucket=bucket)
    assert err.value.kind == "s3_invalid_access_key_id"
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(_s3_env(s3_server), s3.upload, bucket="no-such-bucket-here", key="k", file="x")
    assert err.value.kind == "s3_no_such_bucket"
    with pytest.raises(sdk.ActionError) as err:
        await _run(
            _s3_env(s3_server, endpoint_url=f"http://127.0.0.1:{free_port()}"),
            s3.list_objects,
            bucket=bucket,
        )
    assert err.value.kind == "s3_connect" and err.value.retryable
    guarded = _s3_env(s3_server)
    guarded.ssrf = sdk.SsrfPolicy()
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(guarded, s3.list_objects, bucket=bucket)
    assert err.value.kind == "ssrf_blocked"


# -- SFTP ------------------------------------------------------------------------------


def _sftp_env(server: SftpServer, **login: Any) -> ActionTestEnvironment:
    fields = {
        "host": "127.0.0.1",
        "port": server.port,
        "username": server.username,
        "password": server.password,
        "host_key": f"[127.0.0.1]:{server.port} {server.host_key}",
        **login,
    }
    return ActionTestEnvironment(
        credentials={"sftp": {"type": "sftp", **fields}}, credential_types=[sftp.SFTP]
    )


async def test_sftp_upload_list_download_delete(sftp_server: SftpServer) -> None:
    env = _sftp_env(sftp_server)
    (sftp_server.root / "in").mkdir()
    out = await _run(env, sftp.upload, path="/in/a.txt", file="alpha")
    assert out == {"path": "/in/a.txt", "size": 5}
    assert (sftp_server.root / "in" / "a.txt").read_bytes() == b"alpha"
    listed = await _run(env, sftp.list_directory, path="/in")
    assert [(e["name"], e["type"], e["size"]) for e in listed["items"]] == [("a.txt", "file", 5)]
    assert listed["items"][0]["path"] == "/in/a.txt" and listed["items"][0]["modified"]
    down = await _run(env, sftp.download, path="/in/a.txt")
    assert down["filename"] == "a.txt" and base64.b64decode(down["base64"]) == b"alpha"
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(env, sftp.download, path="/in/a.txt", max_bytes=3)
    assert err.value.kind == "file_too_large"
    assert (await _run(env, sftp.delete, path="/in/a.txt"))["deleted"] is True
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(env, sftp.download, path="/in/a.txt")
    assert err.value.kind == "sftp_no_such_file"
    # a key login works as well as a password
    keyed = _sftp_env(sftp_server, password="", private_key=sftp_server.client_key)
    assert (await _run(keyed, sftp.list_directory, path="/"))["items"][0]["name"] == "in"


async def test_sftp_refuses_wrong_logins_and_host_keys(sftp_server: SftpServer) -> None:
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(_sftp_env(sftp_server, password="wrong"), sftp.list_directory, path="/")
    assert err.value.kind == "sftp_auth"
    other = asyncssh.generate_private_key("ssh-ed25519").export_public_key().decode()
    with pytest.raises(sdk.NonRetryableError) as err:
        await _run(_sftp_env(sftp_server, host_key=other), sftp.list_directory, path="/")
    assert err.value.kind == "sftp_host_key"
    with pytest.raises(sdk.ConfigError):
        await _run(_sftp_env(sftp_server, host_key=""), sftp.list_directory, path="/")
    trusting = _sftp_env(sftp_server, host_key="", accept_any_host_key=True)
    assert (await _run(trusting, sftp.list_directory, path="/"))["count"] == 0
    with pytest.raises(sdk.ActionError) as err:
        await _run(_sftp_env(sftp_server, port=free_port()), sftp.list_directory, path="/")
    assert err.value.kind == "sftp_connect" and err.value.retryable
