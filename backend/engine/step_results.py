"""How a step's result is recorded on the run state: success, final failure (honouring
the step's ``on_error``), config resolution failures, and whether a failure is handled.

Pure over :class:`~backend.engine.model.RunState`, like :mod:`backend.engine.orchestrator`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from backend.engine.expressions import ExpressionError, resolve_config
from backend.engine.model import RunState
from backend.engine.states import StepStatus
from backend.engine.unstorable import replace_unstorable_in
from designer_schema.graph import Step

ON_ERROR_FAIL = "fail"
ON_ERROR_PORT = "error_port"
ON_ERROR_CONTINUE = "continue"


def succeed(state: RunState, step_id: str, output: Any, now: datetime, **data: Any) -> None:
    """Mark ``step_id`` succeeded with ``output`` on its ``out`` port (``data``: event data)."""
    rec = state.step(step_id)
    rec.move(StepStatus.SUCCEEDED)
    rec.output = output
    rec.ports = ("out",)
    rec.error = None
    rec.finished_at = now
    state.touch(step_id)
    state.emit("step.succeeded", step_id, **data)


def finish_failed(step: Step, state: RunState, error: dict[str, Any], now: datetime) -> None:
    """Record a final failure of ``step``, honouring its ``on_error`` setting.

    ``error`` is diagnostic text and may quote a value PostgreSQL cannot store (U+0000, a
    lone surrogate): such characters become U+FFFD (:mod:`backend.engine.unstorable`).
    """
    rec = state.step(step.id)
    on_error = step.on_error
    error = replace_unstorable_in(error)
    rec.error = error
    rec.finished_at = now
    state.touch(step.id)
    if on_error == ON_ERROR_CONTINUE:
        rec.move(StepStatus.SUCCEEDED)
        rec.output = {"error": error, "input": rec.input}
        rec.ports = ("out",)
        state.emit("step.succeeded", step.id, continued_on_error=True)
        return
    rec.move(StepStatus.FAILED)
    if on_error == ON_ERROR_PORT:
        rec.output = {"error": error, "input": rec.input}
        rec.ports = ("error",)
    else:
        rec.ports = ()
    state.emit("step.failed", step.id, error=error)


def resolved_config(
    state: RunState, step: Step, now: datetime, context: dict[str, Any]
) -> dict[str, Any] | None:
    """The step's config with expressions evaluated; ``None`` after failing the step."""
    rec = state.step(step.id)
    try:
        return resolve_config(step.config, step.expressions, rec.input, context)
    except ExpressionError as exc:
        error = {"message": str(exc), "kind": "expression_error", "field": exc.field}
        finish_failed(step, state, error, now)
        return None


def unhandled(state: RunState, step_ids: list[str]) -> bool:
    """True when one of ``step_ids`` failed without routing the failure to a port."""
    return any(
        state.steps[sid].status == StepStatus.FAILED and not state.steps[sid].ports
        for sid in step_ids
    )


def has_unhandled_failure(state: RunState) -> bool:
    """True when a step of the run failed without routing the failure to a port."""
    return any(r.status == StepStatus.FAILED and not r.ports for r in state.steps.values())
