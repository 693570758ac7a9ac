"""Driving a running Railyard through its API from browser tests, with railyard-client
(clients/python): an admin client, a node, a published chain of nodes, a saved draft."""

from __future__ import annotations

import itertools
from typing import Any

from railyard_client import Client

from e2e.conftest import RailyardServer


def api_client(server: RailyardServer) -> Client:
    """A client logged in as the admin (session cookie and CSRF header); its typed
    methods and its raw ``get``/``post``/... (answers as they are) reach ``/api/v1``."""
    api = Client(server.base_url, timeout=15)
    api.login(server.email, server.password)
    return api


def node(node_id: str, node_type: str, x: int, **config: Any) -> dict[str, Any]:
    return {
        "id": node_id,
        "type": node_type,
        "label": node_id,
        "position": {"x": x, "y": 0},
        "config": config,
    }


def chain(*nodes: dict[str, Any]) -> dict[str, Any]:
    """A diagram of ``nodes`` joined one after the other (the first a trigger)."""
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
    return {
        "nodes": list(nodes),
        "edges": edges,
        "viewport": {"x": 0, "y": 0, "zoom": 1},
        "schema_version": 1,
    }


def publish(api: Client, name: str, *nodes: dict[str, Any]) -> str:
    """Publish a chain of ``nodes`` (the first a trigger) as workflow ``name``; its id."""
    wf = api.create_workflow(name)
    saved = api.save_draft(wf.id, chain(*nodes))
    assert saved.ok, saved.diagnostics
    api.publish(wf.id)
    return wf.id


def chain_draft(api: Client, name: str, *nodes: dict[str, Any]) -> str:
    """Create workflow ``name`` whose draft chains ``nodes`` (the first a trigger), saved
    but not published; its id."""
    edges = [
        {"id": f"e{i}", "source": a["id"], "target": b["id"]}
        for i, (a, b) in enumerate(itertools.pairwise(nodes))
    ]
    wf = api.create_workflow(name)
    api.save_draft(wf.id, {"nodes": list(nodes), "edges": edges, "schema_version": 1})
    return wf.id
