"""The expression editor inside a JSON body (HTTP Request's Body): a path typed in an
"=..." string is completed, the string under the cursor is previewed against pinned data,
the field picker puts a new "=path" string where the cursor is, a parse error shows its
line and column as you type (once), a long line wraps, and Format indents the JSON; a
field dragged from the input fields onto the JSON becomes a member named after it; the
text is coloured as JSON (keys, strings, numbers, literals, "=..." expressions). With a
long body focused, the coloured copy covers the text area only: the assist bar's buttons
stay visible and clickable. JSON that does not parse is kept as typed: autosaved, back
after a reload with its error, listed as a problem, refusing publish; once fixed, the
value is stored. Screenshot: json-body-editor.png."""

from __future__ import annotations

import json
from typing import Any

import pytest

from e2e.api_client import api_client, chain_draft, node
from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login
from e2e.designer_page import body_point, drag_field, open_settings, wait_saved

pytestmark = pytest.mark.e2e


def _object(**properties: Any) -> dict[str, Any]:
    return {"type": "object", "properties": properties}


TEXT = {"type": "string"}
CUSTOMER = _object(customer=_object(name=TEXT, email=TEXT), total={"type": "number"})

BODY = "() => window.railyardDesigner.model.node('call').config.body"
"""JS: the HTTP Request's stored body."""

UNCOVERED = """el => {
  const r = el.getBoundingClientRect();
  const hit = document.elementFromPoint(r.x + r.width / 2, r.y + r.height / 2) === el;
  const covers = (pre) => {
    const p = pre.getBoundingClientRect();
    return p.left < r.right && r.left < p.right && p.top < r.bottom && r.top < p.bottom;
  };
  return hit && ![...document.querySelectorAll(".code-highlight")].some(covers);
}"""
"""JS: whether ``el`` is what a click at its centre reaches and no code editor's coloured
copy is drawn over it (the copy lets clicks through: elementFromPoint alone misses it)."""

SAME_BOX = """area => {
  const [a, b] = [area, area.parentElement.querySelector(".code-highlight")]
    .map((e) => e.getBoundingClientRect());
  const side = (r) => [r.x, r.y, r.width, r.height];
  return side(a).every((v, i) => Math.abs(v - side(b)[i]) < 1);
}"""
"""JS: whether a code text area's coloured copy has exactly the text area's box."""


def test_json_body_has_the_expression_editor(page: Any, railyard_server: RailyardServer) -> None:
    server = railyard_server
    api = api_client(server)
    hook = node("hook", "trigger.webhook", 0, body_schema=CUSTOMER)
    call = node("call", "http.request", 320, method="POST", url="https://example.com/orders")
    workflow_id = chain_draft(api, "JSON bodies", hook, call)
    sample = {"body": {"customer": {"name": "Ada", "email": "ada@example.com"}, "total": 12}}
    pinned = api.put(f"/api/v1/workflows/{workflow_id}/pins/hook", json={"data": sample})
    assert pinned.status_code < 300, pinned.text
    login(page, server)
    form = open_settings(page, server, workflow_id, "call")
    body = form.locator('[data-field-wrap="body"] textarea[data-kind="json"]')
    assist = form.locator(".expr-assist")

    # completion inside an "=..." string
    body.click()
    body.press_sequentially('{"name": "=body.cust')
    form.locator('.expr-suggest-item[data-path="body.customer"]').wait_for()
    body.press("Enter")
    body.press_sequentially('.name"}')
    page.wait_for_function(
        f"() => JSON.stringify(({BODY})()) === JSON.stringify({{name: '=body.customer.name'}})"
    )
    # the string under the cursor is previewed on the pinned data
    body.press("ArrowLeft")
    body.press("ArrowLeft")
    assist.locator(".expr-preview-value").filter(has_text='"Ada"').wait_for()

    # the picker, with the cursor between two members: a new "=path" string
    text = body.input_value()
    body.evaluate("(el, at) => { el.focus(); el.setSelectionRange(at, at); }", len(text) - 1)
    body.press_sequentially(', "total": ')
    assist.locator(".expr-pick-btn").click()
    form.locator('.field-picker-item[data-path="body.total"]').first.click()
    page.wait_for_function(
        f"() => ({BODY})().total === '=body.total' && ({BODY})().name === '=body.customer.name'"
    )
    assist.locator(".expr-preview-value").filter(has_text="12").wait_for()

    # a parse error says where, once (under the field, not again in the assist)
    body.press("End")
    body.press_sequentially(",")
    error = form.locator('[data-field-wrap="body"] .field-error.parse-error')
    error.filter(has_text="Not valid JSON (line 1, column").wait_for()
    shown = form.locator('[data-field-wrap="body"] :is(.field-error, .expr-error):visible')
    assert shown.all_inner_texts() == [error.inner_text()], shown.all_inner_texts()
    body.press("Backspace")
    error.wait_for(state="detached")

    # a long line wraps: nothing hides to the right of the text area
    before = body.input_value()
    body.press("End")
    body.press("ArrowLeft")
    body.press_sequentially(', "note": "' + "a long line of text that goes on " * 4 + '"')
    clipped = body.evaluate("el => el.scrollWidth > el.clientWidth + 1")
    assert not clipped
    body.fill(before)

    # Format indents it, and the stored body is unchanged
    assist.get_by_role("button", name="Format").click()
    assert body.input_value() == json.dumps(
        {"name": "=body.customer.name", "total": "=body.total"}, indent=2
    )
    # coloured as JSON under the text: keys, and the "=..." strings as expressions
    shown = form.locator('[data-field-wrap="body"] .code-editor .code-highlight')
    assert shown.locator(".hljs-attr").all_inner_texts() == ['"name"', '"total"']
    assert shown.locator(".hljs-template-variable").all_inner_texts() == [
        '"=body.customer.name"',
        '"=body.total"',
    ]
    assert shown.inner_text().rstrip("\n") == body.input_value()
    page.screenshot(path=str(ARTIFACTS_DIR / "json-body-editor.png"))

    # a field dragged from the input onto the JSON becomes a member named after it
    email = form.locator('.drag-field[data-drag-path="body.customer.email"]')
    drag_field(page, email, body)
    page.wait_for_function(
        f"() => ({BODY})().email === '=body.customer.email' && ({BODY})().total === '=body.total'"
    )

    # a long body, focused: the coloured copy covers the text area, never the assist bar
    long = {f"line_{i}": f"=body.customer.name & ' {i}'" for i in range(12)}
    body.fill(json.dumps(long, indent=2))
    page.wait_for_function(f"() => Object.keys(({BODY})()).length === 12")
    body.click()
    assert body.evaluate(SAME_BOX)
    for button in (assist.locator(".expr-pick-btn"), assist.locator(".expr-format-btn")):
        button.scroll_into_view_if_needed()
        assert button.is_visible()
        assert button.evaluate(UNCOVERED), button.inner_text()

    # JSON that does not parse is kept as typed: saved, and back after a reload
    valid = body.input_value()
    broken = valid.replace(",\n", "\n", 1)  # the comma after the first member
    body.fill(broken)
    error.filter(has_text="Not valid JSON (line 3, column 3): ").wait_for()
    assert "position" not in error.inner_text(), error.inner_text()  # where: said once
    wait_saved(page)
    page.reload()
    page.mouse.click(*body_point(page, "call"))
    body.wait_for()
    assert body.input_value() == broken
    error.filter(has_text="Not valid JSON (line 3, column 3)").wait_for()
    shown = form.locator('[data-field-wrap="body"] :is(.field-error, .expr-error):visible')
    assert shown.all_inner_texts() == [error.inner_text()], shown.all_inner_texts()
    problem = page.locator('#diagnostics li.diagnostic[data-node-id="call"]')
    problem.filter(has_text="Body: not valid JSON (line 3, column 3)").wait_for(state="attached")
    refused = api.post(f"/api/v1/workflows/{workflow_id}/publish", json={})
    assert refused.status_code == 422, refused.text
    assert "Body: not valid JSON (line 3, column 3)" in refused.text, refused.text
    assert '"body"' in refused.text, refused.text

    # fixed: the value is stored and the typed text is gone from the draft
    body.fill(valid)
    error.wait_for(state="detached")
    page.wait_for_function(f"() => Object.keys(({BODY})()).length === 12")
    wait_saved(page)
    (draft_node,) = [n for n in api.get_workflow(workflow_id).draft["nodes"] if n["id"] == "call"]
    assert draft_node["config"]["body"] == long
    assert "unparsed" not in draft_node
    problem.filter(has_text="not valid JSON").wait_for(state="detached")
