"""The embedded PostgreSQL and Redis servers (backend/embedded/) against the real binaries."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import asyncpg
import pytest
import redis

from backend.embedded import (
    EmbeddedPostgres,
    EmbeddedRedis,
    EmbeddedServerError,
    free_port,
    port_is_free,
)
from tests.servers import *  # noqa: F403  (fixtures; tests/conftest.py may import them too)

pytestmark = pytest.mark.integration


@contextmanager
def occupied_port(port: int | None = None) -> Iterator[int]:
    """Listen on 127.0.0.1:<port> (a free one when None) for the duration of the block."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # ignore TIME_WAIT leftovers
        sock.bind(("127.0.0.1", port or 0))
        sock.listen(1)
        yield sock.getsockname()[1]


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


# -- PostgreSQL -------------------------------------------------------------------------------


async def test_postgres_accepts_asyncpg_connections(pg_server: EmbeddedPostgres) -> None:
    assert pg_server.url.startswith("postgresql+asyncpg://railyard@127.0.0.1:")
    assert pg_server.url.endswith("/railyard")
    conn = await asyncpg.connect(pg_server.dsn)
    try:
        version = await conn.fetchval("SELECT version()")
        assert version.startswith("PostgreSQL ")
        assert await conn.fetchval("SHOW listen_addresses") == "127.0.0.1"
        assert await conn.fetchval("SHOW fsync") == "off"  # fast=True in tests
        assert await conn.fetchval("SHOW max_connections") == "200"
        assert await conn.fetchval("SELECT current_database()") == "railyard"
        assert await conn.fetchval("SHOW server_encoding") == "UTF8"
    finally:
        await conn.close()


def test_postgres_database_helpers(pg_server: EmbeddedPostgres) -> None:
    name = "railyard_helper_check"
    pg_server.drop_database(name)
    pg_server.create_database(name)
    pg_server.create_database(name)  # exist_ok
    assert pg_server.database_exists(name)
    assert pg_server.psql("SELECT current_database()", database=name).strip() == name
    assert pg_server.url_for(name).endswith(f"/{name}")
    pg_server.drop_database(name)
    assert not pg_server.database_exists(name)
    with pytest.raises(ValueError, match="invalid database name"):
        pg_server.create_database('x"; DROP DATABASE railyard; --')


def test_postgres_reuses_a_live_server(pg_server: EmbeddedPostgres) -> None:
    other = EmbeddedPostgres(pg_server.data_dir, fast=True)
    other.start()
    assert other.port == pg_server.port
    assert not other.owned
    other.stop()  # a reused server is left running
    assert pg_server.psql("SELECT 1").strip() == "1"
    with pytest.raises(EmbeddedServerError, match="already runs"):
        EmbeddedPostgres(pg_server.data_dir, port=free_port()).start()


def test_postgres_data_persists_across_restarts(embedded_tmp_dir: Path) -> None:
    data_dir = embedded_tmp_dir / "pg"
    pg = EmbeddedPostgres(data_dir, fast=True)
    pg.start()
    try:
        assert pg.owned
        pg.psql("CREATE TABLE kept (v text); INSERT INTO kept VALUES ('still here')")
        first_port = pg.port
        pg.stop()
        assert not pg.running
        assert port_is_free(first_port)

        # A stale postmaster.pid (dead server) must not block the next start ...
        (data_dir / "postmaster.pid").write_text(f"{dead_pid()}\n{data_dir}\n")
        # ... and a remembered port now taken by someone else moves the server elsewhere.
        with occupied_port(first_port):
            pg.start()
            assert pg.port != first_port
            assert pg.psql("SELECT v FROM kept").strip() == "still here"
            pg.stop()

        # Start failures raise with the tail of postgres.log.
        broken = EmbeddedPostgres(data_dir, max_connections=-5)
        with pytest.raises(EmbeddedServerError, match="max_connections") as excinfo:
            broken.start()
        assert "postgres.log" in str(excinfo.value)
    finally:
        pg.stop()


def test_postgres_explicit_port_in_use_errors(embedded_tmp_dir: Path) -> None:
    with occupied_port() as port:
        pg = EmbeddedPostgres(embedded_tmp_dir / "pg", port=port, fast=True)
        with pytest.raises(EmbeddedServerError, match=f"port {port} .* already in use"):
            pg.start()
    assert not pg.running


def test_postgres_initdb_failure_is_clear(embedded_tmp_dir: Path) -> None:
    data_dir = embedded_tmp_dir / "pg"
    data_dir.mkdir()
    (data_dir / "stray.txt").write_text("not a data directory")
    with pytest.raises(EmbeddedServerError, match="initdb"):
        EmbeddedPostgres(data_dir, fast=True).start()


# -- Redis ------------------------------------------------------------------------------------


def test_redis_ping_set_get(redis_server: EmbeddedRedis) -> None:
    assert redis_server.url == f"redis://127.0.0.1:{redis_server.port}/0"
    client = redis.Redis.from_url(redis_server.url)
    try:
        assert client.ping()
        client.set("railyard:embedded", "ok")
        assert client.get("railyard:embedded") == b"ok"
        assert client.config_get("appendonly")["appendonly"] == "no"
        assert client.config_get("save")["save"] == ""
    finally:
        client.close()


async def test_redis_async_client(redis_server: EmbeddedRedis) -> None:
    client = redis.asyncio.Redis.from_url(redis_server.url)
    try:
        assert await client.ping()
    finally:
        await client.aclose()


def test_redis_aof_persists_across_restarts(embedded_tmp_dir: Path) -> None:
    data_dir = embedded_tmp_dir / "redis"
    server = EmbeddedRedis(data_dir)  # dev mode: append-only file on
    server.start()
    try:
        client = redis.Redis.from_url(server.url)
        client.set("kept", "yes")
        client.close()
        first_port = server.port
        server.stop()
        assert port_is_free(first_port)

        with occupied_port(first_port):  # remembered port taken: another one is picked
            server.start()
            assert server.port != first_port
            client = redis.Redis.from_url(server.url)
            assert client.get("kept") == b"yes"
            client.close()
    finally:
        server.stop()


def test_redis_explicit_port_in_use_errors(embedded_tmp_dir: Path) -> None:
    with occupied_port() as port:
        server = EmbeddedRedis(embedded_tmp_dir / "redis", port=port, persistence_off=True)
        with pytest.raises(EmbeddedServerError, match=f"port {port} .* already in use"):
            server.start()
    assert not server.running
