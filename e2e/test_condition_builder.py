"""The condition builder and its JSONata, both ways: rows write the expression (AND within
a group, OR between groups, typed operators by the field's type), the expression typed by
hand comes back as rows when it is in the builder's subset, and anything else is left as
written ("written by hand") until it is; the same builder per case of a Switch and on a
Filter's items, and fields dragged from the input into rows and settings; each row is
readable at the settings panel's default width. Screenshots:
condition-builder.png, condition-builder-switch.png, condition-builder-filter.png."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from e2e.api_client import api_client, chain_draft, node
from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login
from e2e.designer_page import (
    drag_field,
    open_settings,
    publish,
    wait_for_run,
)

pytestmark = pytest.mark.e2e

CONDITION = "=body.total > 100"


STORED = "() => (window.railyardDesigner.model.node('check').config.condition || '')"
"""JS: the stored condition (the leading "=" is optional on a condition: left out here)."""


ROWS_FIT = """() => {
  const measure = document.createElement("canvas").getContext("2d");
  const fits = (box, text, extra = 0) => {
    const s = getComputedStyle(box);
    measure.font = `${s.fontWeight} ${s.fontSize} ${s.fontFamily}`;
    const padding = parseFloat(s.paddingLeft) + parseFloat(s.paddingRight);
    return measure.measureText(text).width + padding + extra <= box.clientWidth;
  };
  return [...document.querySelectorAll("#config-panel .cond-row")].map((row) => {
    const [field, op, value] = [".cond-field", ".cond-op", ".cond-value"].map(
      (q) => row.querySelector(q)
    );
    return {
      field: fits(field, "body.customer.country"),
      op: fits(op, op.options[op.selectedIndex].text, 16),
      value: value.hidden || fits(value, "Germany"),
    };
  });
}"""
"""JS: per condition row, whether its boxes show a nested path, the operator (beside the
select's arrow) and a word whole."""


def _condition(page: Any) -> str:
    return str(page.evaluate(STORED)).removeprefix("=")


def _wait_condition(page: Any, text: str) -> None:
    page.wait_for_function(f"want => ({STORED})().replace(/^=/, '') === want", arg=text)


def _hook(**properties: dict[str, Any]) -> dict[str, Any]:
    """A webhook trigger whose body has ``properties`` (JSON Schemas by name)."""
    hook = node("hook", "trigger.webhook", 0)
    hook["config"] = {"body_schema": {"type": "object", "properties": properties}}
    return hook


def test_rows_and_jsonata_round_trip(page: Any, railyard_server: RailyardServer) -> None:
    server = railyard_server
    api = api_client(server)
    hook = _hook(total={"type": "number"}, country={"type": "string"}, vip={"type": "boolean"})
    check = node("check", "control.if", 320, condition=CONDITION)
    login(page, server)
    form = open_settings(page, server, chain_draft(api, "Conditions", hook, check), "check")
    builder = form.locator(".cond-builder")
    builder.wait_for()

    # the stored condition is read into one row
    assert builder.locator(".cond-field").first.input_value() == "body.total"
    assert builder.locator(".cond-op").first.input_value() == "gt"
    assert builder.locator(".cond-value").first.input_value() == "100"

    # + And: a text field offers text operators; the JSONata follows
    page.wait_for_function(
        "() => [...document.querySelectorAll('.cond-builder datalist option')]"
        ".some((o) => o.value === 'body.country')"
    )
    builder.locator(".cond-add").first.click()
    field = builder.locator(".cond-field").nth(1)
    field.fill("body.country")
    field.press("Tab")
    ops = (
        builder.locator(".cond-op")
        .nth(1)
        .locator("option")
        .evaluate_all("os => os.map((o) => o.value)")
    )
    assert "contains" in ops and "gt" not in ops, ops
    builder.locator(".cond-value").nth(1).fill("DE")
    _wait_condition(page, 'body.total > 100 and body.country = "DE"')

    # + Or group with a yes/no field: a unary operator, no value
    builder.locator(".cond-add-group").click()
    field = builder.locator(".cond-field").nth(2)
    field.fill("body.vip")
    field.press("Tab")
    builder.locator(".cond-op").nth(2).select_option("is_true")
    assert not builder.locator(".cond-value").nth(2).is_visible()
    expected = '(body.total > 100 and body.country = "DE") or body.vip = true'
    _wait_condition(page, expected)
    # readable at the panel's default width: a nested field path, the operator's label and
    # a word each fit their box whole
    for row in page.evaluate(ROWS_FIT):
        assert all(row.values()), row
    page.screenshot(path=str(ARTIFACTS_DIR / "condition-builder.png"))

    # typed by hand: in the subset, rows come back; outside it, left as written
    text = page.locator('#config-panel [data-field="condition"]')
    text.fill("$exists(body.vip) or body.total <= 5")
    page.wait_for_function("() => document.querySelectorAll('.cond-row').length === 2")
    assert builder.locator(".cond-op").first.input_value() == "exists"
    assert builder.locator(".cond-op").nth(1).input_value() == "le"
    text.fill("=$sum(body.items.price) > 10")
    builder.locator(".cond-note").filter(has_text="Written by hand").wait_for()
    assert not builder.locator(".cond-row").first.is_visible()
    assert _condition(page) == "$sum(body.items.price) > 10"


def test_fields_arriving_while_typing_keep_the_text(
    page: Any, railyard_server: RailyardServer
) -> None:
    """The field list answers while the user is typing a field (a slow network): the text
    typed so far stays under the caret, and the row takes the field's type (its operators)
    once the caret moves on."""
    server = railyard_server
    api = api_client(server)
    held: list[Any] = []
    page.route("**/expressions/fields", lambda route: held.append(route))  # answered later
    hook = _hook(total={"type": "number"})
    check = node("check", "control.if", 320)
    login(page, server)
    form = open_settings(page, server, chain_draft(api, "Slow fields", hook, check), "check")
    builder = form.locator(".cond-builder")
    builder.wait_for()
    deadline = time.monotonic() + 15
    while not held:
        assert time.monotonic() < deadline, "the designer never asked for the fields"
        page.wait_for_timeout(50)

    field = builder.locator(".cond-field").first
    field.fill("body.to")
    for route in held:
        route.continue_()
    page.wait_for_function(
        "() => [...document.querySelectorAll('.cond-builder datalist option')]"
        ".some((o) => o.value === 'body.total')"
    )
    assert field.input_value() == "body.to", "the text typed so far was lost"
    field.press_sequentially("tal")
    field.press("Tab")
    ops = builder.locator(".cond-op option").evaluate_all("os => os.map((o) => o.value)")
    assert "gt" in ops and "contains" not in ops, ops
    builder.locator(".cond-op").select_option("gt")
    builder.locator(".cond-value").fill("100")
    _wait_condition(page, "body.total > 100")


RULES = "() => (window.railyardDesigner.model.node('route').config.rules || {})"
"""JS: the Switch's stored rules (case -> "=condition")."""


def _wait_rule(page: Any, case: str, text: str) -> None:
    page.wait_for_function(f"([c, want]) => ({RULES})()[c] === want", arg=[case, text])


def test_switch_cases_get_builders_and_dragged_fields(
    page: Any, railyard_server: RailyardServer
) -> None:
    server = railyard_server
    api = api_client(server)
    hook = _hook(total={"type": "number"}, country={"type": "string"})
    route = node("route", "control.switch", 320, cases=["big", "de"])
    login(page, server)
    form = open_settings(page, server, chain_draft(api, "Switch rules", hook, route), "route")
    big = form.locator('.cond-cases .cond-builder[data-case="big"]')
    de = form.locator('.cond-cases .cond-builder[data-case="de"]')
    big.wait_for()

    # case "big": typed rows write that case's rule
    big.locator(".cond-field").fill("body.total")
    big.locator(".cond-field").press("Tab")
    big.locator(".cond-op").select_option("gt")
    big.locator(".cond-value").fill("100")
    _wait_rule(page, "big", "=body.total > 100")

    # case "de": a field dragged from the input fields into the row; text operators
    country = form.locator('.drag-field[data-drag-path="body.country"]')
    drag_field(page, country, de.locator(".cond-field"))
    assert de.locator(".cond-field").input_value() == "body.country"
    ops = de.locator(".cond-op option").evaluate_all("os => os.map((o) => o.value)")
    assert "starts" in ops and "gt" not in ops, ops
    de.locator(".cond-value").fill("DE")
    _wait_rule(page, "de", '=body.country = "DE"')
    page.screenshot(path=str(ARTIFACTS_DIR / "condition-builder-switch.png"))

    # a rule typed into the Rules table comes back as rows of its case
    rule = form.locator('[data-field-wrap="rules"] .kv-row .kv-value').first
    rule.fill("=body.total <= 5")
    page.wait_for_function(
        "() => document.querySelector('.cond-builder[data-case=\"big\"] .cond-op').value === 'le'"
    )
    _wait_rule(page, "big", "=body.total <= 5")

    # a new case gets its builder; removing a case's last row removes its rule
    chips = form.locator('[data-field-wrap="cases"] .chip-input')
    chips.fill("other")
    chips.press("Enter")
    form.locator('.cond-builder[data-case="other"]').wait_for()
    de.locator(".cond-remove").click()
    page.wait_for_function(f"() => !('de' in ({RULES})())")


def _wait_config(page: Any, node_id: str, name: str, want: str) -> None:
    page.wait_for_function(
        "([id, name, want]) => window.railyardDesigner.model.node(id).config[name] === want",
        arg=[node_id, name, want],
    )


def test_filter_builder_on_item_fields_runs(page: Any, railyard_server: RailyardServer) -> None:
    """Items mapped by dropping a field on it; the builder then offers an item's fields,
    and the published Filter keeps what the rows say."""
    server = railyard_server
    api = api_client(server)
    item = {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "number"}}}
    hook = _hook(items={"type": "array", "items": item})
    keep = node("keep", "data.filter", 320)
    login(page, server)
    workflow_id = chain_draft(api, "Filter rows", hook, keep)
    form = open_settings(page, server, workflow_id, "keep")

    # Items: a dropped field makes it an expression mapping that field
    items_box = form.locator('[data-field-wrap="items"] .literal-control textarea')
    drag_field(page, form.locator('.drag-field[data-drag-path="body.items"]'), items_box)
    _wait_config(page, "keep", "items", "=body.items")

    builder = form.locator('[data-field-wrap="condition"] .cond-builder')
    page.wait_for_function(
        "() => [...document.querySelectorAll('[data-field-wrap=\"condition\"] datalist option')]"
        ".some((o) => o.value === 'qty')"
    )
    builder.locator(".cond-field").fill("qty")
    builder.locator(".cond-field").press("Tab")
    builder.locator(".cond-op").select_option("gt")
    builder.locator(".cond-value").fill("2")
    builder.locator(".cond-add").click()
    builder.locator(".cond-field").nth(1).fill("sku")
    builder.locator(".cond-field").nth(1).press("Tab")
    builder.locator(".cond-op").nth(1).select_option("starts")
    builder.locator(".cond-value").nth(1).fill("A")
    condition = 'qty > 2 and $substring(sku, 0, $length("A")) = "A"'
    _wait_config(page, "keep", "condition", condition)
    page.screenshot(path=str(ARTIFACTS_DIR / "condition-builder-filter.png"))

    publish(page)
    page.wait_for_function(
        "() => /Published version 1/.test(document.querySelector('#status').textContent)"
    )
    info = page.evaluate(f"() => fetch('/api/workflows/{workflow_id}').then(r => r.json())")
    sent = {
        "items": [
            {"sku": "A1", "qty": 3},
            {"sku": "B1", "qty": 9},
            {"sku": "A2", "qty": 1},
            {"sku": "A3", "qty": 5},
        ]
    }
    reply = httpx.post(info["webhook_url"], json=sent)
    assert reply.status_code == 202, reply.text
    run = wait_for_run(page, reply.json()["run_id"])
    assert run["status"] == "succeeded", run
    [step] = [s for s in run["steps"] if s["step_id"] == "keep"]
    assert step["output"]["items"] == [{"sku": "A1", "qty": 3}, {"sku": "A3", "qty": 5}]
    assert step["output"]["dropped"] == 2
