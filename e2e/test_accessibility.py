"""Every page of the app has no serious or critical axe-core violation (WCAG 2.x A/AA and
axe's best practices; e2e/axe_check.py).

The admin's view of each page is checked (it shows the most controls), with data on it: a
published workflow with a finished run, a second version for the diff, a credential. The
designer is checked as it opens, with a node's settings open and with a Switch's condition
builder open; its trigger has pinned data, so a node carries a run note ("pinned"), which
axe's label-content-name-mismatch (e2e/axe_check.py runs it) wants in the node's name.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
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
    draft = api.get(f"/api/workflows/{wf}").json()["draft"]
    draft["nodes"][1]["label"] = "Shape the order"
    assert api.put(f"/api/workflows/{wf}/draft", json={"diagram": draft}).status_code == 200
    assert api.post(f"/api/workflows/{wf}/publish").status_code == 201
    # pinned data: the designer draws "pinned" under the trigger (a run note, part of the
    # node button's name)
    pinned = api.put(f"/api/v1/workflows/{wf}/pins/start", json={"data": {"qty": 2}})
    assert pinned.status_code in (200, 201), pinned.text
    run = api.post(f"/api/workflows/{wf}/runs", json={"input": {"qty": 2}}).json()
    credential = api.post(
        "/api/credentials", json={"name": "Shop key", "type": "api_key", "data": {"api_key": "k"}}
    )
    assert credential.status_code == 201, credential.text
    _wait_run(api, run["run_id"])
    return {"workflow": wf, "run": run["run_id"], "credential": credential.json()["id"]}


def _wait_run(api: httpx.Client, run_id: str) -> None:
    for _ in range(100):
        if api.get(f"/api/runs/{run_id}").json()["status"] in ("succeeded", "failed"):
            return
        time.sleep(0.1)


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
