"""Pytest fixtures for the storage servers the S3 and SFTP node tests talk to.

Import everything into ``tests/conftest.py``: ``from tests.storage_servers import *``.

- ``s3_server``: moto's S3-compatible server (``python -m moto.server``, the PyPI package
  ``moto[server]``), one per pytest process on a free port of 127.0.0.1, with request
  authentication on: only the IAM access key it creates (``.access_key_id``,
  ``.secret_access_key``) gets in, and a request signed with another key or secret is
  answered like AWS answers it (``InvalidAccessKeyId``, ``SignatureDoesNotMatch``).
- ``sftp_server``: asyncssh's own SSH server with its SFTP subsystem, per test, on a
  free port of 127.0.0.1, serving a fresh directory (chrooted) to one user with a
  password or a key (``.host_key``: its public host key line).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh
import botocore.session
import pytest
import pytest_asyncio

__all__ = ["S3Server", "SftpServer", "s3_server", "sftp_server"]

HOST = "127.0.0.1"
UNSIGNED_SETUP_REQUESTS = 3
"""Requests moto serves before it checks signatures: the three that create the IAM user,
its policy and its access key."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


@dataclass
class S3Server:
    """A running moto server (``url``) and the access key it accepts."""

    url: str
    access_key_id: str
    secret_access_key: str

    def client(self) -> Any:
        """A botocore S3 client signed with the accepted key (for test setup)."""
        return botocore.session.get_session().create_client(
            "s3",
            region_name="us-east-1",
            endpoint_url=self.url,
            aws_access_key_id=self.access_key_id,
            aws_secret_access_key=self.secret_access_key,
        )


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """moto's S3 server for this pytest process, authentication on."""
    port = _free_port()
    env = {**os.environ, "INITIAL_NO_AUTH_ACTION_COUNT": str(UNSIGNED_SETUP_REQUESTS)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", HOST, "-p", str(port)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    url = f"http://{HOST}:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"moto.server exited with {proc.returncode}", pytrace=False)
            try:
                socket.create_connection((HOST, port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail("moto.server did not start within 60 s", pytrace=False)
                time.sleep(0.1)
        iam = botocore.session.get_session().create_client(
            "iam",
            region_name="us-east-1",
            endpoint_url=url,
            aws_access_key_id="setup",
            aws_secret_access_key="setup",
        )
        iam.create_user(UserName="railyard")
        iam.put_user_policy(
            UserName="railyard",
            PolicyName="all",
            PolicyDocument='{"Version": "2012-10-17", "Statement": '
            '[{"Effect": "Allow", "Action": "*", "Resource": "*"}]}',
        )
        key = iam.create_access_key(UserName="railyard")["AccessKey"]
        yield S3Server(url, key["AccessKeyId"], key["SecretAccessKey"])
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()


@dataclass
class SftpServer:
    """A running SFTP server: ``port``, ``root`` (the directory it serves), the login
    (``username``, ``password``, ``client_key``: a private key in OpenSSH form) and
    ``host_key`` (its public host key line)."""

    port: int
    root: Path
    username: str
    password: str
    client_key: str
    host_key: str


class _Login(asyncssh.SSHServer):
    def __init__(self, username: str, password: str) -> None:
        self.username, self.password = username, password

    def begin_auth(self, username: str) -> bool:
        return True

    def password_auth_supported(self) -> bool:
        return True

    def validate_password(self, username: str, password: str) -> bool:
        return username == self.username and password == self.password


@pytest_asyncio.fixture
async def sftp_server() -> AsyncIterator[SftpServer]:
    """asyncssh's SSH server with SFTP, chrooted to a fresh directory, for one test."""
    root = Path(tempfile.mkdtemp(prefix="railyard-sftp-"))
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    authorized = asyncssh.import_authorized_keys(client_key.export_public_key().decode())
    username, password = "railyard", "sftp test password"

    def sftp_factory(channel: asyncssh.SSHServerChannel) -> asyncssh.SFTPServer:
        return asyncssh.SFTPServer(channel, chroot=str(root).encode())

    server = await asyncssh.listen(
        HOST,
        0,
        server_host_keys=[host_key],
        server_factory=lambda: _Login(username, password),
        authorized_client_keys=authorized,
        sftp_factory=sftp_factory,
        allow_scp=False,
    )
    port = server.sockets[0].getsockname()[1]
    try:
        yield SftpServer(
            port=port,
            root=root,
            username=username,
            password=password,
            client_key=client_key.export_private_key().decode(),
            host_key=host_key.export_public_key().decode().strip(),
        )
    finally:
        server.close()
        await server.wait_closed()
        shutil.rmtree(root, ignore_errors=True)
