"""Case ``secrets-in-request-urls``: a credential placed in the query string never reaches
run data (issue 29, finding 1).

An API-key credential sent as ``?key=<secret>`` by an HTTP Request step used to come back
in the step's output (``url``), so any reader of the run saw it: the run API and page, an
expression preview over the step, the step and attempt rows. The rule
(connectors/sdk/redaction.py) replaces a credential's secrets, in every form and every
placement, wherever an attempt's output, error and log lines are built; the other
placements (header, Basic, bearer) and a remote echoing the request back are checked here
too, cookies, body fields and OAuth2 tokens in tests/unit/connectors/test_redaction.py.
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from backend.runtime import Runtime
from backend.settings import Settings
from connectors.sdk.redaction import REDACTED, SecretsLogFilter
from tests.diagrams import diagram, edge, node
from tests.http_sink import HttpSink, Recorded
from tests.integration.conftest import wait_for_run
from tests.integration.flows import publish, run_detail, steps_by_id
from tests.integration.rbac import client_as, grant, make_user

pytestmark = pytest.mark.integration

QUERY_KEY = "sk-query-5d1e/+9b?&="  # characters a URL encodes, so the encoded form counts
HEADER_KEY = "hk-header-0a77c3e1"
PASSWORD = "pw-basic-61f0aa29"
BEARER = "tok-bearer-93c2d8b4"
ALL = (QUERY_KEY, HEADER_KEY, PASSWORD, BEARER)


def _echo(request: Recorded, call: int) -> tuple[int, Any]:
    """A remote that sends the request back (path with query string, headers, body);
    the second call to ``/fail`` fails (an error naming the URL)."""
    status = 500 if request.path.startswith("/fail") else 200
    return status, {"path": request.path, "headers": request.headers, "call": call}


@pytest.fixture
def logged() -> Iterator[list[str]]:
    """Every log line written meanwhile, through the filter the processes install."""
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler = Keep(logging.DEBUG)
    handler.addFilter(SecretsLogFilter())
    root, httpx_logger = logging.getLogger(), logging.getLogger("httpx")
    old_levels = root.level, httpx_logger.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    httpx_logger.setLevel(logging.DEBUG)  # httpx logs each request's URL at INFO
    try:
        yield lines
    finally:
        root.removeHandler(handler)
        root.setLevel(old_levels[0])
        httpx_logger.setLevel(old_levels[1])


async def _credential(client: httpx.AsyncClient, ctype: str, data: dict[str, Any]) -> str:
    r = await client.post("/api/credentials", json={"name": ctype, "type": ctype, "data": data})
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def _rows(runtime: Runtime) -> str:
    """The run data PostgreSQL holds (runs, steps, attempts, events, large values)."""
    async with runtime.engine.connect() as conn:
        found = []
        for table in ("runs", "step_runs", "attempts", "events", "payloads"):
            result = await conn.execute(text(f"select row_to_json(x)::text from {table} x"))
            found.extend(row for (row,) in result)
    return "\n".join(found)


async def test_secrets_in_request_urls(
    client: httpx.AsyncClient,
    settings: Settings,
    runtime: Runtime,
    worker: Any,
    sink: HttpSink,
    logged: list[str],
) -> None:
    sink.handler = _echo
    query = await _credential(
        client, "api_key", {"api_key": QUERY_KEY, "placement": "query", "name": "key"}
    )
    header = await _credential(client, "api_key", {"api_key": HEADER_KEY, "name": "X-Key"})
    basic = await _credential(client, "basic", {"username": "ada", "password": PASSWORD})
    bearer = await _credential(client, "bearer", {"token": BEARER})
    steps = [
        node(
            "q", "http.request", url=f"{sink.url}/v1/items", query={"page": "1"}, credential=query
        ),
        node("h", "http.request", url=f"{sink.url}/v1/h", credential=header),
        node("b", "http.request", url=f"{sink.url}/v1/b", credential=basic),
        node("t", "http.request", url=f"{sink.url}/v1/t", credential=bearer),
        node("f", "http.request", url=f"{sink.url}/fail", credential=query),
    ]
    ids = ["hook", *(s["id"] for s in steps)]
    wf = await publish(
        client,
        diagram(
            [node("hook", "trigger.webhook"), *steps],
            [edge(a, b) for a, b in itertools.pairwise(ids)],
        ),
    )
    r = await client.post(wf["webhook_path"], json={"order": 1})
    assert r.status_code == 202, r.text
    run_id = r.json()["run_id"]
    assert await wait_for_run(runtime, run_id) == "failed"  # the last step's 500

    # the remote got every secret where the credential puts it
    sent = [(rec.path, rec.headers) for rec in sink.requests]
    assert any("key=sk-query-5d1e%2F%2B9b%3F%26%3D" in path for path, _ in sent), sent
    assert any(h.get("x-key") == HEADER_KEY for _, h in sent)
    assert any(h.get("authorization") == f"Bearer {BEARER}" for _, h in sent)

    # a user who may only read the workflow sees none of them, anywhere
    reader = await make_user(runtime, "reader@example.com", "viewer")
    await grant(runtime, "workflow", wf["id"], f"user:{reader}", "read")
    async with client_as(settings, runtime, "reader@example.com") as viewer:
        detail = await run_detail(viewer, run_id)
        by_step = steps_by_id(detail)
        page = (await viewer.get(f"/runs/{run_id}")).text
        preview = await viewer.post(
            f"/api/workflows/{wf['id']}/expressions/preview",
            json={
                "diagram": (await viewer.get(f"/api/workflows/{wf['id']}")).json()["draft"],
                "node_id": "f",
                "expression": "=$steps",
            },
        )
        found = await viewer.get("/api/search", params={"q": "items"})
        version = f"/api/workflows/{wf['id']}/versions/{detail['version_number']}"
        pinned = (await viewer.get(version)).json()
        seen = {
            "run API": json.dumps(detail),
            "run page": page,
            "expression preview": preview.text,
            "search": found.text,
            "stored rows": await _rows(runtime),
            "logs": "\n".join(logged),
        }
    leaks = [(where, s) for where, text_ in seen.items() for s in ALL if s in text_]
    leaks += [
        (where, QUERY_KEY)
        for where, text_ in seen.items()
        if "sk-query-5d1e%2F" in text_ or "sk-query-5d1e/+9b" in text_
    ]
    assert leaks == [], leaks

    # where the URL is shown, the value is replaced by the mark; the step names its credential
    output = by_step["q"]["output"]
    assert output["url"] == f"{sink.url}/v1/items?page=1&key={REDACTED}", output["url"]
    assert output["body"]["path"] == f"/v1/items?page=1&key={REDACTED}"  # the remote's echo
    assert by_step["h"]["output"]["body"]["headers"]["x-key"] == REDACTED
    assert by_step["b"]["output"]["body"]["headers"]["authorization"] == f"Basic {REDACTED}"
    assert by_step["t"]["output"]["body"]["headers"]["authorization"] == f"Bearer {REDACTED}"
    error = by_step["f"]["error"]
    assert error["kind"] == "http_500" and f"key={REDACTED}" in json.dumps(error), error
    # which credential the step used: its node in the version the run pins names it
    assert [n["config"]["credential"] for n in pinned["diagram"]["nodes"] if n["id"] == "q"] == [
        query
    ]
    assert preview.status_code == 200, preview.text
