"""A polling trigger in the designer, in Chromium: "New items at a URL" is under Triggers in
the palette, its panel has the trigger's fields and the two every polling trigger gets
(Poll every, as a duration, and Include existing items); "Fetch test event" polls a local
JSON API once and pins the newest item, another item can be pinned instead, and the
app's refusal (401) is shown in the panel with its message. Nothing is published: no run
starts. A screenshot lands in test-artifacts/."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login
from e2e.designer_page import new_workflow
from e2e.nodes_by_type import node, select_node

pytestmark = pytest.mark.e2e

POLLING = "http.new_items"
ITEMS = [{"id": 2, "title": "Second order"}, {"id": 1, "title": "First order"}]
FETCH = "url => fetch(url).then(r => r.json())"


class _Api(BaseHTTPRequestHandler):
    """``/items``: the items, newest first; ``/locked``: 401 as an API refusing a key."""

    def do_GET(self) -> None:
        if self.path.startswith("/items"):
            status, body = 200, json.dumps(ITEMS).encode()
        else:
            status, body = 401, b'{"error": "invalid key"}'
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def items_api() -> Iterator[str]:
    """A local JSON API's base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Api)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_polling_trigger_fetches_a_test_event(
    page: Any, railyard_server: RailyardServer, items_api: str
) -> None:
    server = railyard_server
    ARTIFACTS_DIR.mkdir(exist_ok=True)
    login(page, server)
    workflow_id = new_workflow(page, server, "New orders")
    triggers = page.locator('.palette-group[data-group="core:Triggers"]')
    triggers.locator(f'.palette-item[data-type="{POLLING}"]').click()
    node(page, POLLING).wait_for()
    form = select_node(page, POLLING)
    assert form.get_attribute("data-trigger-kind") == "polling"
    every = form.locator('[data-field="poll_interval"]')
    assert every.get_attribute("data-kind") == "duration"
    every.fill("2m")
    form.locator('[data-field="include_existing"]').check()
    form.locator('[data-field="url"]').fill(f"{items_api}/items")

    section = form.locator(".trigger-sample-section")
    section.locator("#trigger-sample-fetch").click()
    status = section.locator("#trigger-sample-status")
    status.filter(has_text="the newest is pinned").wait_for()
    assert "Second order" in section.locator("#trigger-sample-output").inner_text()
    config = page.evaluate(
        "t => window.railyardDesigner.model.nodes.find(n => n.type === t).config", POLLING
    )
    assert config["poll_interval"] == 120 and config["include_existing"] is True
    pick = section.locator("#trigger-sample-pick")
    assert pick.locator("option").all_inner_texts() == ["Newest: 2", "1"]
    pick.select_option("1")
    status.filter(has_text="Item 1 is pinned").wait_for()
    trigger_id = form.get_attribute("data-node-id")
    pins = page.evaluate(FETCH, f"/api/workflows/{workflow_id}/pins")
    assert pins[trigger_id]["data"] == {"id": 1, "title": "First order"}
    section.screenshot(path=str(ARTIFACTS_DIR / "polling-fetch-test-event.png"))

    form.locator('[data-field="url"]').fill(f"{items_api}/locked")
    section.locator("#trigger-sample-fetch").click()
    status.filter(has_text="Error 502").wait_for()
    assert "401" in status.inner_text()
    assert status.get_attribute("data-state") == "error"
    assert page.evaluate(FETCH, f"/api/runs?workflow_id={workflow_id}") == []
