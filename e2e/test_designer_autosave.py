"""Autosave and concurrent-edit refusal, in two browser windows on one draft.

The draft saves itself a moment after each edit. When a second window, opened on the same
draft before the first saved, saves too, the server refuses (409); the window says who
changed the draft and when, and offers Reload (take theirs) or Overwrite (keep mine).
Neither window's work is lost silently.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login
from e2e.designer_page import diagram, new_workflow, open_designer, wait_saved

pytestmark = pytest.mark.e2e


def stored_draft(page: Any, server: RailyardServer, workflow_id: str) -> dict[str, Any]:
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    r = httpx.get(f"{server.base_url}/api/workflows/{workflow_id}", cookies=cookies)
    assert r.status_code == 200, r.text
    return dict(r.json())


def add(page: Any, node_type: str, x: int, y: int) -> str:
    return str(
        page.evaluate(
            "([t, x, y]) => window.railyardDesigner.model.addNode(t, x, y).id", [node_type, x, y]
        )
    )


def test_autosave_and_concurrent_edit_refusal(page: Any, railyard_server: RailyardServer) -> None:
    server = railyard_server
    login(page, server)
    wf = new_workflow(page, server, "Shared draft")

    second_context = page.context.browser.new_context(viewport={"width": 1440, "height": 900})
    other = second_context.new_page()
    try:
        login(other, server)
        open_designer(other, server, wf)

        # Window 1 edits; autosave stores it without a click.
        add(page, "trigger.webhook", 0, 0)
        wait_saved(page)
        page.wait_for_function("() => /Saved/.test(document.getElementById('status').textContent)")
        stored = stored_draft(page, server, wf)
        assert [n["type"] for n in stored["draft"]["nodes"]] == ["trigger.webhook"]
        revision = stored["draft_revision"]

        # Window 2 was opened before that save: its autosave is refused, nothing overwritten.
        add(other, "control.set", 300, 0)
        dialog = other.locator("#conflict-dialog")
        dialog.wait_for()
        text = dialog.inner_text()
        assert "Admin saved this draft" in text and f"revision {revision}" in text
        assert "Not saved" in other.locator("#status").inner_text()
        other.screenshot(path=str(ARTIFACTS_DIR / "designer-edit-conflict.png"))
        assert stored_draft(page, server, wf)["draft_revision"] == revision
        assert [n["type"] for n in stored_draft(page, server, wf)["draft"]["nodes"]] == [
            "trigger.webhook"
        ]

        # "Reload their draft": window 2 shows window 1's draft.
        other.locator("#conflict-reload").click()
        other.wait_for_load_state()
        other.locator(".palette-item").first.wait_for()
        assert [n["type"] for n in diagram(other)["nodes"]] == ["trigger.webhook"]

        # Now window 2 saves first; window 1's next edit conflicts; "Overwrite" keeps it.
        add(other, "control.if", 300, 200)
        wait_saved(other)
        add(page, "control.delay", 300, 400)
        conflict = page.locator("#conflict-dialog")
        conflict.wait_for()
        page.locator("#conflict-overwrite").click()
        wait_saved(page)
        final = stored_draft(page, server, wf)
        assert [n["type"] for n in final["draft"]["nodes"]] == [
            "trigger.webhook",
            "control.delay",
        ]
        assert final["draft_revision"] == revision + 2
        assert page.locator("#conflict-dialog").is_hidden()
    finally:
        second_context.close()
