"""Helpers of the integration tests that drive workflows through the API: publish a
diagram, start a run, read a run back, change workflow settings, read attempt rows and
step events, store a file of a workflow."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from sqlalchemy import text

from backend.db.models import StoredFile
from backend.runtime import Runtime


async def publish(client: httpx.AsyncClient, d: dict[str, Any]) -> dict[str, Any]:
    """Create a workflow named "Test", save ``d`` as its draft and publish it; the
    workflow JSON plus ``webhook_path`` (``/hooks/<token>``)."""
    wf = (await client.post("/api/workflows", json={"name": "Test"})).json()
    r = await client.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": d})
    assert r.json()["ok"], r.json()
    r = await client.post(f"/api/workflows/{wf['id']}/publish")
    assert r.status_code == 201, r.text
    return {**wf, "webhook_path": "/hooks/" + r.json()["webhook_url"].rsplit("/hooks/", 1)[1]}


async def run_detail(client: httpx.AsyncClient, run_id: str) -> dict[str, Any]:
    """``GET /api/runs/<id>`` (asserting 200)."""
    r = await client.get(f"/api/runs/{run_id}")
    assert r.status_code == 200, r.text
    return r.json()


def steps_by_id(detail: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A run detail's steps keyed by step id."""
    return {s["step_id"]: s for s in detail["steps"]}


async def start_manual(client: httpx.AsyncClient, wf: dict[str, Any], data: Any) -> str:
    """Start a run of ``wf`` with input ``data`` through the API; its id."""
    r = await client.post(f"/api/workflows/{wf['id']}/runs", json={"input": data})
    assert r.status_code == 201, r.text
    return str(r.json()["run_id"])


async def set_settings(client: httpx.AsyncClient, wf: dict[str, Any], **settings: Any) -> Any:
    """PATCH ``wf``'s settings; the stored settings."""
    r = await client.patch(f"/api/workflows/{wf['id']}", json={"settings": settings})
    assert r.status_code == 200, r.text
    return r.json()["settings"]


async def attempt_rows(runtime: Runtime, run_id: str) -> list[tuple[Any, ...]]:
    """``(step_id, number, status, error kind)`` of every attempt of the run."""
    async with runtime.engine.connect() as conn:
        rows = await conn.execute(
            text(
                "select step_id, number, status, error->>'kind' from attempts"
                " where run_id = :id order by step_id, number"
            ),
            {"id": run_id},
        )
        return [tuple(r) for r in rows]


async def step_attempts(runtime: Runtime, run_id: str, step_id: str) -> list[tuple[Any, ...]]:
    """``(number, status, error kind, worker)`` of the attempts of ``step_id``."""
    async with runtime.engine.connect() as conn:
        rows = await conn.execute(
            text(
                "select number, status, error->>'kind', worker from attempts"
                " where run_id = :id and step_id = :s order by number"
            ),
            {"id": run_id, "s": step_id},
        )
        return [tuple(r) for r in rows]


async def event_kinds(runtime: Runtime, run_id: str, step_id: str) -> list[str]:
    """The kinds of the events of ``step_id`` in run ``run_id``, oldest first."""
    async with runtime.engine.connect() as conn:
        rows = await conn.execute(
            text("select kind from events where run_id = :id and step_id = :s order by id"),
            {"id": run_id, "s": step_id},
        )
        return [r[0] for r in rows]


async def stored_file(runtime: Runtime, workflow_id: str) -> str:
    """The id of a one-byte text file stored for workflow ``workflow_id``."""
    async with runtime.sessionmaker() as session, session.begin():
        f = StoredFile(
            workflow_id=uuid.UUID(workflow_id),
            filename="a.txt",
            content_type="text/plain",
            size=1,
            sha256="0" * 64,
            content=b"a",
        )
        session.add(f)
        await session.flush()
        return str(f.id)
