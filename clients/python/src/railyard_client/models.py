"""The resources of Railyard's API as msgspec Structs, decoded straight from the answers.

Names and types follow the OpenAPI document (``/schema/openapi.json``): a resource's own
id is ``id``, a version is an ``int`` named ``version``, times are timezone-aware
``datetime`` (the API sends RFC 3339 UTC). Members an answer has that a Struct does not
name are ignored, so a newer server's additions never break an older client. Values the
API leaves free-form (run input and output, a diagram, a delivery's payload) are plain
JSON values (``Any``).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Generic, Literal, TypeVar

import msgspec

T = TypeVar("T")

RunStatus = Literal[
    "queued", "running", "waiting", "paused", "succeeded", "failed", "cancelled", "timed_out"
]
TERMINAL: frozenset[str] = frozenset({"succeeded", "failed", "cancelled", "timed_out"})
"""The statuses a run ends in."""


class Model(msgspec.Struct, kw_only=True):
    """Base of every model: keyword-only fields, unknown answer members ignored."""


class Page(Model, Generic[T]):
    """One page of a collection (the list envelope): ``data`` in the collection's order,
    ``next_cursor`` (opaque) and ``next`` (absolute URL) of the next page, both ``None``
    on the last one."""

    data: list[T]
    has_more: bool
    next_cursor: str | None = None
    next: str | None = None


class Workflow(Model):
    """A workflow. ``draft`` (the diagram being edited) is ``None`` in list items: only
    :meth:`~railyard_client.AsyncClient.get_workflow` answers it."""

    id: str
    name: str
    created_at: datetime
    updated_at: datetime
    description: str = ""
    active_version: int | None = None
    webhook_url: str = ""
    draft_revision: int = 0
    archived_at: datetime | None = None
    tags: list[str] = msgspec.field(default_factory=list)
    settings: dict[str, Any] = msgspec.field(default_factory=dict)
    draft: dict[str, Any] | None = None


class DraftSaved(Model):
    """A saved draft: ``ok`` when it compiles without errors, the compiler's
    ``diagnostics`` (severity, node_id, field, message) and the draft's new ``revision``."""

    ok: bool
    diagnostics: list[dict[str, Any]]
    revision: int


class Version(Model):
    """A published workflow version (immutable)."""

    version: int
    content_hash: str
    created_at: datetime
    created_by: str | None = None
    publisher: str | None = None
    active: bool = False
    note: str = ""


class Published(Model):
    """The answer to a publish: the ``version`` (``created`` False when the draft equals
    the active version, which then stays), the webhook URL and non-blocking warnings."""

    version: Version
    created: bool
    webhook_url: str
    warnings: list[dict[str, Any]] = msgspec.field(default_factory=list)


class RunStarted(Model):
    """A started run: its ``id``, ``status``, page ``url`` and JSON ``status_url``."""

    id: str
    status: str
    url: str
    status_url: str


class StepAttempt(Model):
    """One attempt of a step (each retry is a new one)."""

    number: int
    status: str
    worker: str = ""
    idempotency_key: str = ""
    error: Any = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    duration_ms: int | None = None


class Step(Model):
    """One step of a run with its attempts."""

    step_id: str
    status: str
    label: str = ""
    type: str = ""
    input: Any = None
    output: Any = None
    error: Any = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    duration_ms: int | None = None
    attempts: list[StepAttempt] = msgspec.field(default_factory=list)


class Run(Model):
    """A run. List items carry the summary (no ``input``, ``output`` or ``steps``);
    :meth:`~railyard_client.AsyncClient.get_run` and the event stream carry everything."""

    id: str
    workflow_id: str
    status: RunStatus
    version: int
    created_at: datetime
    workflow_name: str = ""
    trigger: str = ""
    started_at: datetime | None = None
    finished_at: datetime | None = None
    duration_ms: int | None = None
    input: Any = None
    output: Any = None
    error: Any = None
    steps: list[Step] = msgspec.field(default_factory=list)
    parent_run_id: str | None = None
    test: bool = False

    @property
    def ended(self) -> bool:
        """Whether the run reached a status it never leaves."""
        return self.status in TERMINAL


class Credential(Model):
    """A credential as the API shows it: secret fields are named, never answered."""

    id: str
    name: str
    type: str
    created_at: datetime
    updated_at: datetime
    kind: str = ""
    type_label: str = ""
    public: dict[str, Any] = msgspec.field(default_factory=dict)
    secret_fields: list[str] = msgspec.field(default_factory=list)
    connected: bool = False
    created_by: str | None = None


class Subscription(Model):
    """An outgoing event subscription. ``secret`` (the Standard Webhooks signing
    secret, ``whsec_...``) is only set on the answer to its creation."""

    id: str
    url: str
    events: list[str]
    created_at: datetime
    description: str = ""
    enabled: bool = True
    workflow_id: str | None = None
    project_id: str | None = None
    consecutive_failures: int = 0
    retry_at: datetime | None = None
    disabled_at: datetime | None = None
    disabled_reason: str | None = None
    secret: str | None = None


class DeliveryAttempt(Model):
    """One attempt to send a delivery: the receiver's HTTP status (``None`` when none
    came), the first 1,000 characters of its answer or the error, milliseconds taken."""

    number: int
    at: datetime
    status_code: int | None = None
    response: str = ""
    error: str | None = None
    duration_ms: int = 0
    manual: bool = False


class Delivery(Model):
    """One event sent (or to send) to a subscription, with its attempts, newest first."""

    id: str
    webhook_id: str
    event_type: str
    status: Literal["pending", "delivered", "failed"]
    created_at: datetime
    run_id: str | None = None
    next_attempt_at: datetime | None = None
    delivered_at: datetime | None = None
    payload: Any = None
    attempts: list[DeliveryAttempt] = msgspec.field(default_factory=list)


class Resent(Model):
    """What the receiver answered to a re-sent delivery."""

    acknowledged: bool
    status_code: int | None = None
    error: str | None = None
    duration_ms: int = 0


class Token(Model):
    """An API token; ``token`` (the secret to send as ``Authorization: Bearer``) is only
    set on the answer to its creation."""

    id: str
    name: str
    created_at: datetime
    last_used_at: datetime | None = None
    expires_at: datetime | None = None
    scopes: list[str] = msgspec.field(default_factory=list)
    token: str | None = None


class RunEvent(Model):
    """One message of a run's event stream: its ``event`` name (``update``) and the run
    as it is now."""

    event: str
    run: Run
