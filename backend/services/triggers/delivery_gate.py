"""How many webhook deliveries with a large body an API process works on at once.

A delivery's CPU on the API's event loop grows with its body: parsing 1 MB of JSON,
building the run input, encoding and hashing it to store by reference. Eight anonymous
clients posting 1 MB bodies back to back kept the loop (and the database connections)
busy with their work, and every other request waited behind it (issue 29, finding 3;
their expressions are kept off the loop by backend/engine/expression_slice.py).

:class:`DeliveryGate` bounds that work: a delivery whose body is over
:data:`LARGE_BODY_BYTES` takes a place before it is parsed, at most
:data:`PER_WORKFLOW` per workflow and :data:`TOTAL` in the process; the others wait for
one (waiting costs no CPU), at most :data:`MAX_WAITING` per workflow, beyond which the
delivery is refused with 429 and ``Retry-After`` (nothing stored; the sender retries).
Deliveries of ordinary size never wait. Per process: each API process has its own.
"""

from __future__ import annotations

import asyncio
import uuid

__all__ = [
    "LARGE_BODY_BYTES",
    "MAX_WAITING",
    "PER_WORKFLOW",
    "TOTAL",
    "DeliveryGate",
    "GateFull",
    "Place",
]

LARGE_BODY_BYTES = 64 * 1024
"""A body over this many bytes makes a delivery large."""

PER_WORKFLOW = 1
"""Large deliveries of one workflow worked on at once in one API process."""

TOTAL = 2
"""Large deliveries worked on at once in one API process, all workflows together."""

MAX_WAITING = 64
"""Large deliveries of one workflow waiting for a place at most; beyond it: 429."""

RETRY_AFTER_SECONDS = 1
"""``Retry-After`` of a large delivery refused because too many wait."""


class GateFull(Exception):
    """Too many large deliveries of one workflow wait already (answer 429)."""


class Place:
    """A delivery's place: taken (:meth:`take`) only once its body turns out large."""

    def __init__(self, gate: DeliveryGate, workflow_id: uuid.UUID) -> None:
        self.gate = gate
        self.workflow_id = workflow_id
        self.held = False

    async def take(self, size: int) -> None:
        """Take a place when ``size`` (body bytes) is large; waits for one. Raises
        :class:`GateFull` when too many of the workflow's large deliveries wait."""
        if self.held or size <= LARGE_BODY_BYTES:
            return
        gate = self.gate
        if gate.waiting.get(self.workflow_id, 0) >= MAX_WAITING:
            raise GateFull(f"more than {MAX_WAITING} large deliveries are waiting")
        own = gate.per_workflow.setdefault(self.workflow_id, asyncio.Semaphore(PER_WORKFLOW))
        gate.waiting[self.workflow_id] = gate.waiting.get(self.workflow_id, 0) + 1
        try:
            await own.acquire()
            try:
                await gate.total.acquire()
            except BaseException:
                own.release()
                raise
        finally:
            gate.waiting[self.workflow_id] -= 1
        gate.active[self.workflow_id] = gate.active.get(self.workflow_id, 0) + 1
        self.held = True

    def release(self) -> None:
        """Give the place back (nothing when none was taken)."""
        if not self.held:
            return
        self.held = False
        gate, workflow = self.gate, self.workflow_id
        gate.total.release()
        gate.per_workflow[workflow].release()
        gate.active[workflow] -= 1
        if not gate.active[workflow] and not gate.waiting.get(workflow):
            for counts in (gate.per_workflow, gate.active, gate.waiting):
                counts.pop(workflow, None)  # nothing kept for an idle workflow


class DeliveryGate:
    """The places of one API process (see the module doc); a delivery holds a
    :class:`Place` of it, taken once its body turns out large, given back when done."""

    def __init__(self) -> None:
        self.total = asyncio.Semaphore(TOTAL)
        self.per_workflow: dict[uuid.UUID, asyncio.Semaphore] = {}
        self.active: dict[uuid.UUID, int] = {}
        self.waiting: dict[uuid.UUID, int] = {}
