"""The 3-step scenario as a Restate service (Python SDK), served by hypercorn.

Runs in the harness's own environment (.bench-peers/venv, ``restate-sdk``), not in
Railyard's: ``hypercorn --bind 127.0.0.1:<port> restate_app:app``. ``Peers/run`` takes the
request body and journals three trivial steps with ``ctx.run_typed`` (each step's result is
in the Restate server's durable log before the next starts); it answers the last one's.
The fire-and-forget shape calls the same handler through the ingress's ``/send``, which
answers 202 once the invocation is in the log.
"""

from __future__ import annotations

from typing import Any

import restate

service = restate.Service("Peers")


def step(previous: str, n: int) -> str:
    """A trivial step: append its number to the text so far."""
    return f"{previous} step{n}".strip()


@service.handler()
async def run(ctx: restate.Context, body: dict[str, Any]) -> dict[str, str]:
    """Three durable steps in sequence; the answer is the last step's output."""
    text = await ctx.run_typed("step1", step, restate.RunOptions(), f"run{body.get('id', '')}", 1)
    text = await ctx.run_typed("step2", step, restate.RunOptions(), text, 2)
    text = await ctx.run_typed("step3", step, restate.RunOptions(), text, 3)
    return {"text": text}


app = restate.app(services=[service])
