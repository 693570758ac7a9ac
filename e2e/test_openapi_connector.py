"""OpenAPI connectors in Chromium: an admin imports a document on /admin/connectors; an
editor builds a workflow with one of its operations, ticks "Fetch all pages", picks a
response field in the next step from the field picker, publishes, and the run collects
every page from a local API answering as the document says; a Code step turns the items
into rows, which the run writes to a table of the server's embedded PostgreSQL and to a
CSV file."""

from __future__ import annotations

import asyncio
import base64
import csv
import io
import json
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import asyncpg
import pytest

from backend.embedded.processes import PORT_FILE, read_port_file
from e2e.api_client import api_client
from e2e.conftest import RailyardServer, login
from e2e.designer_page import new_workflow, open_node, publish, save_draft
from tests.openapi_server import Call, ScriptedApi

pytestmark = pytest.mark.e2e

EDITOR = ("openapi-editor@example.com", "editor-pass-8c1e2f")

DOCUMENT = """
openapi: 3.1.0
info: {title: Inventory, version: "1"}
servers: [{url: "SERVER"}]
paths:
  /items:
    get:
      operationId: listItems
      summary: List items
      parameters:
        - {name: cursor, in: query, schema: {type: string}}
        - {name: limit, in: query, schema: {type: integer, default: 2}}
      responses:
        "200":
          description: one page
          content:
            application/json:
              schema:
                type: object
                properties:
                  items:
                    type: array
                    items:
                      type: object
                      properties: {sku: {type: string}, stock: {type: integer}}
                  next_cursor: {type: [string, "null"]}
"""


CODE = """\
console.log("skus:", input.skus.length);
return data.map((item, n) => ({sku: item.sku, stock: item.stock, position: n + 1,
                               restock: item.stock < 1}));
"""
"""The Code step after the report: every page's items (its Data field) as table rows."""

TABLE = "stock_rows"


def _embedded_postgres(server: RailyardServer) -> int:
    """The port of the embedded PostgreSQL ``railyard dev`` runs in its data directory."""
    port = read_port_file(server.data_dir / "postgres" / PORT_FILE)
    assert port is not None, "railyard dev wrote no PostgreSQL port file"
    return port


def _sql(port: int, statement: str) -> list[dict[str, Any]]:
    async def go() -> list[dict[str, Any]]:
        conn = await asyncpg.connect(
            host="127.0.0.1", port=port, user="railyard", database="railyard"
        )
        try:
            return [dict(r) for r in await conn.fetch(statement)]
        finally:
            await conn.close()

    # Playwright's sync API runs an event loop in this thread: asyncpg gets its own
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, go()).result()


def answer(call: Call, url: str) -> tuple[int, Any, dict[str, str]]:
    page = int(dict(call.query).get("cursor") or 0)
    items = [{"sku": f"sku-{page * 2 + i}", "stock": i} for i in range(2)]
    return 200, {"items": items, "next_cursor": str(page + 1) if page < 2 else None}, {}


@pytest.fixture
def inventory() -> Iterator[ScriptedApi]:
    server = ScriptedApi(answer=answer).start()
    yield server
    server.stop()


def test_import_and_fetch_all_pages(
    page: Any, railyard_server: RailyardServer, inventory: ScriptedApi
) -> None:
    server = railyard_server
    # ------------------------------------------------ the admin imports the document
    login(page, server)
    page.goto(f"{server.base_url}/admin/connectors")
    page.fill('#import-form input[name="name"]', "inventory")
    page.set_input_files(
        '#import-form input[name="file"]',
        files=[
            {
                "name": "inventory.yaml",
                "mimeType": "application/yaml",
                "buffer": DOCUMENT.replace("SERVER", inventory.url).encode(),
            }
        ],
    )
    page.click("#import-button")
    summary = page.locator("#import-summary")
    summary.wait_for()
    assert "Stored as version 1." in summary.inner_text()
    assert "1 operations imported, 0 refused." in summary.inner_text()
    page.click("#import-result a")
    page.locator('tr[data-node-type="inventory.list_items"]').wait_for()

    admin = api_client(server)
    pg_port = _embedded_postgres(server)
    _sql(
        pg_port,
        f"CREATE TABLE {TABLE} "
        "(sku text PRIMARY KEY, stock int NOT NULL, position int NOT NULL, restock boolean)",
    )
    r = admin.post(
        "/api/v1/admin/users", json={"email": EDITOR[0], "password": EDITOR[1], "role": "editor"}
    )
    assert r.status_code == 201, r.text

    # ------------------------------------------------ an editor builds the workflow
    page.context.clear_cookies()
    login(page, server, *EDITOR)
    workflow_id = new_workflow(page, server, "Stock report")
    item = page.locator('.palette-item[data-type="inventory.list_items"]')
    item.scroll_into_view_if_needed()
    assert "List items" in item.inner_text()
    diagram = {
        "nodes": [
            {
                "id": "start",
                "type": "trigger.manual",
                "label": "Start",
                "position": {"x": 60, "y": 120},
            },
            {
                "id": "list",
                "type": "inventory.list_items",
                "label": "Items",
                "position": {"x": 360, "y": 120},
            },
            {
                "id": "report",
                "type": "control.set",
                "label": "Report",
                "position": {"x": 660, "y": 120},
                "config": {"mapping": {}},
            },
            {
                "id": "stock",
                "type": "code.javascript",
                "label": "Stock",
                "position": {"x": 960, "y": 120},
                "config": {"code": CODE, "data": "=$steps.list.items"},
            },
            {
                "id": "save",
                "type": "postgres.insert",
                "label": "Save rows",
                "position": {"x": 1260, "y": 120},
                "config": {"table": TABLE, "items": "=$steps.stock.result"},
            },
            {
                "id": "export",
                "type": "files.csv_write",
                "label": "Export",
                "position": {"x": 1560, "y": 120},
                "config": {"items": "=$steps.stock.result", "filename": "stock.csv"},
            },
        ],
        "edges": [
            {"id": "e1", "source": "start", "target": "list"},
            {"id": "e2", "source": "list", "target": "report"},
            {"id": "e3", "source": "report", "target": "stock"},
            {"id": "e4", "source": "stock", "target": "save"},
            {"id": "e5", "source": "save", "target": "export"},
        ],
    }
    token = save_draft(page, server, workflow_id, diagram)
    credential = page.request.post(
        f"{server.base_url}/api/credentials",
        data=json.dumps(
            {
                "name": "Stock database",
                "type": "postgres",
                "data": {
                    "host": "127.0.0.1",
                    "port": pg_port,
                    "database": "railyard",
                    "username": "railyard",
                    "tls": "disable",
                },
            }
        ),
        headers={"content-type": "application/json", "x-csrftoken": token},
    )
    assert credential.status == 201, credential.text()
    diagram["nodes"][4]["config"]["credential"] = credential.json()["id"]
    token = save_draft(page, server, workflow_id, diagram)

    form = open_node(page, "list")
    form.locator('[data-field-wrap="fetch_all_pages"] input[type="checkbox"]').check()
    page.wait_for_function(
        "() => window.railyardDesigner.model.node('list').config.fetch_all_pages === true"
    )

    form = open_node(page, "report")
    form.locator(".kv-add").click()
    row = form.locator(".kv-row").last
    row.locator(".kv-key").fill("skus")
    value = row.locator(".kv-value")
    value.click()
    value.press_sequentially("=")
    assist = form.locator(".expr-assist")
    assist.locator(".expr-pick-btn").click()
    picker = assist.locator(".field-picker")
    picker.locator(".field-picker-search").fill("sku")
    sku = picker.locator('.field-picker-item[data-path$="items.sku"]').first
    sku.wait_for()  # the response schema's fields are offered
    assert "string" in sku.inner_text()
    sku.click()
    assert value.input_value() == "=items.sku"
    page.wait_for_function(
        "() => JSON.stringify(window.railyardDesigner.model.node('report').config.mapping)"
        ".includes('=items.sku')"
    )
    publish(page)
    page.locator("#status").filter(has_text="Published").wait_for()

    # ------------------------------------------------ the run collects every page
    started = page.request.post(
        f"{server.base_url}/api/v1/workflows/{workflow_id}/runs",
        data=json.dumps({"input": {}}),
        headers={"content-type": "application/json", "x-csrftoken": token},
    )
    assert started.status == 201, started.text()
    run = admin.wait_for_run(started.json()["id"], timeout=30)
    assert run.status == "succeeded", run
    steps = {s.step_id: s for s in run.steps}
    assert [i["sku"] for i in steps["list"].output["items"]] == [f"sku-{n}" for n in range(6)]
    assert steps["report"].output["skus"] == [f"sku-{n}" for n in range(6)]
    rows = [
        {"sku": f"sku-{n}", "stock": n % 2, "position": n + 1, "restock": n % 2 == 0}
        for n in range(6)
    ]
    assert steps["stock"].output["result"] == rows
    assert steps["stock"].output["logs"] == [{"level": "log", "message": "skus: 6"}]
    assert steps["save"].output["count"] == 6
    assert _sql(pg_port, f"SELECT * FROM {TABLE} ORDER BY position") == rows
    export = steps["export"].output
    assert export["filename"] == "stock.csv"
    table = list(csv.DictReader(io.StringIO(base64.b64decode(export["base64"]).decode())))
    assert table == [
        {k: v if isinstance(v, str) else json.dumps(v) for k, v in row.items()} for row in rows
    ]
    assert [dict(c.query).get("cursor") for c in inventory.calls] == [None, "1", "2"]
