"""The designer and run pages speak to people, not to machines.

A workflow Webhook -> HTTP Request is drawn with problems first: the Problems panel lists
them, collapses to a header that still shows the count (and stays collapsed after a
reload), and a click on a problem still selects its node. Once fixed and published, the
toolbar shows the webhook's method and full URL, and "Copy" puts that URL on the clipboard;
at 1280x800 and 1024x768 an "Unsaved changes" status reads in full and the name and the
actions stay on one line above the webhook box (designer-toolbar-1280.png, -1024.png).
The HTTP step then calls a URL that answers 404, so the run fails: the run page shows the
error's message and kind, its status code and URL as a definition list, and the raw JSON
only behind a disclosure; steps name their node type by its label ("HTTP Request").
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login
from e2e.designer_page import publish

pytestmark = pytest.mark.e2e

BUILD = """() => {
  const { model, canvas } = window.railyardDesigner;
  const hook = model.addNode("trigger.webhook", 80, 120);
  const http = model.addNode("http.request", 420, 120);
  model.updateNode(http.id, { label: "Notify CRM" });
  canvas.fit();
  return { hook: hook.id, http: http.id };
}"""

# The status's [scroll width, visible width], the vertical middle of every item drawn on
# the toolbar's first line, and whether the webhook box lies under that line.
TOOLBAR_LINE = """() => {
  const status = document.querySelector('#status');
  const items = [...document.querySelectorAll(
    '#toolbar .toolbar-left > :not([hidden]), #toolbar .toolbar-right > :not([hidden])'
  )].map(e => e.getBoundingClientRect()).filter(r => r.width > 0);
  const bottom = Math.max(...items.map(r => r.bottom));
  return {
    status: [status.scrollWidth, status.clientWidth],
    middles: items.map(r => Math.round((r.top + r.bottom) / 2)),
    webhook_below: document.querySelector('#webhook-url').getBoundingClientRect().top >= bottom,
  };
}"""

# The vertical middle of every item drawn on the canvas's edit bar (Undo ... Fit).
EDIT_BAR_LINE = """() => [...document.querySelectorAll('.edit-bar > :not([hidden])')]
  .map(e => e.getBoundingClientRect()).filter(r => r.width > 0)
  .map(r => Math.round((r.top + r.bottom) / 2))"""

MOVE_X = """([id, x]) => {
  const { model } = window.railyardDesigner;
  model.moveNodes([{ id, x, y: model.node(id).position.y }]);
}"""

# The zoom, and whether the node's label is drawn (text shown and inside the canvas).
FIT_LABELS = """id => {
  const { canvas, model } = window.railyardDesigner;
  const svg = canvas.svg.getBoundingClientRect();
  const text = canvas.svg.querySelector(`.node[data-node-id="${id}"] text`);
  const r = text && text.getBoundingClientRect();
  return {
    zoom: model.viewport.zoom,
    label_drawn: !!r && r.width > 0 && getComputedStyle(text).display !== 'none'
      && r.left >= svg.left && r.right <= svg.right,
  };
}"""


def test_problems_webhook_copy_and_readable_run_error(
    page: Any, railyard_server: RailyardServer
) -> None:
    server = railyard_server
    ARTIFACTS_DIR.mkdir(exist_ok=True)
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server.base_url)

    login(page, server)
    page.fill("#new-workflow-name", "Usability check")
    page.click("#create-workflow")
    page.wait_for_url(re.compile(r".*/workflows/[0-9a-f-]+/designer$"))
    page.locator(".palette-item").first.wait_for()
    # the palette fits its column: long descriptions are cut with an ellipsis, no sideways
    # scrolling that could leave every card looking blank
    widths = page.evaluate(
        "(() => { const l = document.querySelector('.palette-list');"
        " return [l.scrollWidth, l.clientWidth]; })()"
    )
    assert widths[0] <= widths[1], widths
    ids = page.evaluate(BUILD)

    # ------------------------------------------------------------ canvas names types by label
    http_node = page.locator(f'#canvas g.node[data-node-id="{ids["http"]}"]')
    http_node.wait_for()
    assert (http_node.locator("text.node-label").text_content() or "").strip() == "Notify CRM"
    assert (http_node.locator("text.node-sub").text_content() or "").strip() == "HTTP Request"
    # the name: the drawn texts in order (with the problem badge's count once checked)
    name = http_node.get_attribute("aria-label") or ""
    assert re.fullmatch(r"Notify CRM HTTP Request( \d+ problems?)?", name), name
    assert "http.request" in (http_node.locator("title").text_content() or "")

    # ------------------------------------------------------------ Problems panel
    panel = page.locator("#diagnostics")
    toggle = page.locator("#diagnostics-toggle")
    page.locator("#diagnostics li.diagnostic").first.wait_for()
    count = page.locator("#diagnostics li.diagnostic").count()
    assert count >= 2  # nothing connected, no URL
    assert page.locator("#diagnostics-count").inner_text() == f"{count} problems"
    errors = page.locator("#diagnostics-errors")
    assert errors.is_visible() and errors.inner_text() == str(count)

    toggle.click()
    assert toggle.get_attribute("aria-expanded") == "false"
    assert page.locator("#diagnostics-list").is_hidden()
    assert panel.is_visible() and errors.is_visible()
    assert page.locator("#diagnostics-count").inner_text() == f"{count} problems"
    page.locator("#canvas").click(position={"x": 30, "y": 30})
    page.screenshot(path=str(ARTIFACTS_DIR / "designer-problems-collapsed.png"))

    # The state survives a reload (localStorage); the draft is saved first.
    page.click("#save-btn")
    page.wait_for_function("() => /^Saved/.test(document.querySelector('#status').textContent)")
    page.reload()
    page.locator("#diagnostics li.diagnostic").first.wait_for(state="attached")
    assert toggle.get_attribute("aria-expanded") == "false"
    assert page.locator("#diagnostics-list").is_hidden() and errors.is_visible()

    toggle.click()
    assert page.locator("#diagnostics-list").is_visible()
    problem = page.locator(f'#diagnostics li.diagnostic[data-node-id="{ids["http"]}"]').first
    problem.click()
    form = page.locator(f'#config-panel form.config-form[data-node-id="{ids["http"]}"]')
    form.wait_for()
    # The panel header names the type by its label; the id stays in a tooltip.
    assert form.locator(".panel-title h2").inner_text() == "HTTP Request"
    assert form.locator(".panel-title h2").get_attribute("title") == "Node type: http.request"
    # Enum options carry labels, values stay ids.
    pagination = form.locator('select[data-field="pagination"] option[value="link_header"]')
    assert pagination.inner_text() == "Link header"

    # ------------------------------------------------------------ fix, publish
    missing = f"{server.base_url}/hooks/no-such-token"
    page.evaluate(
        """([ids, url]) => {
          const { model } = window.railyardDesigner;
          model.connect(ids.hook, "out", ids.http, "in");
          const hook = model.node(ids.hook);
          model.updateNode(ids.hook, { config: { ...hook.config, path_suffix: "crm/orders" } });
          model.updateNode(ids.http, { config: { method: "POST", url } });
        }""",
        [ids, missing],
    )
    page.wait_for_function("() => document.querySelector('#diagnostics').hidden")
    publish(page)
    page.wait_for_function(
        "() => document.querySelector('#status').textContent.includes('Published version 1')"
    )

    # ------------------------------------------------------------ webhook box and Copy
    box = page.locator("#webhook-url")
    assert box.is_visible()
    url = page.locator("#webhook-url-text").inner_text().strip()
    assert re.fullmatch(rf"{re.escape(server.base_url)}/hooks/\S+/crm/orders", url), url
    assert page.locator("#webhook-methods .badge-method").all_inner_texts() == ["POST"]
    url_box = page.locator("#webhook-url-text").bounding_box()
    assert url_box and url_box["width"] >= 200  # shown whole, not squeezed to an ellipsis
    is_clipped = page.evaluate(
        "() => { const c = document.querySelector('#webhook-url-text');"
        " return c.scrollWidth > c.clientWidth + 1; }"
    )
    assert not is_clipped
    page.locator("#canvas").click(position={"x": 30, "y": 30})  # close the panel
    page.click("#webhook-copy")
    page.locator("#webhook-copied", has_text="Copied").wait_for()
    assert page.evaluate("() => navigator.clipboard.readText()") == url
    page.screenshot(path=str(ARTIFACTS_DIR / "designer-webhook-copy.png"))

    # After a reload the server renders the same box from the active version.
    page.reload()
    assert page.locator("#webhook-url-text").inner_text().strip() == url
    assert page.locator("#webhook-methods").inner_text().strip() == "POST"

    # ------------------------------------------------------------ one toolbar line
    # With the webhook box shown and an unsaved change, the status reads in full and the
    # name and actions stay on one line (the webhook box is the line under it).
    page.evaluate(
        "id => window.railyardDesigner.model.updateNode(id, { label: 'Notify the CRM' })",
        ids["http"],
    )
    page.wait_for_function("() => /^Unsaved/.test(document.querySelector('#status').textContent)")
    for width, height in ((1280, 800), (1024, 768)):
        page.set_viewport_size({"width": width, "height": height})
        line = page.evaluate(TOOLBAR_LINE)
        assert line["status"] == [line["status"][0]] * 2, (width, line)  # nothing cut
        assert max(line["middles"]) - min(line["middles"]) <= 2, (width, line)  # no wrap
        assert line["webhook_below"], (width, line)
        bar = page.evaluate(EDIT_BAR_LINE)
        assert max(bar) - min(bar) <= 2, (width, bar)  # the canvas's edit bar: no wrap either
        page.screenshot(path=str(ARTIFACTS_DIR / f"designer-toolbar-{width}.png"))
    # Its icon buttons keep their names for screen readers (and in their tooltips).
    assert page.get_by_role("button", name="Auto-layout").get_attribute("title")
    assert page.get_by_role("button", name="Select box").is_visible()

    # ------------------------------------------------------------ Fit keeps the labels
    # A graph too wide to fit at 1024 px with its labels drawn (zoom 0.45): Fit shows it at
    # that zoom from its left end, the trigger, instead of as blank boxes.
    x_of = "id => window.railyardDesigner.model.node(id).position.x"
    http_x = page.evaluate(x_of, ids["http"])
    page.evaluate(MOVE_X, [ids["http"], page.evaluate(x_of, ids["hook"]) + 3000])
    page.click("#zoom-fit")
    fitted = page.evaluate(FIT_LABELS, ids["hook"])
    assert fitted["zoom"] >= 0.45 and fitted["label_drawn"], fitted
    page.screenshot(path=str(ARTIFACTS_DIR / "designer-fit-wide-1024.png"))
    page.evaluate(MOVE_X, [ids["http"], http_x])
    page.set_viewport_size({"width": 1440, "height": 900})
    page.click("#save-btn")
    page.wait_for_function("() => /^Saved/.test(document.querySelector('#status').textContent)")

    # ------------------------------------------------------------ a failed run, readably
    resp = httpx.post(url, json={"order": 1}, timeout=15)
    assert resp.status_code == 202, resp.text
    run_id = resp.json()["run_id"]
    page.goto(f"{server.base_url}/runs/{run_id}")
    page.wait_for_function(
        "() => document.querySelector('#run-view').dataset.status === 'failed'", timeout=30_000
    )
    page.wait_for_load_state()
    page.locator('#run-status[data-status="failed"]').wait_for()

    step = page.locator(f'section.step[data-step-id="{ids["http"]}"]')
    step_type = step.locator(".step-type")
    assert step_type.inner_text() == "HTTP Request"
    assert step_type.get_attribute("title") == "http.request"

    for where in (page.locator("#run-error"), step.locator("details.io-error")):
        error = where.locator(".error-view").first
        message = error.locator(".error-message").inner_text()
        assert "404" in message, message
        assert not message.lstrip().startswith("{"), message
        kind = error.locator(".error-kind").inner_text()
        assert kind and " " not in kind, kind
        raw = error.locator("details.error-raw")
        assert raw.locator("pre.json").is_hidden()  # raw JSON only on request
        raw.locator("summary").click()
        assert '"kind"' in raw.locator("pre.json").inner_text()

    details = step.locator("details.io-error dl.error-details")
    terms = details.locator("dt").all_inner_texts()
    values = dict(zip(terms, details.locator("dd").all_inner_texts(), strict=True))
    assert values.get("Status code") == "404", values
    assert values.get("URL", "").startswith(f"{server.base_url}/hooks/no-such-token"), values
    page.evaluate("() => window.scrollTo(0, 0)")
    page.screenshot(path=str(ARTIFACTS_DIR / "run-failed-error.png"), full_page=True)
