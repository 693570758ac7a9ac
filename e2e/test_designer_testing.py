"""Testing without publishing, in Chromium: pin data on a step and "Test step"; the live
run overlay on the canvas during a slow run ("Test workflow"), a node's input and output
from the overlay; replay from a step with its input edited, from the designer and from the
run page. Screenshots of the run overlay land in test-artifacts/.

The workflows are never published: every run here is a test run of the draft.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from e2e.conftest import ARTIFACTS_DIR, RailyardServer, RecordingEndpoint, login
from e2e.designer_page import body_point, new_workflow, node_el, open_designer

pytestmark = pytest.mark.e2e

PUT_DRAFT = """async ([id, diagram]) => {
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const r = await fetch(`/api/workflows/${id}/draft`, {method: 'PUT', credentials: 'same-origin',
    headers: {'Content-Type': 'application/json', 'X-CSRFToken': csrf},
    body: JSON.stringify({diagram})});
  return r.status;
}"""


def pipeline(url: str) -> dict[str, Any]:
    """Manual trigger -> HTTP POST ``url`` (body: the input) -> Set {"got": body.ok}."""

    def node(nid: str, ntype: str, x: int, **config: Any) -> dict[str, Any]:
        return {
            "id": nid,
            "type": ntype,
            "label": "",
            "position": {"x": x, "y": 160},
            "config": config,
        }

    return {
        "nodes": [
            node("start", "trigger.manual", 40),
            node("call", "http.request", 320, method="POST", url=url, body="=$"),
            node("set_1", "control.set", 600, mapping={"got": "=$.body.ok"}),
        ],
        "edges": [
            {
                "id": "e1",
                "source": "start",
                "source_port": "out",
                "target": "call",
                "target_port": "in",
            },
            {
                "id": "e2",
                "source": "call",
                "source_port": "out",
                "target": "set_1",
                "target_port": "in",
            },
        ],
        "viewport": {"x": 0, "y": 0, "zoom": 1},
        "schema_version": 1,
    }


def designer_with(page: Any, server: RailyardServer, name: str, url: str) -> str:
    workflow_id = new_workflow(page, server, name)
    assert page.evaluate(PUT_DRAFT, [workflow_id, pipeline(url)]) == 200
    open_designer(page, server, workflow_id)
    node_el(page, "set_1").wait_for()
    page.click("#zoom-fit")
    return workflow_id


def click_node(page: Any, node_id: str) -> None:
    x, y = body_point(page, node_id)
    page.mouse.click(x, y)
    page.locator(f'#test-data[data-node-id="{node_id}"]').wait_for()


def canvas_status(page: Any, node_id: str, status: str) -> None:
    page.locator(f'#canvas g.node[data-node-id="{node_id}"][data-status="{status}"]').wait_for()


def overlay_status(page: Any, status: str) -> None:
    page.locator(f'#run-overlay[data-status="{status}"]').wait_for()


def test_designer_pinned_data_and_test_step(
    page: Any, railyard_server: RailyardServer, http_endpoint: RecordingEndpoint
) -> None:
    login(page, railyard_server)
    designer_with(page, railyard_server, "Pinned data", http_endpoint.url)

    # pin a sample answer on the HTTP step (mouse), then test the Set step after it
    click_node(page, "call")
    page.click("#pin-edit")
    # the editor has room: a tall box and Save in view, not a small scroll box
    editor = page.locator("#pin-editor").bounding_box()
    assert editor and editor["height"] >= 150, editor
    page.wait_for_function(
        "() => { const r = document.getElementById('pin-save').getBoundingClientRect();"
        " const s = document.getElementById('test-data').getBoundingClientRect();"
        " return r.top >= s.top && r.bottom <= s.bottom && r.bottom <= innerHeight; }"
    )
    page.screenshot(path=str(ARTIFACTS_DIR / "designer-pin-editor.png"))
    page.fill("#pin-editor", json.dumps({"status": 200, "body": {"ok": "from the pin"}}))
    page.click("#pin-save")
    page.locator("#pin-box.pinned .pin-data").wait_for()
    assert "from the pin" in page.locator("#pin-box .pin-data pre").inner_text()
    note = page.locator('#canvas g.node[data-node-id="call"] text.node-run-note')
    assert note.text_content().strip() == "pinned"  # the canvas marks pinned nodes

    click_node(page, "set_1")
    page.locator("#test-step-btn").focus()
    page.keyboard.press("Enter")  # keyboard: the button is reachable and works with Enter
    overlay_status(page, "succeeded")
    canvas_status(page, "call", "succeeded")
    canvas_status(page, "set_1", "succeeded")
    output = page.locator("#step-result .step-output pre")
    output.wait_for()
    assert json.loads(output.inner_text()) == {"got": "from the pin"}
    assert http_endpoint.requests == []  # the pinned step was not executed
    assert note.text_content().strip() == "pinned data"
    assert page.locator("#overlay-executes").inner_text() == "· no connector called"
    assert "no connector is called" in page.locator("#status").inner_text()

    # the pin is stored with the draft: still there after a reload
    page.reload()
    node_el(page, "call").wait_for()
    click_node(page, "call")
    page.locator("#pin-box.pinned").wait_for()
    page.click("#pin-remove")
    page.locator("#pin-box:not(.pinned)").wait_for()


def test_designer_live_overlay_and_replay_from_step(
    page: Any, railyard_server: RailyardServer, http_endpoint: RecordingEndpoint
) -> None:
    login(page, railyard_server)
    designer_with(page, railyard_server, "Live overlay", http_endpoint.url)

    http_endpoint.hold()  # the HTTP step stays running until released
    page.click("#test-btn")
    canvas_status(page, "call", "running")  # live, over Server-Sent Events
    overlay_status(page, "running")
    canvas_status(page, "start", "succeeded")
    assert "really runs: call" in page.locator("#status").inner_text()
    assert page.locator("#overlay-executes").inner_text() == "· really runs: call"
    ARTIFACTS_DIR.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS_DIR / "designer-run-overlay-live.png"))
    http_endpoint.release()
    canvas_status(page, "set_1", "succeeded")
    overlay_status(page, "succeeded")
    assert page.locator('#canvas g.node[data-node-id="call"] text.node-run-note').count() == 1

    # click a node: its input and output in the run
    click_node(page, "call")
    page.locator("#step-result .step-output pre").wait_for()
    assert '"ok": true' in page.locator("#step-result .step-output pre").inner_text()
    page.locator("#step-result .step-input summary").click()
    assert page.locator("#step-result .step-input pre").inner_text().strip() == "{}"
    page.screenshot(path=str(ARTIFACTS_DIR / "designer-run-overlay.png"))
    first_run = page.locator("#run-overlay").get_attribute("data-run-id")

    # replay from the Set step with its input edited: a new run, the HTTP step not re-run
    click_node(page, "set_1")
    page.click("#replay-edit")
    page.fill("#replay-input", json.dumps({"status": 200, "body": {"ok": "edited"}}))
    page.click("#replay-start")
    page.locator(
        f'#run-overlay:not([data-run-id="{first_run}"])[data-status="succeeded"]'
    ).wait_for()
    output = page.locator("#step-result .step-output pre")
    output.wait_for()
    assert json.loads(output.inner_text()) == {"got": "edited"}
    assert len(http_endpoint.requests) == 1
    replay_run = page.locator("#run-overlay").get_attribute("data-run-id")

    # the run page: linked to the original, marked as a test run, replay from there too
    page.click("#overlay-run-link")
    page.wait_for_url(re.compile(rf".*/runs/{replay_run}$"))
    page.locator("#test-run-badge").wait_for()
    assert page.locator("#rerun-of-link").get_attribute("href") == f"/runs/{first_run}"
    page.click("#graph-zoom-in")
    page.click("#graph-fit")
    box = page.locator('details.step-replay[data-step-id="set_1"]')
    box.locator("summary").click()
    box.locator("textarea").fill(json.dumps({"body": {"ok": "from the run page"}}))
    box.locator("button.replay-start").click()
    page.wait_for_url(re.compile(rf".*/runs/(?!{replay_run})[0-9a-f-]+$"))
    page.locator('#run-view[data-status="succeeded"]').wait_for()
    outputs = page.locator('section.step[data-step-id="set_1"] .step-io').text_content() or ""
    assert "from the run page" in outputs, outputs
    page.screenshot(path=str(ARTIFACTS_DIR / "run-page-replay.png"), full_page=True)

    # a past run opened on the canvas
    page.click("#open-on-canvas")
    page.wait_for_url(re.compile(r".*/designer\?run=[0-9a-f-]+$"))
    canvas_status(page, "set_1", "succeeded")
    overlay_status(page, "succeeded")
