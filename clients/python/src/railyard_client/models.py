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
    """One event sent (or to send) to a subscription, with its attempts, newest first.
    ``webhook_id`` is the ``webhook-id`` header of its every attempt: ``msg_`` and
    ``id``'s 32 hex digits, without dashes."""

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


class Diagnostic(Model):
    """One finding of the compiler (or of an import): ``severity`` (``error``,
    ``warning``), a stable ``code``, the ``message``, and where (``node_id``,
    ``edge_id``, ``field``: a config field path such as ``mapping.total``)."""

    severity: str
    code: str
    message: str
    node_id: str | None = None
    edge_id: str | None = None
    field: str | None = None


SearchScope = Literal["runs", "workflows", "audit"]
SearchSort = Literal["newest", "oldest", "duration", "relevance", "name"]
"""Every sort some scope offers: runs newest, oldest, duration, relevance; workflows
relevance, name, newest, oldest; audit newest, oldest, relevance."""


class SearchHit(Model):
    """One search result: ``kind`` (``run``, ``workflow``, ``audit``), its ``id``,
    ``title``, the page that opens it (``url``, absolute), its time ``at`` (run created,
    workflow updated, audit entry written), ``status`` (runs), where the free text
    matched (``snippet``) and the kind's own fields (``detail``)."""

    kind: str
    id: str
    title: str
    url: str
    at: datetime | None = None
    status: str | None = None
    snippet: str = ""
    detail: dict[str, Any] = msgspec.field(default_factory=dict)


class FacetValue(Model):
    """One value of a facet with the number of matches holding it."""

    value: str
    count: int
    label: str = ""


class Facet(Model):
    """Match counts per value of one query ``field`` (``status``, ``tag``, ...)."""

    field: str
    values: list[FacetValue]


class SearchPage(Page[SearchHit], kw_only=True):
    """One page of search hits (the list envelope) with what was searched (``scope``,
    ``query``, ``sort``), how many match (``total``, exact when ``total_exact``), the
    ``facets`` and the ``backend`` that answered (``postgres``, ``elasticsearch``)."""

    scope: str
    query: str
    sort: str
    total: int
    total_exact: bool = True
    facets: list[Facet] = msgspec.field(default_factory=list)
    backend: str = ""


class ExportedWorkflow(Model):
    """The workflow part of an export document: its name, description and settings."""

    name: str
    description: str = ""
    settings: dict[str, Any] = msgspec.field(default_factory=dict)


class CredentialRef(Model, kw_only=True, omit_defaults=True):
    """A credential a node's ``field`` references, by ``type`` and ``name`` (re-bound by
    name on import; ``id`` where it was exported)."""

    node: str
    field: str
    type: str
    name: str | None = None
    id: str | None = None


class WorkflowRef(Model, kw_only=True, omit_defaults=True):
    """A workflow a node calls, by ``name`` (re-bound by name on import)."""

    field: str
    node: str | None = None
    name: str | None = None
    id: str | None = None


class ExportSource(Model, kw_only=True, omit_defaults=True):
    """Where an export came from: the Railyard (``base_url``), the workflow and the
    ``version`` (``None``: the draft)."""

    base_url: str = ""
    workflow_id: str | None = None
    version: int | None = None


class WorkflowExport(Model, kw_only=True, omit_defaults=True):
    """A ``railyard/workflow`` export document: the workflow, its ``diagram`` (the
    designer's JSON) and the credentials and workflows it references by name, never a
    secret. :meth:`~railyard_client.AsyncClient.import_workflow` takes it back as it is
    (or the same document read from a file, as a ``dict``)."""

    format: str
    format_version: int
    workflow: ExportedWorkflow
    diagram: dict[str, Any]
    credentials: list[CredentialRef] = msgspec.field(default_factory=list)
    workflows: list[WorkflowRef] = msgspec.field(default_factory=list)
    exported_at: str | None = None
    source: ExportSource | None = None


class Imported(Model):
    """An imported workflow (or draft): its ``id``, ``name``, designer ``url``, the
    draft's ``revision``, how many references were re-bound (``references_bound``) and
    the ``diagnostics`` (references to re-bind by hand, ``import_*``, and the
    compiler's)."""

    id: str
    name: str
    url: str
    revision: int
    references_bound: int = 0
    diagnostics: list[Diagnostic] = msgspec.field(default_factory=list)
