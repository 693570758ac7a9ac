"""The slice of time an evaluation may take where a start was asked for (the API's event
loop), before it is left for a worker.

A start evaluates a run's first inline steps (Set, If, Switch, ...) where it was asked for,
so a run made only of them finishes without a worker (backend/services/runs/execution/
inline_budget.py bounds how many steps). One step alone, though, may hold an expression
whose budget (:attr:`~backend.engine.expression_limits.ExpressionLimits.timeout_ms`, one
second) is CPU a webhook's sender chooses: a ``$sort`` with a comparator over a 1 MB body.
Evaluated on the API's event loop, eight such requests stalled every other request for
seconds (issue 29, finding 3).

Within :func:`loop_slice`, the expressions of one step share a *slice* (milliseconds of
wall time) on top of their budget. A step that runs past the slice is not failed: its
evaluation stops (the same watchdog that enforces the budget), :class:`Deferred` is
raised, the step stays ``ready`` as it was, and the start hands the run to a worker, which
evaluates the step with the whole budget (and fails it there at the budget, for everyone
to see). :attr:`Slice.deferred` tells the caller it happened. Pure: no I/O.
"""

from __future__ import annotations

import contextvars
from dataclasses import dataclass

__all__ = ["LOOP_SLICE_MS", "Deferred", "Slice", "current_slice", "loop_slice"]

LOOP_SLICE_MS = 20
"""Wall time, in milliseconds, the expressions of one inline step may take on the API's
event loop before the step is left for a worker (docs/engine.md, "Limits")."""


class Deferred(BaseException):
    """An inline step's evaluation ran past the slice: left for a worker, not failed.

    A ``BaseException``, like the budget's own stop, so that no ``except Exception`` in
    between can swallow it."""


@dataclass
class Slice:
    """The slice of the current context: ``ms`` per step; ``deferred`` turns True when a
    step ran past it (and stays so: the caller reads and resets it)."""

    ms: float
    deferred: bool = False


_CURRENT: contextvars.ContextVar[Slice | None] = contextvars.ContextVar(
    "railyard_expression_slice", default=None
)


def current_slice() -> Slice | None:
    """The slice evaluations in this context are held to (``None``: only their budget)."""
    return _CURRENT.get()


class loop_slice:  # lower case: read as a function, ``with loop_slice() as s``
    """Hold every inline step evaluated inside the ``with`` block to ``ms`` milliseconds
    (see the module doc); ``as`` gives the :class:`Slice` (``deferred`` says whether one
    was left). A class, not a generator: a start enters it for every run."""

    __slots__ = ("slice", "token")

    def __init__(self, ms: float = LOOP_SLICE_MS) -> None:
        self.slice = Slice(ms)
        self.token: contextvars.Token[Slice | None] | None = None

    def __enter__(self) -> Slice:
        self.token = _CURRENT.set(self.slice)
        return self.slice

    def __exit__(self, *_exc: object) -> None:
        if self.token is not None:
            _CURRENT.reset(self.token)
