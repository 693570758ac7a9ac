"""``railyard create-user``: password from stdin (never argv), against DATABASE_URL or the
``railyard dev`` data directory (its embedded PostgreSQL started when not running)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import asyncpg
import pytest

from backend.embedded import EmbeddedPostgres
from tests.servers import _new_pg_data_dir

pytestmark = pytest.mark.integration

PASSWORD = "orchard tram ticket 19"


def _cli(
    *args: str, stdin: str = "", env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "DATABASE_URL" and k != "REDIS_URL"}
    return subprocess.run(
        [sys.executable, "-m", "backend.cli", "create-user", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        timeout=120,
        check=False,
    )


async def _role_of(dsn: str, email: str) -> str | None:
    conn = await asyncpg.connect(dsn)
    try:
        return await conn.fetchval("select role from users where email = $1", email)  # type: ignore[no-any-return]
    finally:
        await conn.close()


async def test_create_user_with_password_stdin_and_database_url(
    migrated_url: str, pg_server: EmbeddedPostgres
) -> None:
    done = _cli(
        "cli-viewer@example.com",
        "--role",
        "viewer",
        "--password-stdin",
        stdin=PASSWORD + "\n",
        env={"DATABASE_URL": migrated_url},
    )
    assert done.returncode == 0, done.stderr
    assert "created viewer account cli-viewer@example.com" in done.stdout
    assert "in DATABASE_URL" in done.stdout
    assert PASSWORD not in done.stdout + done.stderr
    assert await _role_of(pg_server.dsn, "cli-viewer@example.com") == "viewer"
    again = _cli(
        "cli-viewer@example.com",
        "--password-stdin",
        stdin=PASSWORD + "\n",
        env={"DATABASE_URL": migrated_url},
    )
    assert again.returncode == 1 and "an account with this email exists" in again.stderr


def test_password_is_never_taken_from_argv() -> None:
    done = _cli("someone@example.com", PASSWORD)
    assert done.returncode == 2 and "unrecognized arguments" in done.stderr


def test_weak_password_and_missing_terminal_create_nothing(tmp_path: Path) -> None:
    weak = _cli(
        "weak@example.com",
        "--password-stdin",
        stdin="password123\n",
        env={"DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"},
    )
    # the policy is checked before any connection: the bad URL is never used
    assert weak.returncode == 1, weak.stderr
    assert "at least 12 characters" in weak.stderr
    no_tty = _cli("tty@example.com", "--data-dir", str(tmp_path), stdin="")
    assert no_tty.returncode == 2 and "--password-stdin" in no_tty.stderr


async def test_create_user_in_the_dev_data_directory(embedded_tmp_dir: Path) -> None:
    _new_pg_data_dir(embedded_tmp_dir / "postgres")
    # not running: the command starts the dev PostgreSQL, migrates, creates, stops it
    first = _cli(
        "dev-editor@example.com",
        "--password-stdin",
        "--data-dir",
        str(embedded_tmp_dir),
        stdin=PASSWORD + "\n",
    )
    assert first.returncode == 0, first.stderr
    assert "created editor account dev-editor@example.com" in first.stdout
    assert f"railyard dev data directory {embedded_tmp_dir}" in first.stdout
    pg = EmbeddedPostgres(embedded_tmp_dir / "postgres", fast=True)
    pg.start()
    try:
        assert pg.owned, "the command must stop the server it started"
        assert await _role_of(pg.dsn, "dev-editor@example.com") == "editor"
        # running (as under `railyard dev`): the command connects and leaves it running
        second = _cli(
            "dev-admin@example.com",
            "--role",
            "admin",
            "--password-stdin",
            "--data-dir",
            str(embedded_tmp_dir),
            stdin=PASSWORD + "\n",
        )
        assert second.returncode == 0, second.stderr
        assert await _role_of(pg.dsn, "dev-admin@example.com") == "admin"
    finally:
        pg.stop()


def test_missing_data_directory_is_explained(tmp_path: Path) -> None:
    done = _cli(
        "x@example.com",
        "--password-stdin",
        "--data-dir",
        str(tmp_path / "nope"),
        stdin=PASSWORD + "\n",
    )
    assert done.returncode == 2
    assert "no Railyard data directory" in done.stderr and "railyard dev" in done.stderr


def test_unstorable_email_is_one_line_naming_the_field() -> None:
    """Invalid UTF-8 in argv (a lone surrogate once decoded) or a NUL: one line, exit 2,
    before any database is reached (the URL below leads nowhere)."""
    nowhere = {"DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none"}
    for email, field, character in (
        (os.fsdecode(b"ed\xed\xa0\x80@example.com"), "email", "U+DCED (a lone surrogate)"),
        ("x@example.com", "password", "U+0000 (NUL)"),
    ):
        stdin = ("amber\x00signal lamp at dusk" if field == "password" else PASSWORD) + "\n"
        done = _cli(email, "--password-stdin", stdin=stdin, env=nowhere)
        assert done.returncode == 2, done.stderr
        assert done.stderr.splitlines() == [
            f"railyard: no account created: {field}: the value contains {character},"
            " which cannot be stored"
        ], done.stderr


async def test_sign_in_url_is_the_dev_servers(embedded_tmp_dir: Path) -> None:
    """The dev server records its URL (its --port) in the data directory; create-user
    prints that, RAILYARD_BASE_URL when set, else the default marked as such."""
    _new_pg_data_dir(embedded_tmp_dir / "postgres")
    (embedded_tmp_dir / "base-url.txt").write_text("http://127.0.0.1:8123\n")
    dev = ("--password-stdin", "--data-dir", str(embedded_tmp_dir))
    done = _cli("port@example.com", *dev, stdin=PASSWORD + "\n")
    assert done.returncode == 0, done.stderr
    assert "sign in at http://127.0.0.1:8123/login" in done.stdout, done.stdout
    env = {"RAILYARD_BASE_URL": "https://railyard.example.org"}
    done = _cli("base@example.com", *dev, stdin=PASSWORD + "\n", env=env)
    assert "sign in at https://railyard.example.org/login" in done.stdout, done.stdout
    (embedded_tmp_dir / "base-url.txt").unlink()
    done = _cli("default@example.com", *dev, stdin=PASSWORD + "\n")
    assert "http://127.0.0.1:8000/login (the default RAILYARD_BASE_URL)" in done.stdout
