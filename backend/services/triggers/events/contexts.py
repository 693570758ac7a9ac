"""What the event service needs, and the context a trigger's code runs in.

Trigger code (``poll``, ``receive``, ``listen``, the lifecycle hooks) runs inside an
:class:`connectors.sdk.ActionContext` built by the same factory as action attempts: the
SSRF-guarded HTTP client over the shared pool, the deployment's connector settings, and
credentials resolved (and their use audited) for the version's publisher. Its
``ActionInfo`` has no run (``run_id`` ``""``): the step is the trigger step and the
version the subscription's.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from backend.services.runs.execution import Execution
from connectors import sdk


@dataclass(frozen=True)
class TriggerSite:
    """Which trigger of which workflow version the code runs for."""

    workflow_id: uuid.UUID
    version_number: int
    step_id: str
    node_type: str
    revision: int = 0


def _never() -> bool:
    return False


@dataclass
class EventEnv:
    """The event service's dependencies.

    Attributes:
        sessionmaker: the database.
        execution: starts runs (and holds the context factory).
        triggers: SDK trigger definitions by node type (the catalog's).
        base_url: the public URL app webhook URLs are built on.
        pin: stores data pinned on a draft's node (:func:`backend.services.workflows.pins.pin`,
            handed in so the event service needs nothing of the workflow services):
            where a fetched test event goes (:mod:`backend.services.triggers.events.samples`).
    """

    sessionmaker: async_sessionmaker[AsyncSession]
    execution: Execution
    triggers: dict[str, Any]
    base_url: str = ""
    pin: Any = None

    def definition(self, node_type: str) -> Any | None:
        """The SDK ``TriggerDefinition`` of ``node_type`` (``None``: not installed now)."""
        return self.triggers.get(node_type)

    def context(
        self, site: TriggerSite, cancelled: Any = _never, *, draft: bool = False
    ) -> sdk.ActionContext:
        """A fresh context for one call of the trigger's code at ``site``.

        ``draft``: the code runs for the designer on the draft (``site.version_number``
        0), not for a published version: credentials are resolved without the version
        publisher's check, which the caller made for the user instead
        (:mod:`backend.services.triggers.events.samples`)."""
        info = sdk.ActionInfo(
            run_id="",
            workflow_id=str(site.workflow_id),
            step_id=site.step_id,
            attempt=1,
            idempotency_key=f"{site.workflow_id}:{site.step_id}:{site.revision}",
            node_type=site.node_type,
            workflow_version=site.version_number,
        )
        factory = self.execution.context_factory
        context: sdk.ActionContext = (
            factory(info, None, cancelled, publisher_check=False)
            if draft
            else factory(info, None, cancelled)
        )
        return context

    def url(self, token: str) -> str:
        """The public URL of the app webhook with ``token``."""
        return f"{self.base_url.rstrip('/')}/hooks/app/{token}"
