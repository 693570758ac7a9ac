"""Driving a running Railyard through its API from browser tests: an admin client, a node
and a published chain of nodes."""

from __future__ import annotations

import itertools
from typing import Any

import httpx

from e2e.conftest import RailyardServer


def api_client(server: RailyardServer) -> httpx.Client:
    """An API client logged in as the admin (session cookie and CSRF header)."""
    api = httpx.Client(base_url=server.base_url, timeout=15)
    api.get("/login")
    api.headers["x-csrftoken"] = api.cookies["csrftoken"]
    r = api.post("/api/auth/login", json={"email": server.email, "password": server.password})
    assert r.status_code == 200, r.text
    return api


def node(node_id: str, node_type: str, x: int, **config: Any) -> dict[str, Any]:
    return {
        "id": node_id,
        "type": node_type,
        "label": node_id,
        "position": {"x": x, "y": 0},
        "config": config,
    }


def publish(api: httpx.Client, name: str, *nodes: dict[str, Any]) -> str:
    """Publish a chain of ``nodes`` (the first a trigger) as workflow ``name``."""
    edges = [
        {
            "id": f"e{i}",
            "source": a["id"],
            "source_port": "out",
            "target": b["id"],
            "target_port": "in",
        }
        for i, (a, b) in enumerate(itertools.pairwise(nodes))
    ]
    diagram = {
        "nodes": list(nodes),
        "edges": edges,
        "viewport": {"x": 0, "y": 0, "zoom": 1},
        "schema_version": 1,
    }
    wf = api.post("/api/workflows", json={"name": name}).json()
    assert api.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": diagram}).json()["ok"]
    assert api.post(f"/api/workflows/{wf['id']}/publish").status_code == 201
    return str(wf["id"])


def chain_draft(api: httpx.Client, name: str, *nodes: dict[str, Any]) -> str:
    """Create workflow ``name`` whose draft chains ``nodes`` (the first a trigger), saved
    but not published; its id."""
    edges = [
        {"id": f"e{i}", "source": a["id"], "target": b["id"]}
        for i, (a, b) in enumerate(itertools.pairwise(nodes))
    ]
    diagram = {"nodes": list(nodes), "edges": edges, "schema_version": 1}
    wf = api.post("/api/workflows", json={"name": name}).json()
    saved = api.put(f"/api/workflows/{wf['id']}/draft", json={"diagram": diagram})
    assert saved.status_code == 200, saved.text
    return str(wf["id"])
