"""Every page of the app has no serious or critical axe-core violation (WCAG 2.x A/AA and
axe's best practices; e2e/axe_check.py).

The admin's view of each page is checked (it shows the most controls), with data on it: a
published workflow with a finished run, a second version for the diff, a credential. The
designer is checked as it opens, with a node's settings open and with a Switch's condition
builder open; its trigger has pinned data, so a node carries a run note ("pinned"), which
axe's label-content-name-mismatch (e2e/axe_check.py runs it) wants in the node's name.
"""

from __future__ import annotations

from typing import Any

import pytest

from e2e.api_client import api_client, node, publish
from e2e.axe_check import axe_violations, describe
from e2e.conftest import RailyardServer, login

pytestmark = pytest.mark.e2e


def _data(server: RailyardServer) -> dict[str, str]:
    api = api_client(server)
    # below the Set, in view: a node the settings panel half covers shows only some of
    # its texts, which axe then finds missing from the name's word order
    route = node("route", "control.switch", 320, cases=["big"], rules={"big": "=total > 2"})
    route["position"] = {"x": 320, "y": 140}
    wf = publish(
        api,
        "Accessible orders",
        node("start", "trigger.manual", 0),
        node("shape", "control.set", 320, mapping=[{"name": "total", "value": "=qty * 2"}]),
        route,
    )
    draft = api.get_workflow(wf).draft
    assert draft is not None
    draft["nodes"][1]["label"] = "Shape the order"
    api.save_draft(wf, draft)
    api.publish(wf)
    # pinned data: the designer draws "pinned" under the trigger (a run note, part of the
    # node button's name)
    pinned = api.put(f"/api/v1/workflows/{wf}/pins/start", json={"data": {"qty": 2}})
    assert pinned.status_code in (200, 201), pinned.text
    run = api.start_run(wf, {"qty": 2})
    credential = api.create_credential("Shop key", "api_key", {"api_key": "k"})
    api.wait_for_run(run.id, timeout=30)
    return {"workflow": wf, "run": run.id, "credential": credential.id}


PAGES = [
    "/workflows",
    "/workflows?archived=true",
    "/runs",
    "/runs/{run}",
    "/credentials",
    "/credentials/{credential}/access",
    "/catalog",
    "/tokens",
    "/account",
    "/search?q=orders",
    "/admin/dashboard",
    "/admin/users",
    "/admin/sessions",
    "/admin/groups",
    "/admin/projects",
    "/admin/tokens",
    "/admin/audit",
    "/admin/settings",
    "/admin/connectors",
    "/workflows/{workflow}/designer",
    "/workflows/{workflow}/versions",
    "/workflows/{workflow}/compare?from=1&to=2",
    "/workflows/{workflow}/deliveries",
    "/workflows/{workflow}/access",
    "/workflows/{workflow}/trigger",
]


def test_no_page_has_a_serious_or_critical_violation(
    page: Any, railyard_server: RailyardServer
) -> None:
    server = railyard_server
    page.goto(f"{server.base_url}/login")
    failures = {}
    found = axe_violations(page)
    if found:
        failures["/login"] = found
    data = _data(server)
    login(page, server)
    for path in PAGES:
        url = server.base_url + path.format(**data)
        page.goto(url)
        page.wait_for_load_state("networkidle")
        found = axe_violations(page)
        if found:
            failures[path] = found
    # the designer with a node's settings open (and a run note under the pinned trigger)
    page.goto(f"{server.base_url}/workflows/{data['workflow']}/designer")
    page.locator('#canvas g.node[data-node-id="start"] text.node-run-note').wait_for()
    page.locator('#canvas g.node[data-node-id="shape"]').click()
    page.locator('#config-panel .config-form[data-node-id="shape"]').wait_for()
    page.locator("#config-panel .drag-fields").wait_for()  # the input fields, from the run
    found = axe_violations(page)
    if found:
        failures["designer with settings"] = found
    # ... and with the condition builder of a Switch's case
    page.locator('#canvas g.node[data-node-id="route"]').click()
    page.locator('#config-panel .cond-builder[data-case="big"] .cond-row').wait_for()
    found = axe_violations(page)
    if found:
        failures["designer with a condition builder"] = found
    report = "\n\n".join(f"{path}:\n{describe(v)}" for path, v in failures.items())
    assert not failures, report
