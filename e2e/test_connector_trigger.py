"""A Slack trigger built in the designer, in Chromium: pick "Slack: message posted" under
Triggers in the palette, choose the Slack app credential, "Fetch test event" while Slack
(the Slack Events emulator, signing as Slack does) saves the trigger URL and posts a
message, map a field of the pinned event in a Set step with the field picker, publish;
then a signed event from the emulator starts a run whose input has that field, the
toolbar links to the trigger page with the URL, registration and the last event, and the
run page names the event's Slack delivery id. Screenshots land in test-artifacts/.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pytest

from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login
from e2e.designer_page import new_workflow, publish, wait_set_field
from e2e.nodes_by_type import connect, node, node_id, select_node
from tests.fakes.slack_events import SlackEvents

pytestmark = pytest.mark.e2e

T = TypeVar("T")

SLACK = "slack.message_posted"
SET = "control.set"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
CHANNEL = "C024BE91L"
FETCH = "url => fetch(url).then(r => r.json())"
"""JS: GET a JSON API path with the page's session."""


def message(text: str) -> dict[str, Any]:
    """A ``message`` event as Slack sends it (Slack's documented example, new text)."""
    return {
        "type": "message",
        "channel": CHANNEL,
        "user": "U2147483697",
        "text": text,
        "ts": f"{time.time():.6f}",
        "event_ts": f"{time.time():.6f}",
        "channel_type": "channel",
    }


def in_thread(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run an emulator call to the end in a thread of its own (Playwright's sync API keeps
    an event loop running in this one)."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


def drop(page: Any, palette_item: Any, fx: float, fy: float) -> None:
    """Drag a palette item onto the canvas at (fx, fy) of its width and height."""
    box = page.locator("#canvas").bounding_box()
    assert box, "no canvas"
    palette_item.scroll_into_view_if_needed()
    palette_item.drag_to(
        page.locator("#canvas"), target_position={"x": box["width"] * fx, "y": box["height"] * fy}
    )


def wait_for_run(server: RailyardServer, page: Any, workflow_id: str) -> dict[str, Any]:
    """The workflow's first run once it ended (through the page's session)."""
    deadline = time.monotonic() + 30
    while True:
        listed = page.evaluate(FETCH, f"/api/runs?workflow_id={workflow_id}")
        items = list(listed)
        if items:
            run = page.evaluate(
                "id => fetch(`/api/runs/${id}`).then(r => r.json())", items[0]["id"]
            )
            if run.get("status") in ("succeeded", "failed", "cancelled", "timed_out"):
                return dict(run)
        assert time.monotonic() < deadline, f"no finished run of {workflow_id}: {listed}"
        time.sleep(0.2)


def test_slack_trigger_from_test_event_to_run(page: Any, railyard_server: RailyardServer) -> None:
    server = railyard_server
    ARTIFACTS_DIR.mkdir(exist_ok=True)
    login(page, server)
    slack = SlackEvents(SIGNING_SECRET, retry_delays=(0.2, 0.2, 0.2))

    # ------------------------------------------------------------ the Slack app credential
    page.goto(f"{server.base_url}/credentials")
    page.select_option("#credential-type", "slack.app")
    form = page.locator('form.credential-form[data-type="slack.app"]')
    form.wait_for()
    form.locator('input[name="name"]').fill("Orders Slack app")
    form.locator('input[name="field.signing_secret"]').fill(SIGNING_SECRET)
    form.locator('button[type="submit"]').click()
    row = page.locator("#credentials-table tr[data-credential-id]", has_text="Orders Slack app")
    row.wait_for()
    credential_id = row.get_attribute("data-credential-id")
    assert credential_id

    # ------------------------------------------------------------ Triggers -> Slack
    workflow_id = new_workflow(page, server, "Slack orders")
    triggers = page.locator('.palette-group[data-group="core:Triggers"]')
    item = triggers.locator(f'.palette-item[data-type="{SLACK}"]')
    assert item.locator(".palette-label").inner_text() == "Slack: message posted"
    page.fill("#palette-search", "slack")
    assert item.is_visible()  # found by its connector's name too
    page.fill("#palette-search", "")
    drop(page, item, 0.2, 0.15)
    drop(page, page.locator(f'.palette-item[data-type="{SET}"]'), 0.55, 0.15)
    node(page, SET).wait_for()
    connect(page, SLACK, "out", SET)
    trigger_id = node_id(page, SLACK)

    panel = select_node(page, SLACK)
    assert panel.get_attribute("data-trigger-kind") == "app_webhook"
    panel.locator('select[data-field="credential"]').select_option(credential_id)
    assert panel.locator('[data-field="channels"]').count() == 1  # the config schema's fields

    # ------------------------------------------------------------ Fetch test event
    section = panel.locator(".trigger-sample-section")
    section.locator("#trigger-sample-fetch").click()
    status = section.locator("#trigger-sample-status")
    status.filter(has_text="Listening for a test event").wait_for()
    url = section.locator("#trigger-sample-url").inner_text().strip()
    assert re.fullmatch(rf"{re.escape(server.base_url)}/hooks/app/[\w-]+", url), url
    # Slack checks the Request URL when it is saved, then posts the channel's next message.
    assert in_thread(slack.verify_url(url))
    page.wait_for_function(
        "() => /still listening/.test(document.querySelector('#trigger-sample-status').textContent)"
    )
    sample = in_thread(slack.send_event(url, message("Order 1042: 3 crates")))
    assert sample.delivered, sample.attempts
    status.filter(has_text="is pinned").wait_for()
    output = section.locator("#trigger-sample-output")
    assert "Order 1042: 3 crates" in output.inner_text()
    page.locator("#pin-box.pinned").wait_for()  # Test data: the trigger's pin
    section.screenshot(path=str(ARTIFACTS_DIR / "slack-fetch-test-event.png"))

    # ------------------------------------------------------------ map a field of the event
    set_form = select_node(page, SET)
    set_form.locator(".kv-add").click()
    row = set_form.locator(".kv-row").last
    row.locator(".kv-key").fill("order_text")
    value = row.locator(".kv-value")
    value.click()
    assist = set_form.locator(".expr-assist")
    assist.locator(".expr-pick-btn").click()
    picker = assist.locator(".field-picker")
    picker.locator(".field-picker-search").fill("text")
    field = picker.locator('.field-picker-item[data-path="text"]').first
    field.filter(has_text="Order 1042").wait_for()  # the pinned event's value as example
    field.click()
    assert value.input_value() == "=text"
    set_id = node_id(page, SET)
    wait_set_field(page, set_id, "order_text", "=text")

    # ------------------------------------------------------------ publish; a real event
    publish(page, "Slack orders")
    page.wait_for_function(
        "() => /Published version 1/.test(document.querySelector('#status').textContent)"
    )
    live = in_thread(slack.send_event(url, message("Order 1043: 5 crates"), event_id="EvLIVE1043"))
    assert live.delivered and live.attempts[0].status == 200, live.attempts
    run = wait_for_run(server, page, workflow_id)
    assert run["status"] == "succeeded", run
    assert run["input"]["text"] == "Order 1043: 5 crates"
    assert run["input"]["event_id"] == "EvLIVE1043"
    [step] = [s for s in run["steps"] if s["step_id"] == set_id]
    assert step["output"] == {"order_text": "Order 1043: 5 crates"}
    # Slack's retry of the same event starts nothing more
    again = in_thread(slack.send_event(url, message("Order 1043: 5 crates"), event_id="EvLIVE1043"))
    assert again.delivered
    listed = page.evaluate(FETCH, f"/api/runs?workflow_id={workflow_id}")
    assert len(listed) == 1

    # ------------------------------------------------------------ the trigger page
    link = page.locator("#trigger-status-link")
    link.wait_for()
    link.click()
    page.wait_for_url(re.compile(rf".*/workflows/{workflow_id}/trigger$"))
    assert page.locator("#trigger-url").inner_text().strip() == url
    assert page.locator("#trigger-registration").inner_text().strip() == "none"
    line = page.locator("#trigger-line").inner_text()
    assert "receiving" in line and "last event never" not in line
    event_row = page.locator("tr.trigger-event", has_text="EvLIVE1043")
    event_row.wait_for()
    assert run["id"] in event_row.inner_text()
    assert "Vendor delivery id: EvLIVE1043" in event_row.inner_text()
    assert "Slack: message posted" in page.locator("#trigger-status h2").first.inner_text()
    assert page.locator("tr.trigger-event").count() == 1  # the test event started no run
    page.screenshot(path=str(ARTIFACTS_DIR / "slack-trigger-page.png"), full_page=True)

    # ------------------------------------------------------------ the run page
    event_row.locator("a").click()
    page.wait_for_url(re.compile(r".*/runs/[0-9a-f-]+$"))
    started_by = page.locator("#trigger-event")
    assert "Slack: message posted" in started_by.inner_text()
    assert "Vendor delivery id EvLIVE1043" in " ".join(started_by.inner_text().split())
    page.screenshot(path=str(ARTIFACTS_DIR / "slack-run-started-by.png"), full_page=False)

    # the pin stays with the draft: the published run had the live event
    pins = page.evaluate(
        "id => fetch(`/api/workflows/${id}/pins`).then(r => r.json())", workflow_id
    )
    assert pins[trigger_id]["data"]["text"] == "Order 1042: 3 crates"
