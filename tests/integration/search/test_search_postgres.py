"""Search on PostgreSQL through ``/api/search``: every run filter, the facets, sorts and
cursor pages, the query syntax's errors, workflows and the audit log."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from backend.runtime import Runtime
from tests.integration.search.data import make_run, make_workflow

pytestmark = pytest.mark.integration


async def search(client: httpx.AsyncClient, q: str, **params: Any) -> dict[str, Any]:
    r = await client.get("/api/search", params={"q": q, **params})
    assert r.status_code == 200, r.text
    return r.json()


def ids(result: dict[str, Any]) -> set[str]:
    return {h["id"] for h in result["hits"]}


def facet(result: dict[str, Any], name: str) -> dict[str, int]:
    found = next(f for f in result["facets"] if f["field"] == name)
    return {v["value"]: v["count"] for v in found["values"]}


@pytest.fixture
async def runs(client: httpx.AsyncClient, runtime: Runtime) -> dict[str, Any]:
    orders = await make_workflow(runtime, "Order intake", tags=["billing", "shop"])
    mail = await make_workflow(runtime, "Mail digest", tags=["email"])
    made = {
        "orders": str(orders),
        "mail": str(mail),
        "ok": await make_run(
            runtime,
            orders,
            input={"customer": "cust-4711", "email": "ada@acme.example"},
            output={"total": 150},
            minutes=1,
            duration_s=2,
            steps=("webhook", "set_total"),
        ),
        "failed": await make_run(
            runtime,
            orders,
            status="failed",
            input={"customer": "cust-9000", "note": "rush order please"},
            error={"message": "HTTP 504 gateway timeout from billing API"},
            minutes=2,
            duration_s=30,
            steps=("webhook", "send_invoice"),
            version=2,
        ),
        "timed_out": await make_run(
            runtime,
            mail,
            status="timed_out",
            trigger="schedule",
            input={"batch": 7},
            error={"message": "run timed out after 60 s"},
            minutes=3,
            duration_s=60,
        ),
        "manual": await make_run(
            runtime, mail, trigger="manual", input={"customer": "cust-4711"}, minutes=4
        ),
    }
    return {k: str(v) for k, v in made.items()}


async def test_search_free_text_finds_values_inside_inputs(
    client: httpx.AsyncClient, runs: dict[str, Any]
) -> None:
    assert ids(await search(client, "cust-9000")) == {runs["failed"]}
    assert ids(await search(client, "cust-4711")) == {runs["ok"], runs["manual"]}
    assert ids(await search(client, "ADA@ACME.EXAMPLE")) == {runs["ok"]}
    # a phrase needs its words adjacent and in order
    assert ids(await search(client, '"rush order"')) == {runs["failed"]}
    assert ids(await search(client, '"order rush"')) == set()
    # errors and outputs are searched too; -term excludes
    assert ids(await search(client, "timeout")) == {runs["failed"]}
    assert ids(await search(client, "150")) == {runs["ok"]}
    assert ids(await search(client, "cust-4711 -ada@acme.example")) == {runs["manual"]}
    hit = (await search(client, "cust-9000"))["hits"][0]
    assert "cust-9000" in hit["snippet"]
    assert hit["url"].endswith(f"/runs/{runs['failed']}?search=cust-9000")  # absolute


async def test_search_every_run_filter(client: httpx.AsyncClient, runs: dict[str, Any]) -> None:
    assert ids(await search(client, "status:failed")) == {runs["failed"]}
    assert ids(await search(client, "status:failed,timed_out")) == {
        runs["failed"],
        runs["timed_out"],
    }
    assert ids(await search(client, "-status:succeeded")) == {runs["failed"], runs["timed_out"]}
    assert ids(await search(client, 'workflow:"order intake"')) == {runs["ok"], runs["failed"]}
    assert ids(await search(client, f"workflow:{runs['mail']}")) == {
        runs["timed_out"],
        runs["manual"],
    }
    assert ids(await search(client, "tag:billing")) == {runs["ok"], runs["failed"]}
    assert ids(await search(client, "-tag:billing")) == {runs["timed_out"], runs["manual"]}
    assert ids(await search(client, "trigger:schedule")) == {runs["timed_out"]}
    assert ids(await search(client, "trigger:manual,schedule")) == {
        runs["timed_out"],
        runs["manual"],
    }
    assert ids(await search(client, "version:2")) == {runs["failed"]}
    assert ids(await search(client, "step:send_invoice")) == {runs["failed"]}
    assert ids(await search(client, "step:webhook -step:send_invoice")) == {runs["ok"]}
    assert ids(await search(client, 'error:"timed out"')) == {runs["timed_out"]}
    assert ids(await search(client, f"id:{runs['manual']}")) == {runs["manual"]}
    # time window: created at T0 + 1..4 minutes (2026-11-01 12:01..12:04 UTC)
    assert ids(await search(client, "after:2026-11-01T12:03")) == {
        runs["timed_out"],
        runs["manual"],
    }
    assert ids(await search(client, "before:2026-11-01T12:02")) == {runs["ok"]}
    assert ids(await search(client, "after:2026-11-01T12:02+00:00 before:2026-11-01T12:04")) == {
        runs["failed"],
        runs["timed_out"],
    }
    assert ids(await search(client, "since:24h")) == set()  # all are a month old
    # the example: every clause at once
    assert ids(
        await search(client, 'status:failed workflow:"Order intake" tag:billing "timeout"')
    ) == {runs["failed"]}


async def test_search_facets_count_every_match(
    client: httpx.AsyncClient, runs: dict[str, Any]
) -> None:
    result = await search(client, "")
    assert result["total"] == 4 and result["total_exact"]
    assert facet(result, "status") == {"succeeded": 2, "failed": 1, "timed_out": 1}
    assert facet(result, "trigger") == {"webhook": 2, "schedule": 1, "manual": 1}
    assert facet(result, "tag") == {"billing": 2, "shop": 2, "email": 2}
    wf = next(f for f in result["facets"] if f["field"] == "workflow")
    assert {(v["label"], v["count"]) for v in wf["values"]} == {
        ("Order intake", 2),
        ("Mail digest", 2),
    }
    narrowed = await search(client, "cust-4711")
    assert narrowed["total"] == 2
    assert facet(narrowed, "status") == {"succeeded": 2}


async def test_search_sorts_and_cursor_pages(
    client: httpx.AsyncClient, runs: dict[str, Any]
) -> None:
    newest = [h["id"] for h in (await search(client, ""))["hits"]]
    assert newest == [runs["manual"], runs["timed_out"], runs["failed"], runs["ok"]]
    oldest = [h["id"] for h in (await search(client, "sort:oldest"))["hits"]]
    assert oldest == newest[::-1]
    longest = [h["id"] for h in (await search(client, "", sort="duration"))["hits"]]
    assert longest[:3] == [runs["timed_out"], runs["failed"], runs["ok"]]
    seen: list[str] = []
    cursor = None
    for _ in range(5):
        params = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        page = await search(client, "sort:oldest", **params)
        seen += [h["id"] for h in page["hits"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == oldest
    relevance = await search(client, "cust-4711", sort="relevance", limit=1)
    second = await search(
        client, "cust-4711", sort="relevance", limit=1, cursor=relevance["next_cursor"]
    )
    assert ids(relevance) | ids(second) == {runs["ok"], runs["manual"]}
    assert second["next_cursor"] is None


@pytest.mark.parametrize(
    ("q", "position", "says"),
    [
        ('status:failed "timeout', 14, "unterminated quote"),
        ("stauts:failed", 0, "did you mean status:"),
        ("status:", 7, "status: needs a value"),
        ("status:broken", 0, "'broken' is not a run status"),
        ("after:yesterday", 0, "not a time"),
        ("type:slack.post_message", 0, "searches workflows"),
        ("version:two", 0, "version number"),
        ("sort:loudest", 0, "does not sort runs"),
        ("in:logs", 0, "in: is one of"),
    ],
)
async def test_search_query_syntax_errors(
    client: httpx.AsyncClient, q: str, position: int, says: str
) -> None:
    r = await client.get("/api/search", params={"q": q})
    assert r.status_code == 400, r.text
    body = r.json()
    assert says in body["detail"] and body["field"] == "q"
    assert body["position"] == position


async def test_search_refuses_foreign_cursors_and_limits(
    client: httpx.AsyncClient, runs: dict[str, Any]
) -> None:
    page = await search(client, "", limit=1)
    r = await client.get("/api/search", params={"q": "sort:oldest", "cursor": page["next_cursor"]})
    assert r.status_code == 400 and r.json()["field"] == "cursor"
    r = await client.get("/api/search", params={"cursor": "not-a-cursor!"})
    assert r.status_code == 400 and r.json()["field"] == "cursor"
    r = await client.get("/api/search", params={"limit": 0})
    assert r.status_code == 400 and r.json()["field"] == "limit"
    r = await client.get("/api/search", params={"in": "logs"})
    assert r.status_code == 400 and r.json()["field"] == "in"


async def test_search_workflows_by_fuzzy_name_tag_and_node_type(
    client: httpx.AsyncClient, runtime: Runtime
) -> None:
    orders = await make_workflow(
        runtime,
        "Order intake",
        tags=["billing"],
        description="takes shop orders",
        node_types=["trigger.webhook", "http.request"],
    )
    slack = await make_workflow(
        runtime,
        "Slack alerts",
        tags=["ops"],
        node_types=["trigger.schedule", "slack.post_message"],
    )
    assert ids(await search(client, "ordr intake", **{"in": "workflows"})) == {str(orders)}
    assert ids(await search(client, "in:workflows alerts")) == {str(slack)}
    assert ids(await search(client, "in:workflows shop")) == {str(orders)}  # description
    assert ids(await search(client, "in:workflows tag:ops")) == {str(slack)}
    assert ids(await search(client, "in:workflows type:slack.post_message")) == {str(slack)}
    assert ids(await search(client, "in:workflows published:yes")) == {str(orders), str(slack)}
    result = await search(client, "in:workflows")
    assert facet(result, "tag") == {"billing": 1, "ops": 1}
    assert facet(result, "type")["trigger.webhook"] == 1
    assert [h["title"] for h in result["hits"]] == ["Order intake", "Slack alerts"]
    assert result["hits"][0]["url"].endswith(f"/workflows/{orders}/designer")


async def test_search_audit_log(client: httpx.AsyncClient, runtime: Runtime) -> None:
    await make_workflow(runtime, "Order intake")
    r = await client.patch(
        f"/api/workflows/{(await search(client, 'in:workflows'))['hits'][0]['id']}",
        json={"tags": ["Billing", "billing", "EU"]},
    )
    assert r.status_code == 200 and r.json()["tags"] == ["billing", "eu"]
    result = await search(client, "in:audit action:workflow")
    assert {h["detail"]["action"] for h in result["hits"]} == {
        "workflow.create",
        "workflow.update",
    }
    assert facet(result, "object") == {"workflow": 2}
    tagged = await search(client, "in:audit eu")
    assert [h["detail"]["action"] for h in tagged["hits"]] == ["workflow.update"]
    assert ids(await search(client, "in:audit action:workflow.update")) == ids(tagged)


async def test_workflow_tags_are_checked(client: httpx.AsyncClient) -> None:
    wf = (await client.post("/api/workflows", json={"name": "T", "tags": ["a"]})).json()
    assert wf["tags"] == ["a"]
    r = await client.patch(f"/api/workflows/{wf['id']}", json={"tags": [" No Spaces! ", "", "-"]})
    assert r.status_code == 200 and r.json()["tags"] == ["no-spaces"], r.text
    r = await client.patch(f"/api/workflows/{wf['id']}", json={"tags": ["x"] * 21})
    assert r.status_code == 400 and r.json()["field"].startswith("tags"), r.text
