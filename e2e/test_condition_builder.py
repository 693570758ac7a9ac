"""The condition builder and its JSONata, both ways: rows write the expression (AND within
a group, OR between groups, typed operators by the field's type), the expression typed by
hand comes back as rows when it is in the builder's subset, and anything else is left as
written ("written by hand") until it is. Screenshot: condition-builder.png."""

from __future__ import annotations

from typing import Any

import pytest

from e2e.api_client import api_client, chain_draft, node
from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login
from e2e.designer_page import open_settings

pytestmark = pytest.mark.e2e

CONDITION = "=body.total > 100"


STORED = "() => (window.railyardDesigner.model.node('check').config.condition || '')"
"""JS: the stored condition (the leading "=" is optional on a condition: left out here)."""


def _condition(page: Any) -> str:
    return str(page.evaluate(STORED)).removeprefix("=")


def _wait_condition(page: Any, text: str) -> None:
    page.wait_for_function(f"want => ({STORED})().replace(/^=/, '') === want", arg=text)


def test_rows_and_jsonata_round_trip(page: Any, railyard_server: RailyardServer) -> None:
    server = railyard_server
    api = api_client(server)
    hook = node("hook", "trigger.webhook", 0)
    hook["config"] = {
        "body_schema": {
            "type": "object",
            "properties": {
                "total": {"type": "number"},
                "country": {"type": "string"},
                "vip": {"type": "boolean"},
            },
        }
    }
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
