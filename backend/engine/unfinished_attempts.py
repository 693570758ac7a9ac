"""Attempts that ended without an outcome: a lost worker's, or one handed back at shutdown.

An action step's attempt normally ends with an outcome (succeeded or failed), and a failed
attempt counts against the step's retry policy (``retry.max_attempts`` counts the first
attempt). Two endings are not the step's doing:

- **lost**: the worker died or hung and the sweeper expired the attempt's lease (attempt
  ``expired``, error kind ``lease_expired``);
- **handed back**: the worker was stopped (SIGTERM) and released the attempt after its
  grace period (attempt ``released``, kind ``worker_shutdown``).

Neither uses up a retry: the step is ready again at once and its next attempt is numbered
after the one that ended, but :func:`counted_attempts` leaves such attempts out of the retry
budget. A step whose workers are lost again and again is most likely what kills them (out
of memory, a native crash), so after :data:`MAX_LOST_LEASES` lost attempts it fails with
kind ``lease_expired`` instead of running a fourth time (the failure follows the step's
error routing like any other). Temporal counts a heartbeat timeout as a failed attempt
under an unlimited default retry policy; Railyard's default is one attempt, so a lost worker
may not count or a single worker crash would fail the step.

The counts live in the step's durable ``data`` under :data:`UNCOUNTED` and :data:`LOST`.
"""

from __future__ import annotations

from datetime import datetime

from backend.engine.model import RunState, StepRecord
from backend.engine.states import StepStatus
from backend.engine.step_results import finish_failed
from designer_schema.graph import WorkflowGraph

MAX_LOST_LEASES = 3
"""Lost attempts (lease expired) of one step after which the step fails (kind
``lease_expired``) instead of running again."""

UNCOUNTED = "uncounted_attempts"
"""Key in ``StepRecord.data``: attempts that ended without an outcome (lost or handed back)."""

LOST = "lost_leases"
"""Key in ``StepRecord.data``: attempts whose lease expired (their worker was lost)."""


def counted_attempts(rec: StepRecord) -> int:
    """The attempts of ``rec`` that count against its retry policy: those started, less
    those that ended without an outcome (see the module doc)."""
    uncounted = int((rec.data or {}).get(UNCOUNTED, 0))
    return max(rec.attempts - uncounted, 0)


def reopen(
    graph: WorkflowGraph,
    state: RunState,
    step_id: str,
    attempt_id: int,
    now: datetime,
    *,
    lost: bool,
) -> bool:
    """Record that the running attempt ``attempt_id`` of action ``step_id`` ended without
    an outcome: ``lost`` (lease expired) or handed back at shutdown (``lost=False``).

    The step becomes ``ready`` at ``now`` (event ``step.lease_expired`` or
    ``step.handed_back``) and True is returned: dispatch it. On the
    :data:`MAX_LOST_LEASES`-th lost attempt the step fails instead (error kind
    ``lease_expired``) and False is returned: the caller advances the run. A step that is no
    longer running, or a run that ended, is left as it is (True: nothing to do but the
    dispatch, which finds nothing to claim).
    """
    rec = state.steps.get(step_id)
    if rec is None or rec.status != StepStatus.RUNNING or state.status.terminal:
        return True
    data = dict(rec.data or {})
    data[UNCOUNTED] = int(data.get(UNCOUNTED, 0)) + 1
    if lost:
        data[LOST] = int(data.get(LOST, 0)) + 1
    rec.data = data
    state.touch(step_id)
    if lost and data[LOST] >= MAX_LOST_LEASES:
        error = {
            "message": f"the step's worker was lost {data[LOST]} times (lease expired each "
            "time): the step may be what stops its worker (out of memory, a crash)",
            "kind": "lease_expired",
        }
        rec.error = error
        state.emit("step.lease_expired", step_id, attempt_id=attempt_id)
        finish_failed(graph.step(step_id), state, error, now)
        return False
    rec.move(StepStatus.READY)
    rec.not_before = now
    state.emit("step.lease_expired" if lost else "step.handed_back", step_id, attempt_id=attempt_id)
    return True
