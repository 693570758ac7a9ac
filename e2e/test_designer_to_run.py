"""Draw a workflow in the browser, publish it, trigger it by webhook, watch it run.

Webhook -> Set (customer, total) -> If (total > 100) --true--> HTTP Request (POST the Set
output to a local endpoint) -> Respond to Webhook. Everything in the designer is done with
the mouse and the side panel, the way a person does it; the run is started by an HTTP
client and watched on the run pages.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from e2e.conftest import ARTIFACTS_DIR, RailyardServer, RecordingEndpoint, login
from e2e.designer_page import publish
from e2e.nodes_by_type import (
    HTTP,
    IF,
    RESPOND,
    SET,
    WEBHOOK,
    center,
    connect,
    drag_from_palette,
    io_block,
    node,
    node_id,
    select_node,
)

pytestmark = pytest.mark.e2e

PAYLOAD = {"name": "Ada", "qty": 3, "price": 50}
EXPECTED_POST = {"customer": "Ada", "total": 150}

# Run page: remember (across the page's own reload) every status #run-status shows, to
# tell a live (SSE) update from a page load.
WATCH_RUN_STATUS = """() => {
  window.__e2eMarker = 1;
  const badge = document.querySelector('#run-status');
  const seen = () => JSON.parse(sessionStorage.getItem('e2e-live') || '[]');
  new MutationObserver(() => {
    sessionStorage.setItem('e2e-live', JSON.stringify([...seen(), badge.dataset.status]));
  }).observe(badge, {attributes: true, attributeFilter: ['data-status']});
  return badge.dataset.status;
}"""
# After the run is over the page reloads itself once: settled means reloaded and succeeded.
RUN_PAGE_SETTLED = """() => {
  const view = document.querySelector('#run-view');
  return window.__e2eMarker === undefined && view && view.dataset.status === 'succeeded';
}"""


def status_text(page: Any) -> str:
    return page.locator("#status").inner_text()


def test_designer_publish_webhook_run(
    page: Any, railyard_server: RailyardServer, http_endpoint: RecordingEndpoint
) -> None:
    server = railyard_server
    ARTIFACTS_DIR.mkdir(exist_ok=True)

    # ------------------------------------------------------------ log in, new workflow
    login(page, server)
    page.fill("#new-workflow-name", "Big orders to the CRM")
    page.click("#create-workflow")
    page.wait_for_url(re.compile(r".*/workflows/[0-9a-f-]+/designer$"))
    page.locator("#canvas").wait_for()
    page.locator(".palette-item").first.wait_for()

    # ------------------------------------------------------------ draw the nodes
    for node_type in (WEBHOOK, SET, IF, HTTP, RESPOND):
        drag_from_palette(page, node_type)
    nodes = page.locator("#canvas g.node[data-node-id]")
    assert nodes.count() == 5
    ids = {t: node_id(page, t) for t in (WEBHOOK, SET, IF, HTTP, RESPOND)}
    assert len(set(ids.values())) == 5
    positions = {t: center(node(page, t).locator("rect.node-body")) for t in ids}
    assert len({(round(x), round(y)) for x, y in positions.values()}) == 5, positions

    # Problems show on the offending nodes (the If has no condition, nothing is connected)
    # and publishing is refused while they remain.
    page.locator(f'#canvas g.node.has-error[data-type="{IF}"]').wait_for()
    page.locator("#diagnostics li.diagnostic").first.wait_for()
    assert page.locator(f'#diagnostics li.diagnostic[data-node-id="{ids[IF]}"]').count() >= 1
    page.click("#publish-btn")  # refused before it asks for a version note
    page.wait_for_function(
        "() => /not published/.test(document.querySelector('#status').textContent)"
    )
    assert "problem" in status_text(page)
    assert not page.locator("#publish-note").is_visible()
    assert page.locator("#webhook-url").is_hidden()
    assert page.locator("#version-badge").is_hidden()

    # ------------------------------------------------------------ connect with the mouse
    connect(page, WEBHOOK, "out", SET)
    connect(page, SET, "out", IF)
    connect(page, IF, "true", HTTP)
    connect(page, HTTP, "out", RESPOND)
    assert page.locator("#canvas path.edge").count() == 4
    diagram = page.evaluate("() => window.railyardDesigner.model.toJSON()")
    edges = {
        (e["source"], e["source_port"], e["target"], e["target_port"]) for e in diagram["edges"]
    }
    assert edges == {
        (ids[WEBHOOK], "out", ids[SET], "in"),
        (ids[SET], "out", ids[IF], "in"),
        (ids[IF], "true", ids[HTTP], "in"),
        (ids[HTTP], "out", ids[RESPOND], "in"),
    }

    # ------------------------------------------------------------ configure in the panel
    form = select_node(page, SET)
    for key, value in (("customer", "=body.name"), ("total", "=body.qty * body.price")):
        form.locator(".kv-add").click()
        row = form.locator(".kv-row").last
        row.locator(".kv-key").fill(key)
        row.locator(".kv-value").fill(value)

    form = select_node(page, IF)
    form.locator('[data-field="condition"]').fill("=total > 100")

    form = select_node(page, HTTP)
    form.locator('[data-field="method"]').select_option("POST")
    form.locator('[data-field="url"]').fill(http_endpoint.url)
    body = form.locator('[data-field="body"]')
    body_is_plain_json = (
        body.get_attribute("data-kind") == "json" and body.get_attribute("data-expression") is None
    )
    # An expression field keeps "=..." as an expression; a plain JSON field needs a JSON string.
    body.fill('"=$"' if body_is_plain_json else "=$")

    select_node(page, RESPOND)  # status 200 by default

    config = {
        n["type"]: n["config"]
        for n in page.evaluate("() => window.railyardDesigner.model.toJSON()")["nodes"]
    }
    assert config[SET]["mapping"] == [
        {"name": "customer", "value": "=body.name"},
        {"name": "total", "value": "=body.qty * body.price"},
    ]
    assert config[IF]["condition"] == "=total > 100"
    assert config[HTTP]["method"] == "POST"
    assert config[HTTP]["url"] == http_endpoint.url
    assert config[HTTP]["body"] == "=$"

    # Every error is gone. One warning stays: this Webhook answers at once (202, which the
    # test relies on), so the Respond step's answer is never sent, and the designer says so.
    page.wait_for_function(
        "() => !document.querySelector('#canvas g.node.has-error')"
        " && document.querySelectorAll('#diagnostics-list li.diagnostic').length === 1"
    )
    warning = page.locator("#diagnostics-list li.diagnostic")
    assert warning.get_attribute("data-node-id") == ids[RESPOND]
    assert "Respond to Webhook is ignored" in warning.inner_text()
    assert "has-warning" in (node(page, RESPOND).get_attribute("class") or "")

    # ------------------------------------------------------------ save and publish
    page.click("#save-btn")
    page.wait_for_function("() => /^Saved/.test(document.querySelector('#status').textContent)")
    assert status_text(page) == "Saved · 1 problem", status_text(page)
    publish(page)
    page.wait_for_function(
        "() => document.querySelector('#status').textContent.includes('Published version 1')"
    )
    assert page.locator("#version-badge").inner_text() == "v1"
    badge_title = page.locator("#version-badge").get_attribute("title") or ""
    assert badge_title.startswith("Version 1, published by "), badge_title
    assert badge_title.endswith("webhooks and schedules run it"), badge_title
    webhook_url = page.locator("#webhook-url code").inner_text().strip()
    assert re.fullmatch(rf"{re.escape(server.base_url)}/hooks/\S+", webhook_url), webhook_url
    page.locator("#canvas").click(position={"x": 60, "y": 500})  # deselect for the picture
    page.screenshot(path=str(ARTIFACTS_DIR / "designer.png"))

    # ------------------------------------------------------------ trigger by webhook
    # The endpoint holds its answer, so the run is still in its HTTP step while we look.
    http_endpoint.hold()
    resp = httpx.post(webhook_url, json=PAYLOAD, timeout=15)
    assert resp.status_code == 202, resp.text
    started = resp.json()
    run_id = started["run_id"]
    assert started["url"] == f"{server.base_url}/runs/{run_id}"
    http_endpoint.wait_for_requests(1)

    # ------------------------------------------------------------ watch it run
    page.goto(f"{server.base_url}/runs")
    row = page.locator(f'tr.run-row[data-run-id="{run_id}"]')
    row.wait_for()
    assert row.get_attribute("data-status") == "running"
    row.locator("a.row-title").click()
    page.wait_for_url(f"{server.base_url}/runs/{run_id}")
    assert page.evaluate(WATCH_RUN_STATUS) == "running"
    http_section = page.locator(f'section.step[data-step-id="{ids[HTTP]}"]')
    assert http_section.get_attribute("data-status") == "running"
    page.screenshot(path=str(ARTIFACTS_DIR / "run-running.png"))

    http_endpoint.release()
    # Live update over Server-Sent Events, then the page reloads itself once.
    page.wait_for_function(RUN_PAGE_SETTLED, timeout=30_000)
    page.wait_for_load_state()
    live = page.evaluate("() => JSON.parse(sessionStorage.getItem('e2e-live') || '[]')")
    assert "succeeded" in live, f"#run-status never changed live (seen: {live})"
    page.locator('#run-status[data-status="succeeded"]').wait_for()

    steps = page.locator("section.step[data-step-id]")
    statuses = {
        steps.nth(i).get_attribute("data-step-id"): steps.nth(i).get_attribute("data-status")
        for i in range(steps.count())
    }
    assert statuses == {nid: "succeeded" for nid in ids.values()}, statuses
    for nid in ids.values():
        graph_node = page.locator(f'#run-graph g.node[data-node-id="{nid}"]')
        assert graph_node.get_attribute("data-status") == "succeeded", nid

    set_step = page.locator(f'section.step[data-step-id="{ids[SET]}"]')
    io_block(set_step, "Output").locator("summary").click()
    set_output = io_block(set_step, "Output").locator("pre.json")
    assert set_output.is_visible()
    text = set_output.inner_text()
    assert '"Ada"' in text and "150" in text, text
    http_step = page.locator(f'section.step[data-step-id="{ids[HTTP]}"]')
    assert http_step.locator("tr.attempt").count() == 1
    assert http_step.locator("tr.attempt").get_attribute("data-status") == "succeeded"
    assert '"Ada"' in io_block(http_step, "Input").locator("pre.json").text_content()
    http_output = io_block(http_step, "Output").locator("pre.json").text_content()
    assert '"ok": true' in http_output and '"status": 200' in http_output, http_output
    page.evaluate("() => window.scrollTo(0, 0)")
    page.screenshot(path=str(ARTIFACTS_DIR / "run.png"), full_page=True)

    # ------------------------------------------------------------ the endpoint got it
    assert http_endpoint.json_bodies() == [EXPECTED_POST]
    assert http_endpoint.requests[0]["method"] == "POST"
