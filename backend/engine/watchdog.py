"""A watchdog that interrupts a thread still inside a guarded block at its deadline.

Used to bound JSONata evaluations (:mod:`backend.engine.expression_limits`): built-in
functions can loop in Python without returning to the evaluator's time checks.
"""

from __future__ import annotations

import ctypes
import heapq
import math
import threading
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["WATCHDOG", "Watchdog"]

T = TypeVar("T")


class _Interrupted(BaseException):
    """Raised asynchronously by the watchdog in a thread past its deadline."""


_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
_set_async_exc.restype = ctypes.c_int


class Watchdog:
    """Interrupts a thread that is still inside a guarded call at its deadline.

    One daemon thread serves every guarded call of the process. :meth:`call` arms a
    deadline for the calling thread; if the call is still running then, the watchdog raises
    :class:`_Interrupted` in that thread at its next Python bytecode
    (``PyThreadState_SetAsyncExc``, the mechanism behind ``KeyboardInterrupt``-style stops).
    Returning disarms it under a lock and discards an interrupt not yet delivered, so no
    stray exception ever escapes the call. The interrupt comes at most one thread switch
    interval (``sys.getswitchinterval()``, 5 ms) after the deadline; a single long C call
    (one regex match, one sort) finishes first.

    Cost per call: arming wakes the watchdog thread only when the new deadline is earlier
    than the instant it already sleeps until (:attr:`wakes` counts its wake-ups), and
    drops the disarmed entries at the top of the heap itself; the thread sleeps until the
    earliest deadline armed, even once that call has returned. Calls of equal timeouts
    made one after another (every expression of every run: 1 s each) thus wake the
    thread about once per timeout, not once per call: each wake-up would take the
    interpreter lock from the thread evaluating (a context switch both ways). An idle
    process's watchdog sleeps until the next call.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._heap: list[tuple[float, int, int]] = []
        self._armed: dict[int, int] = {}  # ticket -> thread ident
        self._fired: set[int] = set()
        self._tickets = 0
        self._thread: threading.Thread | None = None
        self._sleeps_until = math.inf  # when the thread wakes on its own (inf: when woken)
        self.interrupts = 0
        """How many calls this watchdog has interrupted (for tests and metrics)."""
        self.wakes = 0
        """How many times the watchdog thread woke up (for tests and metrics)."""

    def call(
        self,
        deadline: float | None,
        function: Callable[[], T],
        on_interrupt: Callable[[], BaseException],
    ) -> T:
        """Return ``function()``; past ``deadline`` (``time.monotonic()``) stop it and raise
        ``on_interrupt()`` instead. ``None`` runs it without a deadline.

        (A plain call rather than a context manager: no code of the caller runs between
        arming and the protected region, so an interrupt is always delivered inside it.)
        """
        if deadline is None:
            return function()
        with self._lock:
            self._tickets += 1
            ticket = self._tickets
        try:
            try:
                self._arm(ticket, deadline)
                return function()
            finally:
                self._disarm(ticket)
        except _Interrupted:
            # delivered before the disarm completed; the watchdog fires once per ticket
            self._disarm(ticket)
            raise on_interrupt() from None

    def _arm(self, ticket: int, deadline: float) -> None:
        ident = threading.get_ident()
        with self._lock:
            self._armed[ticket] = ident
            _drop_disarmed(self._heap, self._armed)
            heapq.heappush(self._heap, (deadline, ticket, ident))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="expression-watchdog", daemon=True
                )
                self._thread.start()
            elif deadline < self._sleeps_until:
                # the thread sleeps past this deadline: wake it (once: it sleeps until
                # this deadline or an earlier one from then on)
                self._sleeps_until = deadline
                self._wake.notify()

    def _disarm(self, ticket: int) -> None:
        with self._lock:
            self._armed.pop(ticket, None)
            if ticket in self._fired:
                self._fired.discard(ticket)
                # the interrupt may still be pending: clear it before anything else runs
                _set_async_exc(ctypes.c_ulong(threading.get_ident()), None)

    def _run(self) -> None:
        with self._lock:
            while True:
                if not self._heap:
                    self._sleeps_until = math.inf
                    self._wake.wait()
                    self.wakes += 1
                    continue
                # sleep until the earliest deadline, even one already disarmed: dropping it
                # early would leave the thread to be woken by the very next call
                deadline, ticket, ident = self._heap[0]
                delay = deadline - time.monotonic()
                if delay > 0:
                    self._sleeps_until = deadline
                    self._wake.wait(delay)
                    self.wakes += 1
                    continue
                heapq.heappop(self._heap)
                if self._armed.pop(ticket, None) is None:
                    continue  # the call returned in time
                self._fired.add(ticket)
                self.interrupts += 1
                _set_async_exc(ctypes.c_ulong(ident), ctypes.py_object(_Interrupted))


def _drop_disarmed(heap: list[tuple[float, int, int]], armed: dict[int, int]) -> None:
    """Pop the entries at the top of ``heap`` whose ticket is no longer in ``armed``."""
    while heap and heap[0][1] not in armed:
        heapq.heappop(heap)


WATCHDOG = Watchdog()
"""The process's watchdog (its thread starts with the first guarded evaluation)."""
