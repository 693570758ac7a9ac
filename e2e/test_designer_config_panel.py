"""The config panel's field editors, used with the keyboard and the mouse.

Email "To" is a list of address chips: typing an address and pressing Enter (or a comma,
or leaving the box) adds it; a pasted "a, b" adds two; something that is no address stays
in the box with an error; Backspace in the empty box reaches the last chip and Delete
removes it; a chip's x button removes it with the mouse. The retry policy and the timeout
are in the Settings section of every action: attempts, a first wait typed as "30s", a
longest wait "5m", an error kind chosen from the suggestions; the summary line spells out
the waits. What the panel shows is what the draft stores, and a reopened panel shows it
again. A screenshot of the panel is saved as test-artifacts/config-panel.png.
"""

from __future__ import annotations

from typing import Any

import pytest

from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login
from e2e.designer_page import new_workflow, wait_saved

pytestmark = pytest.mark.e2e

BUILD = """() => {
  const { model, canvas } = window.railyardDesigner;
  const hook = model.addNode("trigger.webhook", 80, 120);
  const mail = model.addNode("email.send", 420, 120);
  model.connect(hook.id, "out", mail.id, "in");
  canvas.fit();
  return { hook: hook.id, mail: mail.id };
}"""

CONFIG = "id => window.railyardDesigner.model.node(id).config"


def open_panel(page: Any, node_id: str) -> Any:
    page.evaluate("id => window.railyardDesigner.canvas.select({kind: 'node', id})", node_id)
    form = page.locator(f'#config-panel form.config-form[data-node-id="{node_id}"]')
    form.wait_for()
    return form


def chips(form: Any, name: str) -> list[str]:
    return [
        str(t)
        for t in form.locator(f'[data-field="{name}"] .value-chip').evaluate_all(
            "els => els.map(e => e.dataset.value)"
        )
    ]


def test_chips_retry_and_timeout_in_the_panel(page: Any, railyard_server: RailyardServer) -> None:
    server = railyard_server
    ARTIFACTS_DIR.mkdir(exist_ok=True)
    login(page, server)
    new_workflow(page, server, "Panel editors")
    ids = page.evaluate(BUILD)
    form = open_panel(page, ids["mail"])

    # ------------------------------------------------------------ To: address chips
    to_box = form.locator('[data-field="to"] .chip-input')
    to_box.click()
    page.keyboard.type("ada@example.com")
    page.keyboard.press("Enter")
    page.keyboard.type("bob@example.org,")
    assert chips(form, "to") == ["ada@example.com", "bob@example.org"]
    page.keyboard.type("not an address")
    page.keyboard.press("Enter")
    error = form.locator('[data-field-wrap="to"] .field-error.parse-error')
    assert "Not an email address: not an address" in error.inner_text()
    assert to_box.input_value() == "not an address"  # kept to be corrected, not lost
    to_box.fill("")
    # paste two at once
    page.evaluate(
        """() => {
          const box = document.querySelector('[data-field="to"] .chip-input');
          const data = new DataTransfer();
          data.setData('text', 'cy@example.net; dee@example.com');
          const init = {clipboardData: data, bubbles: true, cancelable: true};
          box.dispatchEvent(new ClipboardEvent('paste', init));
        }"""
    )
    assert chips(form, "to") == [
        "ada@example.com",
        "bob@example.org",
        "cy@example.net",
        "dee@example.com",
    ]
    # keyboard removal: Backspace in the empty box focuses the last chip, Delete removes it
    to_box.focus()
    page.keyboard.press("Backspace")
    page.keyboard.press("Delete")
    assert chips(form, "to") == ["ada@example.com", "bob@example.org", "cy@example.net"]
    # mouse removal
    form.locator('[data-field="to"] .chip-remove[aria-label="Remove bob@example.org"]').click()
    assert chips(form, "to") == ["ada@example.com", "cy@example.net"]
    # typed and left without Enter: added when the box loses the focus
    to_box.click()
    page.keyboard.type("eve@example.com")
    form.locator('[data-field="subject"]').click()
    page.keyboard.type("Hello")
    assert chips(form, "to") == ["ada@example.com", "cy@example.net", "eve@example.com"]
    config = page.evaluate(CONFIG, ids["mail"])
    assert config["to"] == ["ada@example.com", "cy@example.net", "eve@example.com"]

    # ------------------------------------------------------------ retry policy and timeout
    attempts = form.locator('[data-subfield="max_attempts"]')
    attempts.click()
    page.keyboard.type("4")
    first = form.locator('[data-subfield="initial_interval"]')
    first.focus()
    page.keyboard.type("banana")
    assert (
        "Not a duration"
        in form.locator('[data-field-wrap="retry.initial_interval"] .field-error').inner_text()
    )
    first.fill("")
    page.keyboard.type("30s")
    page.keyboard.press("Tab")  # backoff factor
    page.keyboard.press("Tab")  # longest wait
    page.keyboard.type("5m")
    kinds_box = form.locator(
        '[data-field="retry"] [data-subfield="non_retryable_error_kinds"] .chip-input'
    )
    kinds_box.click()
    page.keyboard.type("http_404")
    page.keyboard.press("Enter")
    summary = form.locator(".retry-summary")
    assert summary.inner_text() == "4 attempts: retries after 30s, 1m, 2m (±10 %)."
    timeout = form.locator('[data-field="timeout"]')
    timeout.click()
    page.keyboard.type("1h 30m")
    config = page.evaluate(CONFIG, ids["mail"])
    assert config["retry"] == {
        "max_attempts": 4,
        "initial_interval": 30,
        "max_interval": 300,
        "non_retryable_error_kinds": ["http_404"],
    }
    assert config["timeout"] == 5400
    form.locator('[data-field-wrap="to"]').scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS_DIR / "config-panel.png"))
    form.locator('[data-field-wrap="retry"]').scroll_into_view_if_needed()
    page.screenshot(path=str(ARTIFACTS_DIR / "config-panel-retry.png"))

    # ------------------------------------------------------------ stored and shown again
    page.keyboard.press("Control+s")
    wait_saved(page)
    open_panel(page, ids["hook"])
    form = open_panel(page, ids["mail"])
    assert chips(form, "to") == ["ada@example.com", "cy@example.net", "eve@example.com"]
    assert form.locator('[data-subfield="initial_interval"]').input_value() == "30s"
    assert form.locator('[data-subfield="max_interval"]').input_value() == "5m"
    assert form.locator('[data-field="timeout"]').input_value() == "1h 30m"
    assert chips(form, "retry") == ["http_404"]
    assert form.locator(".retry-summary").inner_text().startswith("4 attempts")
