"""Pytest fixture for the MariaDB server the MySQL/MariaDB node tests query.

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
"""

from __future__ import annotations

import getpass
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.broker_servers import HOST, BrokerServer, _executable, _serving
from tests.fakes.smtp import self_signed_files

__all__ = ["MariaDBServer", "mariadb_server"]

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
            if done.returncode != 0:
                raise RuntimeError(
                    "mariadb-install-db failed: " + done.stdout.decode() + done.stderr.decode()
                )
        (self.directory / "init.sql").write_text(
            f"CREATE DATABASE IF NOT EXISTS {self.database};\n"
            f"CREATE USER IF NOT EXISTS '{self.user}'@'%' IDENTIFIED BY '{self.password}';\n"
            f"GRANT ALL ON *.* TO '{self.user}'@'%';\n"
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
