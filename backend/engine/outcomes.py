"""What one attempt of an action step produced: the typed seam between the worker that runs
a connector and the engine that records it.

The worker (``backend.services.runs.attempts``) turns whatever the connector did into an
:data:`AttemptOutcome`; :func:`backend.engine.orchestrator.record_outcome` applies it to
the run state. Both are msgspec structs, so an outcome can be encoded as it is (the
``status`` tag says which one it is).
"""

from __future__ import annotations

from typing import Any

import msgspec


class AttemptSucceeded(msgspec.Struct, frozen=True, tag_field="status", tag="succeeded"):
    """The action returned ``output`` (JSON-able builtins)."""

    output: Any = None


class AttemptFailed(msgspec.Struct, frozen=True, tag_field="status", tag="failed"):
    """The action failed.

    ``error`` is ``{"message": str, "kind": str, "details"?: object}`` (the step's and the
    attempt's error); ``retryable`` says whether the step's retry policy may try again;
    ``retry_after`` is the remote API's hint in seconds (``Retry-After``), when it gave one.
    """

    error: dict[str, Any]
    retryable: bool = False
    retry_after: float | None = None

    @property
    def kind(self) -> str:
        """The error kind (``"timeout"``, ``"rate_limited"``, ...)."""
        return str(self.error.get("kind", "error"))


AttemptOutcome = AttemptSucceeded | AttemptFailed
"""What one attempt produced."""


def failed(message: str, kind: str, *, retryable: bool = False) -> AttemptFailed:
    """A failed outcome with ``message`` and error ``kind``."""
    return AttemptFailed({"message": message, "kind": kind}, retryable=retryable)
