"""Run execution use cases, split by use case around one run writer.

============================  ===========================================================
module                        holds
============================  ===========================================================
``transition``                what a change is: :class:`Change`, :class:`ChangeSet`,
                              :class:`RunView`, :class:`Followup`, :class:`Env`
``decisions``                 the decisions of run control and step execution (pure)
``step_changes``              the pure claim and completion changes
``writer``                    the run writer: applies change sets, one fenced statement
                              or under the run lock (it alone decides), after-commit work
``starts``                    start and admission (the start decision, the start in a
                              transaction, concurrency-limit admission)
``control``                   advance, pause, resume, cancel, run timeout, re-run
``steps``                     claim, run and complete an attempt
``followups``                 child runs, the error workflow, freed slots, notices
``eager``, ``inline_budget``  the eager-run budget, the inline budget of a start
``service``                   :class:`Execution`, the facade the API, workers, triggers
                              and recovery call
============================  ===========================================================

Persistence goes through the :class:`~backend.engine.ports.RunStore` port (implemented by
backend/db/run_store.py); the execution model is DESIGN.md's, described in
docs/engine.md.
"""

from backend.db.run_store import ACTIVE_RUN_STATUSES, active_version_of
from backend.services.runs.execution.control import StepNotReplayable
from backend.services.runs.execution.followups import error_run_id
from backend.services.runs.execution.service import Execution, worker_name
from backend.services.runs.execution.starts import StartedRun
from backend.services.runs.execution.transition import (
    AuditHook,
    RunNotActive,
    RunNotFound,
    has_calls,
)

__all__ = [
    "ACTIVE_RUN_STATUSES",
    "AuditHook",
    "Execution",
    "RunNotActive",
    "RunNotFound",
    "StartedRun",
    "StepNotReplayable",
    "active_version_of",
    "error_run_id",
    "has_calls",
    "worker_name",
]
