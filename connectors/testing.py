"""Test environment for connector authors (like ``temporalio.testing.ActivityEnvironment``).

::

    from connectors.testing import ActionTestEnvironment

    async def test_ping(local_server_url):
        env = ActionTestEnvironment()
        out = await env.run(ping, {"url": local_server_url}, input=None)
        assert out == {"status": 200}
        assert env.heartbeats == []

The environment builds an :class:`~connectors.sdk.ActionContext` per call with fixed
identifiers, records heartbeats, lets a test request cancellation, and uses an SSRF
policy that allows private addresses by default (so local test servers are reachable).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import httpx

from connectors.sdk import ActionContext, ActionDefinition, ActionInfo, SsrfPolicy

__all__ = ["ActionTestEnvironment"]


@dataclass
class ActionTestEnvironment:
    """Runs actions outside the engine.

    Attributes:
        ssrf: policy of the HTTP client handed to actions (private addresses allowed).
        run_id, workflow_id, step_id, attempt, idempotency_key, workflow_version: what
            ``sdk.info()`` reports (``idempotency_key`` defaults to
            ``"<run_id>:<step_id>"``; ``node_type`` is the action's type).
        http_client: an ``httpx.AsyncClient`` to use instead of the guarded default.
        heartbeats: every ``sdk.heartbeat(details)`` call's details, in order.
        cancelled: what ``sdk.is_cancelled()`` returns; set it with :meth:`cancel`.
    """

    ssrf: SsrfPolicy = field(default_factory=lambda: SsrfPolicy(allow_private=True))
    run_id: str = "run-test"
    workflow_id: str = "wf-test"
    step_id: str = "step-test"
    attempt: int = 1
    idempotency_key: str | None = None
    workflow_version: int = 1
    http_client: httpx.AsyncClient | None = None
    logger: logging.Logger | None = None
    heartbeats: list[Any] = field(default_factory=list)
    cancelled: bool = False

    def cancel(self) -> None:
        """Make ``sdk.is_cancelled()`` return ``True`` from now on."""
        self.cancelled = True

    def info_for(self, action_def: ActionDefinition) -> ActionInfo:
        """The :class:`ActionInfo` an action run through this environment sees."""
        return ActionInfo(
            run_id=self.run_id,
            workflow_id=self.workflow_id,
            step_id=self.step_id,
            attempt=self.attempt,
            idempotency_key=self.idempotency_key or f"{self.run_id}:{self.step_id}",
            node_type=action_def.type,
            workflow_version=self.workflow_version,
        )

    async def run(self, action_def: ActionDefinition, config: dict[str, Any], input: Any) -> Any:
        """Run ``action_def`` once with ``config`` and ``input``; return its JSON output.

        Errors propagate exactly as the engine would see them (``ConfigError``,
        ``ActionError``, ...).
        """
        context = ActionContext(
            info=self.info_for(action_def),
            heartbeat=self.heartbeats.append,
            cancelled=lambda: self.cancelled,
            http_client=self.http_client,
            logger=self.logger,
            ssrf=self.ssrf,
        )
        return await action_def.run(config, input, context)
