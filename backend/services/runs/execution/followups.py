"""Follow-ups of a run transition: child runs, the error workflow, freed slots, notices.

Inside the transaction (so a crash never separates a change from what it implies):
:meth:`Followups.create_children` inserts the child runs the engine asked for and
:meth:`Followups.on_run_ended` frees the ended run's concurrency slot and inserts the error
workflow's run. After commit the run writer (backend/services/runs/execution/writer.py)
dispatches steps, advances queued runs, cancels child runs and wakes a parent, and
:meth:`Followups.announce` announces the change (a run's end and answer at once, other
changes a moment later and coalesced).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from backend.db.versions import DRAFT_NUMBER
from backend.engine import flow_steps
from backend.engine.model import ChildRun, RunState
from backend.engine.ports import NewRun, RunRow, RunTransaction, WorkflowSettings
from backend.engine.states import RunStatus
from backend.services.runs.channels import CHANGED, encode_notice
from backend.services.runs.execution.transition import Env, Followup, parent_to_wake

ANNOUNCE_DELAY_SECONDS = 0.025
"""How long the notice of a change of a run that goes on waits (seconds): the work that
follows the commit goes first, and the changes of one run within this window make one
notice (a live run page shows a step's progress at most this much later). A run's end and
its answer are announced at once."""

_ANSWERED_REMEMBERED = 4096
"""How many runs holding a Respond step's answer a process remembers having announced."""

ERROR_RUN_NAMESPACE = uuid.UUID("5f0c7a52-3d1e-4f53-9a53-6c1f2b7e0e11")


def error_run_id(failed_run_id: uuid.UUID | str) -> uuid.UUID:
    """Deterministic id of the error-workflow run started for ``failed_run_id`` (UUID 5),
    so it is inserted at most once and the failed run's page can link it."""
    return uuid.uuid5(ERROR_RUN_NAMESPACE, str(failed_run_id))


class Followups:
    """The follow-up work of transitions (see the module doc)."""

    def __init__(self, env: Env) -> None:
        self.env = env
        self._announcing: set[asyncio.Task[None]] = set()
        self._pending: dict[str, bytes] = {}  # run id -> newest notice not yet published
        self._answered: dict[str, None] = {}  # runs announced with an answer (oldest first)

    async def create_children(
        self, tx: RunTransaction, parent: RunRow, state: RunState, followup: Followup
    ) -> None:
        """Insert the queued child runs ``state.child_requests`` asks for (a no-op for a
        child that exists) and hand each to the engine as a child of its step. A target
        workflow or version that does not exist (or is archived) becomes a refused child
        with kind ``subworkflow_not_found``; one the publisher of the parent's version may
        not run (``RunTransaction.publisher_refusal``) a refused child with kind
        ``subworkflow_not_granted``: it has no run row and is recorded with its step
        (``flow_steps.refuse_child``), so every later pass sees it failed. The calling
        step's input, which each child's input holds (For-each: under ``input``), is stored
        once and referenced by every child. The children are inserted together
        (``RunTransaction.insert_queued_runs``: batched statements), not one statement each."""
        requests, state.child_requests = state.child_requests, []
        children: list[NewRun] = []  # inserted together after the loop
        refusals: dict[str, str | None] = {}  # called workflow -> why the publisher may not
        versions: dict[tuple[str, int | None], Any] = {}  # (workflow, number) -> version
        for request in requests:
            called = request.workflow_id
            if called not in refusals:
                refusals[called] = await tx.publisher_refusal(parent.id, called)
            refusal = refusals[called]
            version = None
            if refusal is None:
                key = (called, request.version)
                if key not in versions:
                    versions[key] = await tx.resolve_version(called, request.version)
                version = versions[key]
            error: dict[str, Any] | None = None
            if refusal is not None:
                error = {"message": refusal, "kind": "subworkflow_not_granted"}
            elif version is None:
                which = (
                    "active version" if request.version is None else f"version {request.version}"
                )
                error = {
                    "message": f"workflow {request.workflow_id} has no {which} "
                    "(or does not exist, or is archived)",
                    "kind": "subworkflow_not_found",
                }
            if error is not None:
                if request.wait:  # failed in this pass and every later one
                    flow_steps.refuse_child(state, request.step_id, request.index, error)
                else:
                    state.emit("child.not_started", request.step_id, error=error)
                continue
            assert version is not None  # refused above otherwise
            workflow_id, version_id, number = version
            step = state.steps.get(request.step_id)
            shared = () if step is None else (step.input,)  # in every child's input
            children.append(
                NewRun(
                    id=uuid.UUID(request.run_id),
                    workflow_id=workflow_id,
                    version_id=version_id,
                    version_number=number,
                    trigger="subworkflow",
                    input=request.input,
                    created_by=parent.created_by,
                    parent_run_id=parent.id,
                    parent_step_id=request.step_id,
                    parent_index=request.index,
                    by_reference=shared,
                )
            )
            followup.advance.append(request.run_id)
            if request.wait:
                entry = ChildRun(request.step_id, request.index, request.run_id)
                state.children.setdefault(request.step_id, []).append(entry)
        await tx.insert_queued_runs(children)

    async def on_run_ended(
        self, tx: RunTransaction, run: RunRow, state: RunState, followup: Followup
    ) -> None:
        """In the transaction that ended ``run``: free its concurrency slot (advance the
        oldest queued run of the workflow after commit) and, for a failed or timed-out run,
        insert the error workflow's run (queued, trigger ``error``); test runs of the draft
        (draft snapshot versions, number 0) start no error workflow."""
        settings = await tx.settings(run.workflow_id)
        await self._free_slot(tx, run, settings, followup)
        target = settings.error_workflow_id
        if (
            target
            and state.status in (RunStatus.FAILED, RunStatus.TIMED_OUT)
            and run.trigger != "error"
            and run.version_number != DRAFT_NUMBER  # a test run of the draft
            and target != str(run.workflow_id)
        ):
            started = await self._insert_error_run(tx, run, state, target)
            if started is not None:
                followup.advance.append(started)

    async def after_unlocked_end(
        self,
        run: RunRow,
        state: RunState,
        followup: Followup,
        settings: WorkflowSettings | None = None,
    ) -> None:
        """What :meth:`on_run_ended` does for a run that ended ``succeeded`` by the
        one-statement write (no transaction): free its concurrency slot, reading the
        oldest queued run after the commit (the queued run is advanced after the commit in
        both paths). ``settings`` are the workflow's settings the ending write returned
        (``Written.settings``); without them they are read here. A run that ends
        otherwise may start the error workflow, which must commit with the run's end: it
        ends under the lock."""
        if state.status != RunStatus.SUCCEEDED:
            raise ValueError(f"run {run.id} ended {state.status.value}: end it under the lock")
        if settings is None:
            settings = await self.env.store.read_settings(run.workflow_id)
        if settings.max_concurrent_runs:
            async with self.env.store.transaction() as tx:
                await self._free_slot(tx, run, settings, followup)
        followup.wake_parent = parent_to_wake(run, state)

    async def _free_slot(
        self, tx: RunTransaction, run: RunRow, settings: WorkflowSettings, followup: Followup
    ) -> None:
        """Advance the oldest queued run of ``run``'s workflow after commit when the
        workflow limits its concurrent runs (``run`` ended: its slot is free)."""
        if settings.max_concurrent_runs:
            followup.advance += [str(i) for i in await tx.oldest_queued(run.workflow_id, 1)]

    async def _insert_error_run(
        self, tx: RunTransaction, run: RunRow, state: RunState, error_workflow_id: str
    ) -> str | None:
        """Insert the queued error-workflow run for failed ``run``; ``None`` (and an event
        on the failed run) when the error workflow has no active version."""
        version = await tx.resolve_version(error_workflow_id, None)
        if version is None:
            await tx.add_event(
                run.id,
                "error_workflow.not_started",
                {"error_workflow_id": error_workflow_id, "reason": "not published"},
            )
            return None
        error = dict(state.error or {})
        context = {
            "run_id": str(run.id),
            "workflow_id": str(run.workflow_id),
            "workflow_name": await tx.workflow_name(run.workflow_id),
            "status": state.status.value,
            "error": error,
            "failed_step": error.get("step_id"),
            "input": run.input,
            "url": f"{self.env.base_url}/runs/{run.id}",
        }
        new_id = error_run_id(run.id)
        workflow_id, version_id, number = version
        await tx.insert_run(
            NewRun(
                id=new_id,
                workflow_id=workflow_id,
                version_id=version_id,
                version_number=number,
                trigger="error",
                input=context,
                created_by=run.created_by,
            )
        )
        await tx.add_event(run.id, "error_workflow.started", {"run_id": str(new_id)})
        return str(new_id)

    async def announce(self, run_id: str, state: RunState | None) -> None:
        """Announce a committed change of run ``run_id`` (now in ``state``).

        The run's END, and the first change that gives it a Respond step's answer, are
        published at once (nothing follows them that the notice could delay; the end
        notice carries a small answer whole: backend/services/runs/channels.py). Any other
        change is published :data:`ANNOUNCE_DELAY_SECONDS` later, in the background, so a
        worker continuing the run sends the next step's work first; changes of a run
        whose notice is still pending are coalesced into that notice, which then says the
        newest state. Every commit is thus followed by a notice published after it (its
        own or a newer one), which is the order live pages and waiting webhooks rely on."""
        if state is None:
            notice, urgent = CHANGED, False
        else:
            answered_now = state.response is not None and self._first_answer(run_id)
            final = state.status.terminal or answered_now
            notice = encode_notice(
                state.status.value,
                response=state.response,
                output=state.output,
                error=state.error,
                final=final,
            )
            urgent = final
            if state.status.terminal:
                self._answered.pop(run_id, None)
        if urgent:
            self._pending.pop(run_id, None)  # superseded: this notice is newer
            await self.env.events.notify(run_id, notice)
            return
        already = run_id in self._pending
        self._pending[run_id] = notice
        if not already:
            task = asyncio.create_task(self._announce_later(run_id))
            self._announcing.add(task)
            task.add_done_callback(self._announcing.discard)

    def _first_answer(self, run_id: str) -> bool:
        """True the first time this process announces run ``run_id`` holding an answer
        (remembered for the :data:`_ANSWERED_REMEMBERED` newest such runs: a run forgotten
        here only gets one more immediate notice)."""
        if run_id in self._answered:
            return False
        self._answered[run_id] = None
        if len(self._answered) > _ANSWERED_REMEMBERED:
            del self._answered[next(iter(self._answered))]
        return True

    async def _announce_later(self, run_id: str) -> None:
        """Publish run ``run_id``'s pending notice :data:`ANNOUNCE_DELAY_SECONDS` from
        now (nothing when an immediate notice superseded it meanwhile)."""
        await asyncio.sleep(ANNOUNCE_DELAY_SECONDS)
        notice = self._pending.pop(run_id, None)
        if notice is not None:
            await self.env.events.notify(run_id, notice)

    async def drain(self) -> None:
        """Wait for run-change announcements still being published (before closing Redis)."""
        while self._announcing:
            await asyncio.gather(*self._announcing, return_exceptions=True)
