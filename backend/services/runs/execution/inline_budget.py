"""How much inline work a start may do where it was asked for (the API's event loop, the
scheduler), and which workflow versions are known not to fit.

A start evaluates the run's first inline steps (Set, If, Switch, ...) itself, so a run made
only of them finishes without a worker; past :data:`INLINE_BUDGET_SECONDS` of the
thread's CPU time the rest stays ``ready`` and a worker continues it (docs/engine.md,
"Limits"). CPU time, not wall time: what the budget protects is the event loop from long
evaluation, and on a busy machine the operating system may pause the process for longer
than the budget in the middle of a few cheap steps (seen under load: Set -> If starts handed
to workers after a preemption, each costing a queue job and a worker transaction more).

When the inline work does not fit, the part the start did evaluate was spent on the
caller's time for nothing: the run needs a worker anyway, and the API also wrote one step
record and one event per evaluated step. :class:`Overruns` remembers, per workflow
version (immutable once published) and per process, that its last
:data:`OVERRUN_STRIKES` starts ran out of the budget (one alone may be a hiccup: a
process warming up, a busy machine); the starts of that version within the next
:data:`OVERRUN_MEMO_SECONDS` evaluate one inline step and hand the rest to a worker at
once. Such a start that finds nothing
more to evaluate (a data-dependent path that turned out short) forgets the entry, and so
does its expiry, after which a start gets the whole budget again: a version whose runs
differ is judged anew at least once a minute.
"""

from __future__ import annotations

import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

INLINE_BUDGET_SECONDS = 0.01
"""CPU time a start may spend evaluating inline steps where it was asked for (the API's
event loop, the scheduler; seconds of :func:`time.thread_time`); past it the run is stored
with the inline steps not yet evaluated left ``ready`` and a worker continues it
(docs/engine.md, "Limits")."""

OVERRUN_MEMO_SECONDS = 60.0
"""How long a version whose start ran out of the inline budget starts with the least
budget (seconds of :func:`time.monotonic`)."""

OVERRUN_STRIKES = 2
"""Consecutive starts of a version with the whole budget that must run out of it before
the version is remembered."""

OVERRUN_MEMO_SIZE = 1024
"""Versions :class:`Overruns` remembers at most (least recently overrun forgotten first)."""


class InlineBudget:
    """``should_yield`` for :func:`backend.engine.orchestrator.start`: True once the
    calling thread has spent ``seconds`` of CPU time (:func:`time.thread_time`, the
    thread's own user + system time, which a preemption does not advance) since its first
    question (so the database round
    trips before the engine runs do not count); ``spent`` says whether it ever answered
    True. With ``seconds`` 0 exactly one inline step is evaluated (the first question
    starts the clock and answers False)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.deadline: float | None = None
        self.spent = False
        self.deferred = False  # a step ran past the loop's slice (expression_slice.py)

    @property
    def left_work(self) -> bool:
        """Whether the start left inline steps ``ready`` for a worker: the budget was
        spent, or a step ran past the slice of where it runs."""
        return self.spent or self.deferred

    def __call__(self) -> bool:
        now = time.thread_time()
        if self.seconds < 0:  # a version too heavy for here: no inline step at all
            self.spent = True
        elif self.deadline is None:
            self.deadline = now + self.seconds
        elif not self.spent and now > self.deadline:
            self.spent = True
        return self.spent


class Overruns:
    """Workflow versions whose start ran out of the inline budget (see the module doc).

    ``clock`` gives seconds (default :func:`time.monotonic`); ``seconds`` and ``size`` are
    :data:`OVERRUN_MEMO_SECONDS` and :data:`OVERRUN_MEMO_SIZE` unless given. Not shared
    between processes: each API process learns on its own, from one start per version.
    """

    def __init__(
        self,
        seconds: float = OVERRUN_MEMO_SECONDS,
        size: int = OVERRUN_MEMO_SIZE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.seconds = seconds
        self.size = size
        self.clock = clock
        self._until: OrderedDict[uuid.UUID, float] = OrderedDict()
        self._strikes: OrderedDict[uuid.UUID, int] = OrderedDict()
        self._heavy: OrderedDict[uuid.UUID, float] = OrderedDict()

    def budget(self, version_id: uuid.UUID) -> InlineBudget:
        """The budget of a start of ``version_id``: none at all while the version is
        remembered as too heavy for here (a step of it ran past the loop's slice), one
        inline step while it is remembered as overrunning, else
        :data:`INLINE_BUDGET_SECONDS`."""
        heavy = self._heavy.get(version_id)
        if heavy is not None:
            if heavy > self.clock():
                return InlineBudget(-1.0)
            del self._heavy[version_id]
        until = self._until.get(version_id)
        if until is not None:
            if until > self.clock():
                return InlineBudget(0.0)
            del self._until[version_id]
        return InlineBudget(INLINE_BUDGET_SECONDS)

    def record(self, version_id: uuid.UUID, budget: InlineBudget) -> None:
        """Learn from a finished start of ``version_id`` that used ``budget`` (from
        :meth:`budget`). The whole budget spent :data:`OVERRUN_STRIKES` times in a row
        makes the version remembered for ``seconds``; a start that did not run out
        (whatever its budget) forgets the version and its strikes. A start in which a step
        ran past the loop's slice (``budget.deferred``) makes the version *heavy* for
        ``seconds`` at once: its starts evaluate nothing here (the per-workflow limit of
        docs/engine.md, "Limits")."""
        if budget.deferred:
            self._heavy[version_id] = self.clock() + self.seconds
            self._heavy.move_to_end(version_id)
            _trim(self._heavy, self.size)
            return
        if budget.seconds < 0:
            return  # a heavy version's start evaluated nothing: its memo's expiry judges
        if not budget.spent:
            self._until.pop(version_id, None)
            self._strikes.pop(version_id, None)
            return
        if budget.seconds <= 0:
            return  # the least budget: the memo's expiry judges the version again
        strikes = self._strikes.pop(version_id, 0) + 1
        if strikes < OVERRUN_STRIKES:
            self._strikes[version_id] = strikes
            _trim(self._strikes, self.size)
            return
        self._until[version_id] = self.clock() + self.seconds
        self._until.move_to_end(version_id)
        _trim(self._until, self.size)

    def remembers(self, version_id: uuid.UUID) -> bool:
        """True while starts of ``version_id`` get the least budget."""
        until = self._until.get(version_id)
        return until is not None and until > self.clock()


def _trim(entries: OrderedDict[uuid.UUID, Any], size: int) -> None:
    """Drop the oldest entries beyond ``size``."""
    while len(entries) > size:
        entries.popitem(last=False)
