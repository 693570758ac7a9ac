"""An imported operation with a ``multipart/form-data`` body uploads a file an earlier
step made: a CSV file over the large-value threshold (stored by reference in the run)
reaches the operation whole and arrives at a local server as one file part."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from backend.runtime import Runtime
from tests.diagrams import diagram, edge, node
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, run_detail, start_manual, steps_by_id
from tests.openapi_server import ScriptedApi
from tests.unit.openapi.multipart_parts import parts

pytestmark = pytest.mark.integration

MARKER = "$railyard.payload"

DOCUMENT = """
openapi: 3.0.3
info: {title: Archive, version: "1"}
servers: [{url: "SERVER"}]
paths:
  /files:
    post:
      operationId: uploadFile
      summary: Upload a file
      requestBody:
        required: true
        content:
          multipart/form-data:
            schema:
              type: object
              required: [file]
              properties:
                file: {type: string, format: binary}
                folder: {type: string}
      responses:
        "201":
          description: stored
          content:
            application/json:
              schema: {type: object, properties: {id: {type: string}, bytes: {type: integer}}}
"""


@pytest.fixture
def api() -> Iterator[ScriptedApi]:
    server = ScriptedApi(answer=lambda call, url: (201, {"id": "f1", "bytes": 0}, {})).start()
    yield server
    server.stop()


async def test_a_large_file_from_an_earlier_step_is_uploaded_whole(
    client: httpx.AsyncClient, runtime: Runtime, worker: Any, api: ScriptedApi
) -> None:
    r = await client.post(
        "/api/admin/connectors",
        json={"name": "archive", "document": DOCUMENT.replace("SERVER", api.url)},
    )
    assert r.status_code == 201, r.text
    wf = await publish(
        client,
        diagram(
            [
                node("start", "trigger.manual"),
                node("export", "files.csv_write", items="=$trigger.rows", filename="rows.csv"),
                node("upload", "archive.upload_file", file="=$steps.export", folder="exports"),
            ],
            [edge("start", "export"), edge("export", "upload")],
        ),
    )
    rows = [{"id": i, "name": f"row {i}", "note": "n" * 120} for i in range(3000)]
    run_id = await start_manual(client, wf, {"rows": rows})
    status = await wait_for_run(runtime, run_id, timeout=60)
    detail = await run_detail(client, run_id)
    assert status == "succeeded", detail["error"]
    steps = steps_by_id(detail)
    exported = steps["export"]["output"]
    assert MARKER in exported["base64"]  # a large value: stored once, by reference
    assert steps["upload"]["output"] == {"id": "f1", "bytes": 0}
    (call,) = api.calls
    (name, filename, media, data), folder = parts(call)
    assert (name, filename, media, len(data)) == ("file", "rows.csv", "text/csv", exported["size"])
    assert list(csv.DictReader(io.StringIO(data.decode()))) == [
        {k: str(v) for k, v in row.items()} for row in rows
    ]
    assert folder == ("folder", None, "text/plain", b"exports")
