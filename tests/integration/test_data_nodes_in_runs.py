"""The database and file nodes in a published workflow run by the worker: a webhook's
rows are upserted into PostgreSQL, read back, written as a CSV file large enough to be
stored by reference, and read again; the credential comes from the credential store."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from backend.embedded import EmbeddedPostgres
from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, run_detail, steps_by_id

pytestmark = pytest.mark.integration

DB = "workflow_data"
MARKER = "$railyard.payload"


@pytest.fixture(scope="module")
def data_db(pg_server: EmbeddedPostgres) -> Iterator[EmbeddedPostgres]:
    pg_server.drop_database(DB)
    pg_server.create_database(DB)
    pg_server.psql("CREATE TABLE people (id int PRIMARY KEY, name text, note text)", database=DB)
    yield pg_server
    pg_server.drop_database(DB)


def pipeline(credential: str) -> dict[str, Any]:
    return diagram(
        [
            node("hook", "trigger.webhook"),
            node(
                "save",
                "postgres.upsert",
                credential=credential,
                table="people",
                key_columns=["id"],
                items="=$trigger.body.people",
            ),
            node(
                "load",
                "postgres.query",
                credential=credential,
                query="SELECT id, name, note FROM people WHERE id >= $1 ORDER BY id",
                parameters=[0],
            ),
            node("csv", "files.csv_write", items="=$steps.load.items", filename="people.csv"),
            node("read", "files.csv_read", file="=$steps.csv"),
        ],
        [edge("hook", "save"), edge("save", "load"), edge("load", "csv"), edge("csv", "read")],
    )


async def test_rows_go_through_postgres_into_a_large_csv_file(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, data_db: EmbeddedPostgres
) -> None:
    login = {
        "host": "127.0.0.1",
        "port": data_db.port,
        "database": DB,
        "username": data_db.user,
        "tls": "disable",
    }
    r = await client.post(
        "/api/credentials", json={"name": "db", "type": "postgres", "data": login}
    )
    assert r.status_code == 201, r.text
    wf = await publish(client, pipeline(r.json()["id"]))
    people = [{"id": i, "name": f"person {i}", "note": "n" * 120} for i in range(3000)]
    r = await client.post(wf["webhook_path"], json={"people": people})
    assert r.status_code == 202, r.text
    run_id = str(r.json()["run_id"])
    status = await wait_for_run(runtime, run_id, timeout=60)
    detail = await run_detail(client, run_id)
    assert status == "succeeded", detail["error"]
    steps = steps_by_id(detail)
    assert steps["save"]["output"]["count"] == 3000
    assert steps["read"]["output"]["count"] == 3000
    assert steps["read"]["output"]["columns"] == ["id", "name", "note"]
    # the file (over 256 KiB of base64) is stored once, by reference, with a preview
    file_out = steps["csv"]["output"]
    assert file_out["filename"] == "people.csv" and file_out["size"] > 300_000
    assert MARKER in file_out["base64"] and file_out["base64"]["download_url"]
    async with runtime.engine.connect() as conn:
        stored = (await conn.execute(text("select count(*) from payloads"))).scalar_one()
    assert stored >= 1
    conn_count = data_db.psql("SELECT count(*) FROM people", database=DB)
    assert "3000" in conn_count
