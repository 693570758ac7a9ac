"""The workflows bench/triggers.py publishes: ``<trigger> -> Set``, under a fresh admin."""

from __future__ import annotations

import time
from typing import Any


def diagram(trigger: str, config: dict[str, Any]) -> dict[str, Any]:
    """``trigger`` (with ``config``) -> Set."""

    def node(nid: str, ntype: str, x: int, **cfg: Any) -> dict[str, Any]:
        return {"id": nid, "type": ntype, "label": nid, "position": {"x": x, "y": 0}, "config": cfg}

    return {
        "nodes": [
            node("event", trigger, 0, **config),
            node("note", "control.set", 200, mapping={"seen": "=message_id"}),
        ],
        "edges": [
            {
                "id": "event-note",
                "source": "event",
                "source_port": "out",
                "target": "note",
                "target_port": "in",
            }
        ],
        "viewport": {"x": 0, "y": 0, "zoom": 1},
        "schema_version": 1,
    }


async def publish_workflows(env: dict[str, str], diagrams: list[dict[str, Any]]) -> list[str]:
    """Create an admin and publish each diagram as a workflow; their ids, in order."""
    import msgspec

    from backend.runtime import build_runtime
    from backend.services.identity import accounts
    from backend.services.workflows import workflows
    from backend.settings import load_settings
    from designer_schema.diagram import Diagram

    settings = load_settings(environ=env)
    rt = await build_runtime(settings, pool_size=2)
    ids = []
    try:
        async with rt.sessionmaker() as session, session.begin():
            user = await accounts.create_user(
                session, f"bench{time.time_ns()}@example.com", "bench-password-123", role="admin"
            )
        for i, d in enumerate(diagrams):
            async with rt.sessionmaker() as session, session.begin():
                wf = await workflows.create_workflow(session, f"trigger bench {i}", user.id)
                await workflows.save_draft(session, wf.id, msgspec.convert(d, Diagram), rt.catalog)
                await workflows.publish(session, wf.id, rt.catalog, user.id)
                ids.append(str(wf.id))
        return ids
    finally:
        await rt.close()
