"""Pytest fixtures for the database servers the database node tests query: MariaDB, and
a PostgreSQL serving TLS.

Import everything into ``tests/conftest.py``: ``from tests.database_servers import *``.

Each pytest process (each pytest-xdist worker) starts its own ``mariadbd`` (Debian's
``mariadb-server``, installed by ``make trigger-servers``) the first time a test asks for
it: a data directory made by ``mariadb-install-db`` in the session's broker directory,
TCP on a free port of 127.0.0.1 only, TLS with a self-signed certificate made here
(clients may connect with or without it), and a user ``railyard`` with a password and
the database ``railyard``, created by the server's init file at start. The Debian
service is never used. A missing binary fails the test that needs it, naming the command
that installs it; nothing is skipped. The server stops, and its directory goes, when the
session ends (or at the next session's sweep when the session was killed).

``tls_postgres`` is Debian's PostgreSQL (``postgresql``, also from ``make
trigger-servers``; the embedded wheel is built without TLS) in a private cluster with
``ssl = on`` and a self-signed certificate, run as the embedded server's system account
when the tests run as root; the Debian cluster is never used.
"""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from backend.embedded.pg_binaries import pg_system_user
from tests.broker_servers import HOST, BrokerServer, _executable, _serving
from tests.fakes.smtp import self_signed_files

__all__ = ["MariaDBServer", "TlsPostgres", "mariadb_server", "tls_postgres"]

INSTALL_HINT = "run `make trigger-servers` (installs mariadb-server)"


class MariaDBServer(BrokerServer):
    """MariaDB with its own data directory, socket and port on 127.0.0.1.

    Attributes: ``user``, ``password``, ``database`` (the login the tests use),
    ``ca_file`` (the PEM certificate the server presents, which is its own CA).
    """

    name = "mariadb"
    start_timeout = 60.0
    user = "railyard"
    password = "mariadb test password"
    database = "railyard"

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        self._server = _executable("mariadbd")
        self._install = _executable("mariadb-install-db")
        self.data_dir = directory / "data"
        self.ca_file, self.key_file = self_signed_files(directory)

    def prepare(self) -> None:
        if not (self.data_dir / "mysql").is_dir():
            self._install_db()
        (self.directory / "init.sql").write_text(
            f"CREATE DATABASE IF NOT EXISTS {self.database};\n"
            f"CREATE USER IF NOT EXISTS '{self.user}'@'%' IDENTIFIED BY '{self.password}';\n"
            f"GRANT ALL ON *.* TO '{self.user}'@'%';\n"
        )

    def _install_db(self, attempts: int = 2) -> None:
        """Create the system tables (``mariadb-install-db``), once more on a clean data
        directory when the bootstrap server fails (seen once on a machine loaded by
        parallel test servers); the last attempt's output in the error."""
        for attempt in range(1, attempts + 1):
            done = subprocess.run(
                [
                    self._install,
                    "--no-defaults",
                    f"--datadir={self.data_dir}",
                    f"--user={getpass.getuser()}",
                    "--auth-root-authentication-method=normal",
                    "--skip-test-db",
                    "--skip-name-resolve",
                ],
                capture_output=True,
                timeout=120,
                check=False,
            )
            if done.returncode == 0:
                return
            if attempt < attempts:
                shutil.rmtree(self.data_dir, ignore_errors=True)
        raise RuntimeError(
            "mariadb-install-db failed: " + done.stdout.decode() + done.stderr.decode()
        )

    def command(self) -> list[str]:
        return [
            self._server,
            "--no-defaults",
            f"--datadir={self.data_dir}",
            f"--user={getpass.getuser()}",
            f"--bind-address={HOST}",
            f"--port={self.port}",
            f"--socket={self.directory / 'mariadb.sock'}",
            f"--pid-file={self.directory / 'mariadbd.pid'}",
            f"--init-file={self.directory / 'init.sql'}",
            f"--ssl-cert={self.ca_file}",
            f"--ssl-key={self.key_file}",
            "--skip-name-resolve",
            "--skip-log-bin",
            "--innodb-buffer-pool-size=16M",
            "--max-connections=50",
        ]


@pytest.fixture(scope="session")
def mariadb_server(broker_session_dir: Path) -> Iterator[MariaDBServer]:
    """MariaDB for this pytest process (``.port``, ``.user``, ``.password``,
    ``.database``, ``.ca_file``)."""
    try:
        server = MariaDBServer(broker_session_dir / "mariadb")
    except OSError as err:  # pragma: no cover - a broken installation
        pytest.fail(f"cannot prepare MariaDB ({err}): {INSTALL_HINT}", pytrace=False)
    for running in _serving(server):
        assert isinstance(running, MariaDBServer)
        yield running


class TlsPostgres(BrokerServer):
    """Debian's PostgreSQL with TLS on 127.0.0.1 (``port``, ``user``; trust
    authentication; ``ca_file``: the certificate it presents, which is its own CA)."""

    name = "postgres-tls"
    user = "railyard"

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"))
        if not found:
            pytest.fail(
                "Debian's PostgreSQL is not installed: run `make trigger-servers`", pytrace=False
            )
        self._bin = found[-1].parent
        self.data_dir = directory / "data"
        self.ca_file, self.key_file = self_signed_files(directory)
        self._ids = pg_system_user()
        directory.chmod(0o755)
        if self._ids is not None:  # the server's account owns its directory and key
            for path in (directory, self.ca_file, self.key_file):
                os.chown(path, *self._ids)

    def _as_server(self, command: list[str]) -> list[str]:
        if self._ids is None:
            return command
        uid, gid = self._ids
        return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", *command]

    def prepare(self) -> None:
        if (self.data_dir / "PG_VERSION").exists():
            return
        done = subprocess.run(
            self._as_server(
                [
                    str(self._bin / "initdb"),
                    *("-D", str(self.data_dir), "-U", self.user),
                    *("--auth=trust", "-E", "UTF8", "--no-sync"),
                ]
            ),
            capture_output=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError("initdb failed: " + done.stdout.decode() + done.stderr.decode())

    def ready(self) -> bool:
        """True once the server accepts sessions (not merely its port: it answers
        "starting up" first)."""
        done = subprocess.run(
            [str(self._bin / "pg_isready"), "-h", HOST, "-p", str(self.port), "-U", self.user],
            capture_output=True,
            timeout=10,
            check=False,
        )
        return done.returncode == 0

    def command(self) -> list[str]:
        settings = {
            "listen_addresses": HOST,
            "unix_socket_directories": str(self.directory),
            "ssl": "on",
            "ssl_cert_file": str(self.ca_file),
            "ssl_key_file": str(self.key_file),
            "fsync": "off",
        }
        options = [f"--{k.replace('_', '-')}={v}" for k, v in settings.items()]
        return self._as_server(
            [str(self._bin / "postgres"), "-D", str(self.data_dir), "-p", str(self.port), *options]
        )


@pytest.fixture(scope="session")
def tls_postgres(embedded_session_dir: Path) -> Iterator[TlsPostgres]:
    """A PostgreSQL serving TLS for this pytest process (see the module docstring)."""
    for running in _serving(TlsPostgres(embedded_session_dir / "pg-tls")):
        assert isinstance(running, TlsPostgres)
        yield running
