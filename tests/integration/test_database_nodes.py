"""PostgreSQL and MySQL/MariaDB nodes against real servers: the session's embedded
PostgreSQL and a private MariaDB (tests/database_servers.py)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from backend.embedded import EmbeddedPostgres
from connectors import sdk
from connectors.builtin.databases import mysql, postgres
from connectors.testing import ActionTestEnvironment
from tests.database_servers import MariaDBServer, TlsPostgres
from tests.fakes.smtp import free_port
from tests.unit.connectors.output_schema import assert_declared_output

DB = "database_nodes"


@pytest.fixture(scope="module")
def pg_database(pg_server: EmbeddedPostgres) -> Iterator[str]:
    pg_server.create_database(DB)
    yield pg_server.dsn_for(DB)
    pg_server.drop_database(DB)


def _pg_env(pg_server: EmbeddedPostgres, **login: Any) -> ActionTestEnvironment:
    fields = {
        "host": "127.0.0.1",
        "port": pg_server.port,
        "database": DB,
        "username": pg_server.user,
        "tls": "disable",
        **login,
    }
    return ActionTestEnvironment(
        credentials={"pg": {"type": "postgres", **fields}},
        credential_types=[postgres.POSTGRES],
    )


async def _pg(env: ActionTestEnvironment, action: sdk.ActionDefinition, **config: Any) -> Any:
    out = await env.run(action, {"credential": "pg", **config}, None)
    assert_declared_output(action, out)
    return out


@pytest.fixture
async def pg_table(pg_server: EmbeddedPostgres, pg_database: str) -> str:
    table = f"people_{uuid.uuid4().hex[:8]}"
    script = (
        f'CREATE TABLE "{table}" (id int PRIMARY KEY, name text NOT NULL, born date, '
        f"score numeric(6,2), tags jsonb, seen timestamptz, ref uuid); "
        f"COMMENT ON TABLE \"{table}\" IS 'test'"
    )
    out = await _pg(_pg_env(pg_server), postgres.query, query=script)
    assert out == {"items": [], "count": 0}
    return table


async def test_postgres_query_with_parameters_converts_json_values(
    pg_server: EmbeddedPostgres, pg_table: str
) -> None:
    env = _pg_env(pg_server)
    ref = str(uuid.uuid4())
    out = await _pg(
        env,
        postgres.query,
        query=f'INSERT INTO "{pg_table}" VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *',
        parameters=["7", "Ada", "1815-12-10", 12.5, {"a": [1, 2]}, "2024-03-01T10:00:00Z", ref],
    )
    assert out["count"] == 1
    assert out["items"] == [
        {
            "id": 7,
            "name": "Ada",
            "born": "1815-12-10",
            "score": "12.50",
            "tags": {"a": [1, 2]},
            "seen": "2024-03-01T10:00:00+00:00",
            "ref": ref,
        }
    ]
    rows = await _pg(
        env,
        postgres.query,
        query=f'SELECT id, name FROM "{pg_table}" WHERE born < $1 AND name = $2',
        parameters=["1900-01-01", "Ada"],
    )
    assert rows == {"items": [{"id": 7, "name": "Ada"}], "count": 1}


async def test_postgres_values_are_parameters_and_identifiers_are_quoted(
    pg_server: EmbeddedPostgres, pg_table: str
) -> None:
    env = _pg_env(pg_server)
    hostile = "x'); DROP TABLE people; --"
    await _pg(env, postgres.insert, table=pg_table, items=[{"id": 1, "name": hostile}])
    rows = await _pg(env, postgres.query, query=f'SELECT name FROM "{pg_table}"')
    assert rows["items"] == [{"name": hostile}]
    with pytest.raises(sdk.NonRetryableError) as err:
        await _pg(env, postgres.insert, table=f'{pg_table}" (id) VALUES (9); --', items=[{"id": 2}])
    assert err.value.kind == "sql_syntax" and "does not exist" in err.value.message


async def test_postgres_insert_update_upsert_return_the_rows(
    pg_server: EmbeddedPostgres, pg_table: str
) -> None:
    env = _pg_env(pg_server)
    rows = [{"id": 1, "name": "Ada"}, {"id": 2, "name": "Grace", "born": "1906-12-09"}]
    out = await _pg(env, postgres.insert, table=pg_table, schema="public", items=rows)
    assert out["count"] == 2 and [r["name"] for r in out["items"]] == ["Ada", "Grace"]
    assert out["items"][0]["born"] is None
    out = await _pg(
        env, postgres.update, table=pg_table, key_columns=["id"], items=[{"id": 2, "name": "G."}]
    )
    assert out["count"] == 1 and out["items"][0]["name"] == "G."
    out = await _pg(
        env,
        postgres.upsert,
        table=pg_table,
        key_columns=["id"],
        items=[{"id": 2, "name": "Grace H."}, {"id": 3, "name": "Barbara"}],
    )
    assert out["count"] == 2
    listed = await _pg(env, postgres.query, query=f'SELECT id, name FROM "{pg_table}" ORDER BY id')
    assert [r["name"] for r in listed["items"]] == ["Ada", "Grace H.", "Barbara"]
    # the step input's items are the default rows
    out = await env.run(
        postgres.insert,
        {"credential": "pg", "table": pg_table},
        {"items": [{"id": 4, "name": "D"}]},
    )
    assert out["count"] == 1


async def test_postgres_transaction_rolls_back_every_statement(
    pg_server: EmbeddedPostgres, pg_table: str
) -> None:
    env = _pg_env(pg_server)
    rows = [{"id": 1, "name": "Ada"}, {"id": 1, "name": "duplicate"}]
    with pytest.raises(sdk.NonRetryableError) as err:
        await _pg(env, postgres.insert, table=pg_table, items=rows)
    assert err.value.kind == "sql_constraint" and err.value.details["sqlstate"] == "23505"
    count = await _pg(env, postgres.query, query=f'SELECT count(*) AS n FROM "{pg_table}"')
    assert count["items"] == [{"n": 0}]
    with pytest.raises(sdk.NonRetryableError):
        await _pg(env, postgres.insert, table=pg_table, items=rows, transaction=False)
    count = await _pg(env, postgres.query, query=f'SELECT count(*) AS n FROM "{pg_table}"')
    assert count["items"] == [{"n": 1}]
    out = await _pg(
        env,
        postgres.query,
        query=f'UPDATE "{pg_table}" SET name = $1 WHERE id = $2',
        parameter_sets=[["A", 1], ["B", 99]],
    )
    assert out == {"items": [], "count": 1}


async def test_postgres_bad_input_is_a_clear_step_error(
    pg_server: EmbeddedPostgres, pg_table: str
) -> None:
    env = _pg_env(pg_server)
    with pytest.raises(sdk.NonRetryableError) as err:
        await _pg(env, postgres.query, query="SELEC 1")
    assert err.value.kind == "sql_syntax" and "SQLSTATE 42601" in err.value.message
    assert err.value.details["position"] == "1"
    with pytest.raises(sdk.NonRetryableError) as err:
        await _pg(
            env,
            postgres.query,
            query=f'SELECT * FROM "{pg_table}" WHERE born = $1',
            parameters=["soon"],
        )
    assert err.value.kind == "sql_parameters" and "$1" in err.value.message
    assert "date" in err.value.message
    with pytest.raises(sdk.NonRetryableError) as err:
        await _pg(env, postgres.query, query="SELECT $1::int", parameters=[])
    assert err.value.kind == "sql_parameters" and "1 placeholder" in err.value.message
    for transaction in (True, False):  # read through a cursor: 6 rows at most
        with pytest.raises(sdk.NonRetryableError) as err:
            await _pg(
                env,
                postgres.query,
                query="SELECT generate_series(1, 10000000)",
                max_rows=5,
                transaction=transaction,
            )
        assert err.value.kind == "too_many_rows"
    out = await _pg(env, postgres.query, query="SELECT generate_series(1, 5) AS n", max_rows=5)
    assert out["count"] == 5
    with pytest.raises(sdk.ActionError) as err:
        await _pg(env, postgres.query, query="SELECT pg_sleep(10)", timeout=0.5)
    assert err.value.kind == "db_timeout" and err.value.retryable
    with pytest.raises(sdk.ConfigError):
        await _pg(env, postgres.update, table=pg_table, items=[{"id": 1, "name": "x"}])


async def test_postgres_connection_problems(pg_server: EmbeddedPostgres, pg_database: str) -> None:
    with pytest.raises(sdk.ActionError) as err:
        await _pg(_pg_env(pg_server, port=free_port()), postgres.query, query="SELECT 1")
    assert err.value.kind == "db_connect" and err.value.retryable
    with pytest.raises(sdk.NonRetryableError) as err:
        await _pg(_pg_env(pg_server, username="nobody"), postgres.query, query="SELECT 1")
    assert err.value.kind == "sql_auth" and '"nobody"' in err.value.message
    with pytest.raises(sdk.NonRetryableError) as err:
        await _pg(_pg_env(pg_server, tls="require"), postgres.query, query="SELECT 1")
    assert err.value.kind == "db_tls"
    guarded = _pg_env(pg_server)
    guarded.ssrf = sdk.SsrfPolicy()
    with pytest.raises(sdk.NonRetryableError) as err:
        await _pg(guarded, postgres.query, query="SELECT 1")
    assert err.value.kind == "ssrf_blocked"


async def test_postgres_tls_modes(tls_postgres: TlsPostgres) -> None:
    ca = tls_postgres.ca_file.read_text()
    fields = {
        "host": "127.0.0.1",
        "port": tls_postgres.port,
        "database": "postgres",
        "username": tls_postgres.user,
    }
    query = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"

    def env(**login: Any) -> ActionTestEnvironment:
        return ActionTestEnvironment(
            credentials={"pg": {"type": "postgres", **fields, **login}},
            credential_types=[postgres.POSTGRES],
        )

    for login in ({"tls": "verify-full", "ca_certificate": ca}, {"tls": "require"}):
        out = await _pg(env(**login), postgres.query, query=query)
        assert out["items"] == [{"ssl": True}], login
    plain = await _pg(env(tls="disable"), postgres.query, query=query)
    assert plain["items"] == [{"ssl": False}]
    with pytest.raises(sdk.NonRetryableError) as err:  # the system's CAs do not know it
        await _pg(env(tls="verify-full"), postgres.query, query=query)
    assert err.value.kind == "db_tls" and "certificate verify failed" in err.value.message
    with pytest.raises(sdk.ConfigError):
        await _pg(
            env(tls="verify-ca", ca_certificate="not a certificate"), postgres.query, query=query
        )


# -- MySQL / MariaDB -------------------------------------------------------------------


def _my_env(server: MariaDBServer, **login: Any) -> ActionTestEnvironment:
    fields = {
        "host": "127.0.0.1",
        "port": server.port,
        "database": server.database,
        "username": server.user,
        "password": server.password,
        "tls": "disable",
        **login,
    }
    return ActionTestEnvironment(
        credentials={"my": {"type": "mysql", **fields}}, credential_types=[mysql.MYSQL]
    )


async def _my(env: ActionTestEnvironment, action: sdk.ActionDefinition, **config: Any) -> Any:
    out = await env.run(action, {"credential": "my", **config}, None)
    assert_declared_output(action, out)
    return out


@pytest.fixture
async def my_table(mariadb_server: MariaDBServer) -> str:
    table = f"people_{uuid.uuid4().hex[:8]}"
    await _my(
        _my_env(mariadb_server),
        mysql.query,
        query=f"CREATE TABLE `{table}` (id int PRIMARY KEY AUTO_INCREMENT, name varchar(50) "
        "NOT NULL UNIQUE, born date, score decimal(6,2), meta json)",
    )
    return table


async def test_mysql_query_insert_update_upsert(
    mariadb_server: MariaDBServer, my_table: str
) -> None:
    env = _my_env(mariadb_server)
    out = await _my(
        env,
        mysql.insert,
        table=my_table,
        items=[
            {"name": "Ada", "born": "1815-12-10", "score": 1.5, "meta": {"k": [1]}},
            {"name": "Grace"},
        ],
    )
    assert out == {"items": [{"insert_id": 1}, {"insert_id": 2}], "count": 2}
    out = await _my(
        env, mysql.update, table=my_table, key_columns=["id"], items=[{"id": 2, "score": "9.25"}]
    )
    assert out["count"] == 1
    out = await _my(
        env, mysql.upsert, table=my_table, key_columns=["name"], items=[{"name": "Ada", "score": 3}]
    )
    assert out["count"] == 2  # MySQL counts an updated row twice
    rows = await _my(
        env,
        mysql.query,
        query=f"SELECT id, name, born, score, meta FROM `{my_table}` "
        "WHERE name LIKE %s ORDER BY id",
        parameters=["%a%"],
    )
    assert rows["items"] == [
        {"id": 1, "name": "Ada", "born": "1815-12-10", "score": "3.00", "meta": '{"k": [1]}'},
        {"id": 2, "name": "Grace", "born": None, "score": "9.25", "meta": None},
    ]


async def test_mysql_transaction_and_bad_input(
    mariadb_server: MariaDBServer, my_table: str
) -> None:
    env = _my_env(mariadb_server)
    rows = [{"name": "Ada"}, {"name": "Ada"}]
    with pytest.raises(sdk.NonRetryableError) as err:
        await _my(env, mysql.insert, table=my_table, items=rows)
    assert err.value.kind == "sql_constraint" and err.value.details["code"] == 1062
    count = await _my(env, mysql.query, query=f"SELECT count(*) AS n FROM `{my_table}`")
    assert count["items"] == [{"n": 0}]
    with pytest.raises(sdk.NonRetryableError):
        await _my(env, mysql.insert, table=my_table, items=rows, transaction=False)
    count = await _my(env, mysql.query, query=f"SELECT count(*) AS n FROM `{my_table}`")
    assert count["items"] == [{"n": 1}]
    with pytest.raises(sdk.NonRetryableError) as err:
        await _my(env, mysql.query, query="SELEC 1")
    assert err.value.kind == "sql_syntax" and "1064" in err.value.message
    with pytest.raises(sdk.NonRetryableError) as err:
        await _my(env, mysql.query, query="SELECT %s, %s", parameters=[1])
    assert err.value.kind == "sql_parameters"
    hostile = "x'); DROP TABLE t; --"
    out = await _my(env, mysql.query, query="SELECT %s AS v", parameters=[hostile])
    assert out["items"] == [{"v": hostile}]
    with pytest.raises(sdk.NonRetryableError) as err:
        await _my(
            env,
            mysql.query,
            query="SELECT seq FROM seq_1_to_1000000",  # MariaDB's sequence engine
            max_rows=5,
        )
    assert err.value.kind == "too_many_rows"
    with pytest.raises(sdk.ActionError) as err:
        await _my(env, mysql.query, query="SELECT SLEEP(10)", timeout=0.5)
    assert err.value.kind == "db_timeout" and err.value.retryable


async def test_mysql_login_tls_and_unreachable(mariadb_server: MariaDBServer) -> None:
    with pytest.raises(sdk.NonRetryableError) as err:
        await _my(_my_env(mariadb_server, password="wrong"), mysql.query, query="SELECT 1")
    assert err.value.kind == "sql_auth" and err.value.details["code"] == 1045
    with pytest.raises(sdk.ActionError) as err:
        await _my(_my_env(mariadb_server, port=free_port()), mysql.query, query="SELECT 1")
    assert err.value.kind == "db_connect" and err.value.retryable
    ca = mariadb_server.ca_file.read_text()
    verified = _my_env(mariadb_server, tls="verify-full", ca_certificate=ca)
    out = await _my(verified, mysql.query, query="SHOW SESSION STATUS LIKE 'Ssl_version'")
    assert out["items"][0]["Value"].startswith("TLS")
    other_ca = mariadb_server.key_file.parent / "other"
    other_ca.mkdir(exist_ok=True)
    from tests.fakes.smtp import self_signed_files

    wrong = self_signed_files(other_ca)[0].read_text()
    with pytest.raises(sdk.NonRetryableError) as err:
        await _my(
            _my_env(mariadb_server, tls="verify-full", ca_certificate=wrong),
            mysql.query,
            query="SELECT 1",
        )
    assert err.value.kind == "db_tls"
