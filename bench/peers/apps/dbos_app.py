"""The 3-step scenario as a DBOS Transact workflow, behind a bare ASGI app under uvicorn.

Runs in the harness's own environment (.bench-peers/venv, ``dbos``), not in Railyard's:
``uvicorn --host 127.0.0.1 --port <port> dbos_app:app`` with ``DBOS_DATABASE_URL`` (its own
database on the harness's PostgreSQL) and ``DBOS_EXECUTOR`` (one id per process). A POST
runs the workflow ``three_steps`` to its end and answers ``{"text": ...}``, the last step's
output. DBOS checkpoints the workflow's start, each step's output and its end in
PostgreSQL, each in its own transaction, before going on.

A POST to ``/start`` (the fire-and-forget shape) starts the same workflow with
``DBOS.start_workflow_async`` and answers 202 with its id once DBOS has stored the start
(the workflow's status row); the workflow runs on in the process, and the harness counts
its end in ``dbos.workflow_status``.
"""

from __future__ import annotations

import json
import os
from typing import Any

from dbos import DBOS, DBOSConfig

config: DBOSConfig = {
    "name": "peers",
    "system_database_url": os.environ["DBOS_DATABASE_URL"],
    "executor_id": os.environ.get("DBOS_EXECUTOR", "local"),
    "log_level": "WARNING",
}
DBOS(config=config)


@DBOS.step()
async def step(previous: str, n: int) -> str:
    """A trivial step: append its number to the text so far."""
    return f"{previous} step{n}".strip()


@DBOS.workflow()
async def three_steps(body: dict[str, Any]) -> str:
    """Three durable steps in sequence; returns the last one's output."""
    text = await step(f"run{body.get('id', '')}", 1)
    text = await step(text, 2)
    return await step(text, 3)


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """ASGI: lifespan launches DBOS; any HTTP request runs ``three_steps`` on its JSON body."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                DBOS.launch()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                DBOS.destroy()
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    if scope["path"] == "/health":
        payload, status = b'{"ok": true}', 200
    elif scope["path"] == "/start":
        handle = await DBOS.start_workflow_async(three_steps, json.loads(body or b"{}"))
        payload, status = json.dumps({"id": handle.get_workflow_id()}).encode(), 202
    else:
        text = await three_steps(json.loads(body or b"{}"))
        payload, status = json.dumps({"text": text}).encode(), 200
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
