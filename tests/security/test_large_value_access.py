"""Case ``large-value-access``: a stored large value is readable only through a run the
reader may read that holds it (issue 29, finding 2).

The check that a run holds a value was a text match on the digest in the run's columns,
and a body holding the engine's by-reference wrapper was followed when read back: an
editor without any grant put the admin's digest in their own webhook body, as text or in
a forged wrapper, and downloaded 300 kB of the admin's data through their own run (or
had their steps send it on), after a grant was revoked too. Now references are the
engine's own typed wrapper only (a forged one is stored escaped, as data), and a value is
served only when the run's columns really reference it, to a reader the guard lets read
that run at the time of the request.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from backend.db.payloads import MARKER
from backend.runtime import Runtime
from backend.settings import Settings
from tests.diagrams import diagram, edge, node
from tests.http_sink import HttpSink
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, run_detail
from tests.integration.rbac import client_as, grant, make_user, revoke

pytestmark = pytest.mark.integration

ADMIN_DATA = "ADMIN-ONLY-" + "q" * 300 * 1024  # over the inline limit: kept by reference


def _digest(detail: dict[str, Any]) -> str:
    found = re.search(r"/values/([0-9a-f]{64})", str(detail))
    assert found, "the admin's run must offer its large input for download"
    return found[1]


async def test_large_value_access(
    client: httpx.AsyncClient, settings: Settings, runtime: Runtime, worker: Any, sink: HttpSink
) -> None:
    admin_wf = await publish(client, diagram([node("hook", "trigger.webhook")], []))
    r = await client.post(admin_wf["webhook_path"], json={"secret": ADMIN_DATA})
    admin_run = r.json()["run_id"]
    assert await wait_for_run(runtime, admin_run) == "succeeded"
    digest = _digest(await run_detail(client, admin_run))
    own_download = await client.get(f"/api/runs/{admin_run}/values/{digest}")
    assert own_download.status_code == 200 and ADMIN_DATA in own_download.text

    editor = await make_user(runtime, "ed@example.com", "editor")
    async with client_as(settings, runtime, "ed@example.com") as ed:
        # the editor's own workflow: its input copied by a Set, then sent to the editor's
        # endpoint (what the engine reads back is what a step can pass on)
        own = await publish(
            ed,
            diagram(
                [
                    node("hook", "trigger.webhook"),
                    node("copy", "control.set", mapping={"got": "=body"}),
                    node("send", "http.request", method="POST", url=sink.url, body="=got"),
                ],
                [edge("hook", "copy"), edge("copy", "send")],
            ),
        )
        forged = {MARKER: digest, "bytes": len(ADMIN_DATA) + 2}
        bodies = [
            {"note": f"see {digest}", "id": digest},  # (a) the digest as text
            {"value": forged},  # (b) the engine's own wrapper, forged
            forged,  # (b) the whole body a wrapper
            {"deep": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[forged]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]},
        ]
        answers = []
        for body in bodies:
            r = await ed.post(own["webhook_path"], json=body)
            assert r.status_code == 202, r.text
            run_id = r.json()["run_id"]
            assert await wait_for_run(runtime, run_id) == "succeeded"
            detail = await run_detail(ed, run_id)
            answers.append(await ed.get(f"/api/runs/{run_id}/values/{digest}"))
            answers.append(await ed.get(f"/api/runs/{admin_run}/values/{digest}"))
            # every large value the editor's own run offers gives back what was sent
            for own_digest in set(re.findall(r"/values/([0-9a-f]{64})", str(detail))):
                mine = await ed.get(f"/api/runs/{run_id}/values/{own_digest}")
                assert mine.status_code == 200 and "ADMIN-ONLY" not in mine.text
            assert "ADMIN-ONLY" not in str(detail)
        for answer in answers:
            assert answer.status_code == 404, answer.text
            assert "ADMIN-ONLY" not in answer.text
        assert [rec.json() for rec in sink.requests] == bodies  # passed on as data

        # a grant lets the editor read the admin's run and its value; revoked, it stops
        granted = await grant(runtime, "workflow", admin_wf["id"], f"user:{editor}", "read")
        allowed = await ed.get(f"/api/runs/{admin_run}/values/{digest}")
        assert allowed.status_code == 200 and ADMIN_DATA in allowed.text
        await revoke(runtime, "workflow", admin_wf["id"], granted)
        after = await ed.get(f"/api/runs/{admin_run}/values/{digest}")
        assert after.status_code == 404 and "ADMIN-ONLY" not in after.text
