"""The official Python client of Railyard's HTTP API (``/api/v1``).

- :class:`Client` (blocking) and :class:`AsyncClient` (asyncio) with the same methods;
- typed models (:mod:`railyard_client.models`, msgspec Structs);
- error answers (RFC 9457 problem details) raised as :class:`ProblemError` subclasses;
- ``iter_*`` iterators that follow the list envelope's cursor page after page;
- idempotency keys on run starts and the run event stream (Server-Sent Events).
"""

from railyard_client.aio import AsyncClient
from railyard_client.errors import (
    Conflict,
    Forbidden,
    InvalidRequest,
    NotFound,
    Problem,
    ProblemError,
    ProblemItem,
    Unauthorized,
    Unavailable,
    Unprocessable,
)
from railyard_client.models import (
    TERMINAL,
    Credential,
    Delivery,
    DeliveryAttempt,
    DraftSaved,
    Page,
    Published,
    Resent,
    Run,
    RunEvent,
    RunStarted,
    Step,
    StepAttempt,
    Subscription,
    Token,
    Version,
    Workflow,
)
from railyard_client.sync import Client

__all__ = [
    "TERMINAL",
    "AsyncClient",
    "Client",
    "Conflict",
    "Credential",
    "Delivery",
    "DeliveryAttempt",
    "DraftSaved",
    "Forbidden",
    "InvalidRequest",
    "NotFound",
    "Page",
    "Problem",
    "ProblemError",
    "ProblemItem",
    "Published",
    "Resent",
    "Run",
    "RunEvent",
    "RunStarted",
    "Step",
    "StepAttempt",
    "Subscription",
    "Token",
    "Unauthorized",
    "Unavailable",
    "Unprocessable",
    "Version",
    "Workflow",
]
