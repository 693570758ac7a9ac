"""Names of the Redis pub/sub channels that announce run changes (best effort, not truth),
and what a run-change notice says.

A notice on :func:`run_channel` is published after a committed change of the run. Its
payload (:class:`RunNotice`, JSON) says the run's status after the change and whether the
run holds a Respond step's answer, so a listener that waits for the run's end or answer
skips the reads that cannot give it. When the answer is small (at most
:data:`NOTICE_VALUES_MAX_BYTES` of JSON) the end notice carries the run's response, output
and error whole (``carried``), and the waiter answers without reading PostgreSQL. A notice
that does not decode (e.g. the bare ``changed`` of an older publisher) only says "look
again". PostgreSQL stays the truth: a lost notice costs a listener its next poll.
"""

from __future__ import annotations

from typing import Any

import msgspec

CHANGED = b"changed"
"""The notice that says nothing but "the run changed": listeners read the run."""

NOTICE_VALUES_MAX_BYTES = 8 * 1024
"""Largest JSON text (bytes) of response, output and error an end notice carries whole."""

_PAYLOAD_MARKER = b'"$railyard.payload"'  # a value stored by reference (backend/db/payloads.py)


def run_channel(run_id: str) -> str:
    """Channel on which a change of run ``run_id`` is announced."""
    return f"railyard:run:{run_id}"


class RunNotice(msgspec.Struct, frozen=True, omit_defaults=True):
    """What a run-change notice says (module doc).

    ``status``: the run's status after the change (a :class:`~backend.engine.states.RunStatus`
    value); ``answered``: the run holds a Respond to Webhook step's answer; ``carried``:
    ``response``, ``output`` and ``error`` are the run's values, whole (only in the notice
    of a run that ended or answered, and only when small); without it they are ``None``
    and a listener that needs them reads the run."""

    status: str
    answered: bool = False
    carried: bool = False
    response: dict[str, Any] | None = None
    output: Any = None
    error: dict[str, Any] | None = None


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(RunNotice)


def encode_notice(
    status: str,
    *,
    response: dict[str, Any] | None,
    output: Any,
    error: dict[str, Any] | None,
    final: bool,
) -> bytes:
    """The JSON notice of a run now in ``status`` with these values. ``final``: the
    notice may answer a waiter (the run ended or holds an answer), so it carries the values
    when their JSON text fits :data:`NOTICE_VALUES_MAX_BYTES` and holds no stored-by-
    reference part (and encodes); otherwise only the status and the ``answered`` flag."""
    answered = response is not None
    if final:
        try:
            values = _ENCODER.encode((response, output, error))
        except (TypeError, ValueError):  # msgspec.EncodeError is a ValueError
            values = b""  # not JSON as msgspec writes it: the listener reads the run
        if values and len(values) <= NOTICE_VALUES_MAX_BYTES and _PAYLOAD_MARKER not in values:
            return _ENCODER.encode(RunNotice(status, answered, True, response, output, error))
    return _ENCODER.encode(RunNotice(status, answered))


def decode_notice(data: bytes | str) -> RunNotice | None:
    """The notice in ``data``; ``None`` for a payload that is not one (:data:`CHANGED` or
    anything else: the listener reads the run)."""
    try:
        return _DECODER.decode(data)
    except (msgspec.DecodeError, TypeError):
        return None


CANCEL_CHANNEL = "railyard:cancel"
"""Channel carrying the id of each run that was cancelled or timed out, so the workers
running its attempts stop them at once (backend/services/runs/cancellation.py)."""

WAKE_CHANNEL = "railyard:queue:wake"
"""Channel on which the dispatcher announces an enqueued job, waking idle workers
(backend/workers/wake.py)."""
