"""Running one attempt of a connector action: lease heartbeats, step timeout, cancellation.

The worker runs the connector outside any database transaction (DESIGN.md, execution
model); this module turns whatever happens into an *outcome* the engine records, an
:data:`~backend.engine.outcomes.AttemptOutcome`: ``AttemptSucceeded(output)`` or
``AttemptFailed(error={"message", "kind", "details"?}, retryable, retry_after)``.

Connector errors never escape: an exception becomes a failed outcome (the SDK's errors
carry ``kind``, ``retryable``, ``retry_after`` and ``details``, read duck-typed so this
module does not import the SDK).

Outcomes are made storable (:func:`storable_outcome`): an output holding text PostgreSQL
cannot store (U+0000, a lone surrogate) fails the step with kind ``unstorable_output``
naming where (never retried: the same call gives the same output), and such characters in
an error's message or details become U+FFFD (an error is diagnostic text).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from backend.engine.outcomes import AttemptFailed, AttemptOutcome, AttemptSucceeded, failed
from backend.engine.unstorable import find_unstorable, replace_unstorable_in

RenewLease = Callable[[], Awaitable[bool]]
"""Pushes the attempt's lease; ``False`` when the attempt is no longer current."""

StopHook = Callable[[Callable[[], None]], Callable[[], None]]
"""``hook(stop) -> unregister``: hands the caller a function that stops the running action
(used when a cancel notice for the run arrives, backend/services/runs/cancellation.py)."""


async def run_attempt(
    runner: Any,
    config: dict[str, Any],
    input: Any,
    make_context: Callable[[Callable[..., Awaitable[None]], Callable[[], bool]], Any],
    *,
    renew_lease: RenewLease,
    heartbeat_every: float,
    timeout: float | None,
    stop_hook: StopHook | None = None,
) -> AttemptOutcome:
    """Run ``runner.run(config, input, context)`` and return its outcome (see module doc).

    ``make_context(heartbeat, is_cancelled)`` builds the connector's context. The lease is
    renewed every ``heartbeat_every`` seconds and whenever the action heartbeats; when a
    renewal says the attempt is no longer current (run cancelled or timed out, lease taken
    over), the action is stopped: ``is_cancelled()`` turns true, then its task is
    cancelled. After ``timeout`` seconds (``None``: none) the action is stopped the same
    way and the outcome is a retryable ``timeout`` failure. If the caller itself is
    cancelled, the action is cancelled too and ``CancelledError`` propagates.

    ``stop_hook`` (optional) is called once with a function that stops the action the
    same way as a refused lease renewal, at once (the run was cancelled or timed out);
    the function it returns is called when the attempt ends.
    """
    cancelled = asyncio.Event()
    task: asyncio.Task[Any] | None = None

    async def heartbeat(_details: Any = None) -> None:
        if not await renew_lease():
            _stop(task, cancelled)  # run cancelled or timed out, lease lost

    async def beat_forever() -> None:
        while True:
            await asyncio.sleep(heartbeat_every)
            await heartbeat()

    context = make_context(heartbeat, cancelled.is_set)
    beater = asyncio.create_task(beat_forever())
    task = asyncio.ensure_future(runner.run(config, input, context))
    unregister = stop_hook(lambda: _stop(task, cancelled)) if stop_hook else None
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
        if not done:  # step timeout: cooperative first (is_cancelled), then the task
            _stop(task, cancelled)
            await asyncio.gather(task, return_exceptions=True)
            return failure(f"step timed out after {timeout:g} s", "timeout", retryable=True)
        return storable_outcome(AttemptSucceeded(task.result()))
    except asyncio.CancelledError:
        if cancelled.is_set():  # stopped by the heartbeat: completion is discarded anyway
            return failure("attempt cancelled", "cancelled")
        raise
    except Exception as exc:  # connector errors become step errors, never crash the worker
        return storable_outcome(outcome_from_exception(exc))
    finally:
        if unregister is not None:
            unregister()
        beater.cancel()
        if not task.done():  # the caller was cancelled
            task.cancel()


def _stop(task: asyncio.Task[Any] | None, cancelled: asyncio.Event) -> None:
    """Cancel a running action: the SDK's ``is_cancelled()`` turns true, then the task is
    cancelled (an action that ignores the flag is interrupted at its next ``await``)."""
    cancelled.set()
    if task is not None and not task.done():
        task.cancel()


failure = failed
"""A failed outcome with ``message`` and error ``kind``
(:func:`backend.engine.outcomes.failed`)."""


def outcome_from_exception(exc: BaseException) -> AttemptFailed:
    """Map an SDK error (duck-typed: ``kind``, ``retryable``, ``retry_after``, ``details``)
    or any other exception to a failed outcome."""
    kind = getattr(exc, "kind", None) or type(exc).__name__
    retryable = bool(getattr(exc, "retryable", False))
    error: dict[str, Any] = {"message": str(exc) or type(exc).__name__, "kind": kind}
    details = getattr(exc, "details", None)
    if details:
        error["details"] = details
    retry_after = getattr(exc, "retry_after", None)
    return AttemptFailed(
        error, retryable=retryable, retry_after=None if retry_after is None else float(retry_after)
    )


def storable_outcome(outcome: AttemptOutcome) -> AttemptOutcome:
    """``outcome`` made storable in PostgreSQL (see the module docstring)."""
    if isinstance(outcome, AttemptFailed):
        return msgspec.structs.replace(outcome, error=replace_unstorable_in(outcome.error))
    try:
        encoded = msgspec.json.encode(outcome.output)
    except UnicodeEncodeError:  # a lone surrogate has no UTF-8 encoding
        found = find_unstorable(msgspec.to_builtins(outcome.output), "output")
    except (TypeError, ValueError):  # not JSON-able: the engine reports it as it always did
        return outcome
    else:
        if b"\\u0000" not in encoded:
            return outcome
        found = find_unstorable(msgspec.json.decode(encoded), "output")
    if found is None:  # pragma: no cover - the checks above only let suspects through
        return outcome
    return failure(f"the step's {found.message}", "unstorable_output")
