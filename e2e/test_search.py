"""Search end to end: a webhook run fails; the operator types a value from its input into
the header's search box, narrows by the status facet, opens the run from the results and
comes back through the run page's link. Screenshots of the results and the run."""

from __future__ import annotations

import contextlib
import re
from typing import Any

import pytest
from railyard_client import Client

from e2e.api_client import api_client
from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login

pytestmark = pytest.mark.e2e


def publish(api: Client, name: str, nodes: list[dict[str, Any]], edges: list[Any]) -> str:
    wf = api.create_workflow(name, tags=["billing"])
    d = {"nodes": nodes, "edges": edges, "viewport": {"x": 0, "y": 0, "zoom": 1}}
    assert api.save_draft(wf.id, d).ok
    webhook_url = api.publish(wf.id).webhook_url
    return "/hooks/" + webhook_url.rsplit("/hooks/", 1)[1]


def node(node_id: str, node_type: str, x: int, **config: Any) -> dict[str, Any]:
    return {
        "id": node_id,
        "type": node_type,
        "label": node_id,
        "position": {"x": x, "y": 0},
        "config": config,
    }


def edge(source: str, target: str) -> dict[str, str]:
    return {
        "id": f"{source}->{target}",
        "source": source,
        "source_port": "out",
        "target": target,
        "target_port": "in",
    }


def test_search_finds_a_failed_run_by_a_value_in_its_input(
    railyard_server: RailyardServer, page: Any
) -> None:
    base = railyard_server.base_url
    with contextlib.closing(api_client(railyard_server)) as api:
        # an HTTP call to a blocked address (loopback): the step and the run fail
        failing = publish(
            api,
            "Order intake",
            [
                node("webhook", "trigger.webhook", 0),
                node(
                    "call_api", "http.request", 200, method="POST", url="http://127.0.0.1:9/orders"
                ),
            ],
            [edge("webhook", "call_api")],
        )
        fine = publish(
            api,
            "Order echo",
            [
                node("webhook", "trigger.webhook", 0),
                node("set_1", "control.set", 200, mapping={"ok": True}),
            ],
            [edge("webhook", "set_1")],
        )
        failed = api.post(failing, json={"customer": "cust-e2e-4711", "note": "rush order"})
        assert failed.status_code == 202, failed.text
        failed_id = failed.json()["run_id"]
        ok = api.post(fine, json={"customer": "cust-e2e-4711"})
        ok_id = ok.json()["run_id"]
        api.post(fine, json={"customer": "someone else"})
        assert api.wait_for_run(failed_id, timeout=20).status == "failed"
        assert api.wait_for_run(ok_id, timeout=20).status == "succeeded"

    login(page, railyard_server)
    page.fill("#global-search-q", "cust-e2e-4711")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r".*/search\?q=cust-e2e-4711.*"))
    hits = page.locator(".search-hit")
    assert hits.count() == 2
    assert page.locator("#search-total").inner_text() == "2 results"
    page.screenshot(path=str(ARTIFACTS_DIR / "search-results.png"), full_page=True)

    # narrow by the status facet
    with page.expect_navigation():
        page.locator(".facet-value", has_text="failed").click()
    assert "status%3Afailed" in page.url
    assert page.locator(".search-hit").count() == 1
    hit = page.locator(f'.search-hit[data-id="{failed_id}"]')
    assert "Order intake" in hit.inner_text()

    # open it, and come back to the same results
    with page.expect_navigation():
        hit.locator(".search-hit-title").click()
    assert page.url.startswith(f"{base}/runs/{failed_id}")
    page.locator("#run-status").wait_for()
    assert "failed" in page.locator("#run-status").inner_text().lower()
    page.screenshot(path=str(ARTIFACTS_DIR / "search-run-opened.png"), full_page=True)
    with page.expect_navigation():
        page.click("#back-to-results")
    assert page.locator(f'.search-hit[data-id="{failed_id}"]').count() == 1
    assert page.input_value("#search-q") == "cust-e2e-4711 status:failed"

    # a malformed query is a clear message with a caret, not an error page
    page.fill("#search-q", 'status:failed "rush')
    with page.expect_navigation():
        page.click("#search-form button[type=submit]")
    assert "unterminated quote" in page.locator("#search-error").inner_text()
