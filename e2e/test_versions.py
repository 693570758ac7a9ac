"""Versions in the browser: publish with a note, the history, the visual diff between two
versions, restore into the draft (and undo it), and an export/import round trip through
a downloaded file and through the clipboard, credentials re-bound on the way."""

from __future__ import annotations

import json
from typing import Any

import pytest

from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login
from e2e.designer_page import diagram, new_workflow, open_designer, publish, wait_saved

pytestmark = pytest.mark.e2e

FETCH_JSON = """async ([method, url, body]) => {
  const token = document.querySelector('meta[name="csrf-token"]').content;
  const resp = await fetch(url, {
    method,
    headers: {"Content-Type": "application/json", "X-CSRFToken": token},
    body: body === null ? undefined : JSON.stringify(body),
  });
  return {status: resp.status, body: await resp.json()};
}"""

SET_DIAGRAM = """(d) => {
  const m = window.railyardDesigner.model;
  m.restore(JSON.stringify(d), "test");
}"""


def call(page: Any, method: str, url: str, body: Any = None) -> Any:
    result = page.evaluate(FETCH_JSON, [method, url, body])
    assert result["status"] < 300, result
    return result["body"]


def first_draft(credential_id: str) -> dict[str, Any]:
    """Webhook -> Set -> HTTP Request (with a credential)."""
    return {
        "nodes": [
            {"id": "hook", "type": "trigger.webhook", "label": "", "position": {"x": 0, "y": 0},
             "config": {}},
            {"id": "set_1", "type": "control.set", "label": "Price", "position": {"x": 264, "y": 0},
             "config": {"mapping": {"total": "=body.qty * 2"}}},
            {"id": "call", "type": "http.request", "label": "", "position": {"x": 528, "y": 0},
             "config": {"url": "https://api.example.com/orders", "method": "POST",
                        "credential": credential_id}},
        ],
        "edges": [
            {"id": "e1", "source": "hook", "source_port": "out", "target": "set_1",
             "target_port": "in"},
            {"id": "e2", "source": "set_1", "source_port": "out", "target": "call",
             "target_port": "in"},
        ],
    }  # fmt: skip


def second_draft(credential_id: str) -> dict[str, Any]:
    """The Set mapping changed, the HTTP Request removed, a Respond added; the webhook moved."""
    d = first_draft(credential_id)
    d["nodes"][0]["position"] = {"x": 24, "y": 96}
    d["nodes"][1]["config"] = {"mapping": {"total": "=body.qty * 3", "currency": "EUR"}}
    d["nodes"][2] = {
        "id": "respond",
        "type": "control.respond",
        "label": "",
        "position": {"x": 528, "y": 0},
        "config": {},
    }
    d["edges"][1] = {
        "id": "e3",
        "source": "set_1",
        "source_port": "out",
        "target": "respond",
        "target_port": "in",
    }
    return d


def status_has(page: Any, text: str) -> None:
    page.wait_for_function(
        "(t) => document.querySelector('#status').textContent.includes(t)", arg=text
    )


def build_two_versions(page: Any, server: RailyardServer, name: str) -> tuple[str, str]:
    """A workflow with versions 1 and 2 published from the designer, with notes."""
    cred = call(
        page,
        "POST",
        "/api/credentials",
        {"name": f"{name} key", "type": "api_key", "data": {"api_key": "sk-e2e-secret-123456"}},
    )["id"]
    wf = new_workflow(page, server, name)
    page.evaluate(SET_DIAGRAM, first_draft(cred))
    wait_saved(page)
    publish(page, "first cut")
    status_has(page, "Published version 1")
    page.evaluate(SET_DIAGRAM, second_draft(cred))
    wait_saved(page)
    # The note dialog is keyboard-driven: type, Ctrl+Enter publishes.
    page.click("#publish-btn")
    page.locator("#publish-note").wait_for()
    page.keyboard.type("answers the caller instead")
    page.keyboard.press("Control+Enter")
    status_has(page, "Published version 2")
    return wf, cred


# The row buttons of the versions table that are not wholly inside the viewport and the
# table's visible box, as "row: text".
ROW_BUTTONS_CUT = """() => {
  const card = document.querySelector('#versions-table').parentElement.getBoundingClientRect();
  const right = Math.min(window.innerWidth, card.right);
  return [...document.querySelectorAll('#versions-table tr.version-row .btn')]
    .filter(b => {
      const r = b.getBoundingClientRect();
      return r.left < card.left || r.right > right;
    })
    .map(b => `${b.closest('tr').dataset.ref}: ${b.textContent.trim()}`);
}"""


def test_history_diff_view_and_restore(page: Any, railyard_server: RailyardServer) -> None:
    server = railyard_server
    login(page, server)
    wf, _ = build_two_versions(page, server, "Versioned orders")

    # ---------------------------------------------------------------- history
    page.click("#versions-link")
    page.wait_for_url(f"**/workflows/{wf}/versions")
    rows = page.locator("#versions-table tbody tr.version-row")
    assert rows.count() == 3  # the draft and two versions
    v2 = page.locator('tr.version-row[data-ref="2"]')
    assert "answers the caller instead" in v2.inner_text() and "Active" in v2.inner_text()
    assert "first cut" in page.locator('tr.version-row[data-ref="1"]').inner_text()
    # at 1280x800 every row's buttons are whole on the screen (none cut off on the right)
    page.set_viewport_size({"width": 1280, "height": 800})
    page.screenshot(path=str(ARTIFACTS_DIR / "versions-history.png"), full_page=True)
    cut = page.evaluate(ROW_BUTTONS_CUT)
    assert not cut, cut

    # ---------------------------------------------------------------- the diff view
    page.select_option("#compare-from", "1")
    page.select_option("#compare-to", "2")
    page.click("#compare-btn")
    page.wait_for_url("**/compare?from=1&to=2")
    page.wait_for_function("() => window.railyardDiff !== undefined")
    before, after = "#diff-before", "#diff-after"
    page.locator(f'{after} .node[data-node-id="respond"][data-status="added"]').wait_for()
    assert page.locator(f'{before} .node[data-node-id="call"][data-status="removed"]').count() == 1
    assert page.locator(f'{before} .node[data-node-id="set_1"][data-status="changed"]').count()
    assert page.locator(f'{after} .node[data-node-id="set_1"][data-status="changed"]').count()
    # the webhook only moved: unchanged
    assert page.locator(f'{after} .node[data-node-id="hook"][data-status="same"]').count() == 1
    assert page.locator(f"{after} .edge.edge-added").count() == 1
    assert page.locator(f"{before} .edge.edge-removed").count() == 1
    fields = page.locator('li.change[data-node-id="set_1"] tr.field-change')
    assert [fields.nth(i).get_attribute("data-path") for i in range(fields.count())] == [
        "config.mapping.currency",
        "config.mapping.total",
    ]
    total = page.locator('tr.field-change[data-path="config.mapping.total"]').inner_text()
    assert "=body.qty * 2" in total and "=body.qty * 3" in total
    summary = page.locator("#diff-summary").inner_text()
    assert "+1 node" in summary and "\u22121 node" in summary and "1 changed" in summary
    # a click on a change shows the node on both sides
    page.click('li.change[data-node-id="set_1"] .change-head')
    page.locator(f'{before} .node.focused[data-node-id="set_1"]').wait_for()
    assert page.locator(f'{after} .node.focused[data-node-id="set_1"]').count() == 1
    page.screenshot(path=str(ARTIFACTS_DIR / "version-diff.png"), full_page=True)

    # ---------------------------------------------------------------- restore, then undo
    page.goto(f"{server.base_url}/workflows/{wf}/versions")
    page.click('tr.version-row[data-ref="1"] .restore-link')
    page.wait_for_url(f"**/workflows/{wf}/designer")
    status_has(page, "Restored version 1")
    restored = diagram(page)
    assert [n["id"] for n in restored["nodes"]] == ["hook", "set_1", "call"]
    stored = call(page, "GET", f"/api/workflows/{wf}")
    assert [n["id"] for n in stored["draft"]["nodes"]] == ["hook", "set_1", "call"]
    assert stored["active_version"] == 2  # restoring does not publish
    page.locator("#canvas").focus()
    page.keyboard.press("Control+z")
    page.wait_for_function(
        "() => window.railyardDesigner.model.nodes.some((n) => n.id === 'respond')"
    )
    wait_saved(page)
    stored = call(page, "GET", f"/api/workflows/{wf}")
    assert [n["id"] for n in stored["draft"]["nodes"]] == ["hook", "set_1", "respond"]


def test_export_import_round_trip(page: Any, railyard_server: RailyardServer) -> None:
    server = railyard_server
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.base_url)
    login(page, server)
    wf, cred = build_two_versions(page, server, "Exported orders")
    page.goto(f"{server.base_url}/workflows/{wf}/versions")

    # ---------------------------------------------------------------- file download
    with page.expect_download() as info:
        page.click('tr.version-row[data-ref="1"] .export-link')
    download = info.value
    assert download.suggested_filename == "exported-orders-v1.railyard.json"
    path = ARTIFACTS_DIR / "exported-orders-v1.railyard.json"
    download.save_as(str(path))
    exported = json.loads(path.read_text())
    assert "sk-e2e-secret" not in path.read_text()
    assert exported["credentials"][0]["name"] == "Exported orders key"

    # ---------------------------------------------------------------- clipboard -> new workflow
    page.click('tr.version-row[data-ref="draft"] .copy-json')
    page.wait_for_function(
        "() => /Copied/.test(document.querySelector('#versions-status').textContent)"
    )
    page.goto(f"{server.base_url}/workflows")
    page.click("#import-workflow-btn")
    page.click("#import-paste")
    page.wait_for_function("() => document.querySelector('#import-text').value.length > 0")
    page.fill("#import-name", "Imported orders")
    page.click("#import-submit")
    page.wait_for_url("**/designer")
    page.locator(".palette-item").first.wait_for()
    copy_id = page.url.rsplit("/", 2)[-2]
    assert copy_id != wf
    assert page.locator("#workflow-name").inner_text() == "Imported orders"
    copied = diagram(page)
    original = call(page, "GET", f"/api/workflows/{wf}")["draft"]
    assert copied["nodes"] == original["nodes"] and copied["edges"] == original["edges"]

    # ---------------------------------------------------------------- file -> into the draft
    page.goto(f"{server.base_url}/workflows/{copy_id}/versions")
    page.click("#import-draft-btn")
    page.set_input_files("#import-file", str(path))
    page.wait_for_function("() => document.querySelector('#import-text').value.length > 0")
    page.click("#import-submit")
    page.wait_for_url(f"**/workflows/{copy_id}/designer")
    page.locator(".palette-item").first.wait_for()
    nodes = {n["id"]: n for n in diagram(page)["nodes"]}
    assert set(nodes) == {"hook", "set_1", "call"}
    assert nodes["call"]["config"]["credential"] == cred  # re-bound in this installation
    open_designer(page, server, copy_id)
    assert diagram(page)["nodes"] == list(nodes.values())

    # ---------------------------------------------------------------- a bad document: a clear error
    page.goto(f"{server.base_url}/workflows")
    page.click("#import-workflow-btn")
    page.fill("#import-text", json.dumps({**exported, "format_version": 7}))
    page.click("#import-submit")
    error = page.locator("#import-error")
    error.wait_for()
    assert "unsupported format_version 7" in error.inner_text()
    assert "$.format_version" in error.inner_text()
