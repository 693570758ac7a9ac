"""The Code step's editor: its JavaScript is highlighted as it is typed (vendored
highlight.js, classes only), the text area stays the control the panel reads, and the
page reports no Content-Security-Policy violation."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.api_client import api_client, node
from e2e.conftest import RailyardServer, login
from e2e.designer_page import open_designer, open_node

pytestmark = pytest.mark.e2e

RECORD_VIOLATIONS = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolations.push(e.violatedDirective + " " + e.blockedURI);
});
"""

STORED_CODE = "() => window.railyardDesigner.model.node('shape').config.code"


def test_code_is_highlighted_and_edited_under_the_csp(
    page: Any, railyard_server: RailyardServer
) -> None:
    server = railyard_server
    api = api_client(server)
    wf = api.create_workflow("Code editor").id
    code = node("shape", "code.javascript", 320, code="// double\nreturn input.n * 2;")
    draft = {
        "nodes": [node("start", "trigger.manual", 0), code],
        "edges": [{"id": "e1", "source": "start", "target": "shape"}],
        "schema_version": 1,
    }
    api.save_draft(wf, draft)
    page.add_init_script(RECORD_VIOLATIONS)
    login(page, server)
    open_designer(page, server, wf)
    form = open_node(page, "shape")
    editor = form.locator(".code-editor").filter(
        has=page.locator('textarea[data-code="javascript"]')
    )
    editor.locator(".code-highlight .hljs-keyword").first.wait_for()
    assert editor.locator(".hljs-comment").inner_text() == "// double"
    assert editor.locator(".hljs-keyword").first.inner_text() == "return"

    area = editor.locator("textarea.code-input")
    area.click()
    area.press("Control+End")
    area.type("\nconst label = 'twice';")
    page.wait_for_function(f"() => ({STORED_CODE})().endsWith(\"const label = 'twice';\")")
    page.wait_for_function(
        "() => [...document.querySelectorAll("
        "'.code-editor:has([data-code=javascript]) .code-highlight .hljs-string')]"
        ".some((s) => s.textContent === \"'twice'\")"
    )
    # the highlighted copy holds exactly the text (plus the trailing line it keeps)
    shown = editor.locator(".code-highlight code").inner_text()
    assert shown.rstrip("\n") == area.input_value()
    assert page.evaluate("() => window.__cspViolations") == []
