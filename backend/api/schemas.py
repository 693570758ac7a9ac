"""Wire types of the JSON API (msgspec Structs)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

from backend.engine.workflow_settings import WorkflowSettings
from designer_schema.diagnostics import Diagnostic
from designer_schema.diagram import Diagram

Name = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=200,
        pattern=r"\S",
        description="1 to 200 characters, not only spaces (leading/trailing spaces are dropped)",
    ),
]
"""A workflow, credential or token name (stored stripped)."""

Email = Annotated[
    str,
    msgspec.Meta(
        max_length=320,
        pattern=r"^\s*[^@\s]{1,64}@[^@\s]+\.[^@\s]+\s*$",
        description="An email address (compared lower-cased, surrounding spaces dropped)",
    ),
]
"""An account's email address, as ``backend.services.identity.accounts.normalize_email`` accepts
it."""

RoleName = Literal["admin", "editor", "operator", "viewer"]
"""A role (docs/security.md, "Permission table")."""

Secret = Annotated[str, msgspec.Meta(min_length=1, pattern=r"\S", description="Not only spaces")]
"""A write-only secret (webhook token, password, HMAC key)."""


class LoginIn(msgspec.Struct, forbid_unknown_fields=True):
    """Credentials of a local account."""

    email: str
    password: str


class UserOut(msgspec.Struct):
    """The logged-in user."""

    id: str
    email: str
    display_name: str
    role: str


class SessionsEnded(msgspec.Struct):
    """What signing out everywhere ended: how many sessions (this one included)."""

    sessions_ended: int


class SessionOut(msgspec.Struct):
    """A live login session (never its token): who, from where, since and last seen when
    (ISO 8601 UTC), how it signed in (``password`` or ``oidc``)."""

    id: str
    user_id: str
    email: str
    address: str | None
    user_agent: str
    method: str
    created_at: datetime
    last_seen_at: datetime
    expires_at: datetime


Tags = Annotated[
    list[str],
    msgspec.Meta(
        max_length=20,
        description="At most 20; stored lower-cased, other characters than a-z 0-9 _ . -"
        " become '-', at most 40 characters, empty ones dropped",
    ),
]


class WorkflowCreate(msgspec.Struct, forbid_unknown_fields=True):
    """Body of POST /api/workflows."""

    name: Name
    description: str = ""
    tags: Tags = msgspec.field(default_factory=list)


class WorkflowPatch(msgspec.Struct, forbid_unknown_fields=True):
    """Body of PATCH /api/workflows/{id}; absent fields are left unchanged.

    ``tags``: the workflow's tags, replacing the old ones (at most 20; lower-cased, other
    characters than ``a-z 0-9 _ . -`` become ``-``, 40 characters each, empty ones dropped;
    searchable as ``tag:``, docs/search.md).

    ``settings``: run-control settings to change (``error_workflow_id``: another workflow's
    id; ``run_timeout_seconds``: a number in (0, 2592000]; ``max_concurrent_runs``: an
    integer in [1, 10000]); a ``null`` value clears one, any other key is refused (400
    naming ``settings.<key>``).
    """

    name: Name | msgspec.UnsetType = msgspec.UNSET
    description: str | msgspec.UnsetType = msgspec.UNSET
    tags: Tags | msgspec.UnsetType = msgspec.UNSET
    settings: dict[str, Any] | msgspec.UnsetType = msgspec.UNSET


class VersionOut(msgspec.Struct):
    """A published workflow version: ``created_by`` is the publisher's user id,
    ``publisher`` its display name or e-mail (None when the account is gone), ``note``
    what the publisher wrote, ``active`` whether webhooks and schedules run it."""

    version: int
    content_hash: str
    created_at: datetime
    created_by: str | None
    publisher: str | None
    active: bool
    note: str = ""


class WorkflowSummary(msgspec.Struct, kw_only=True):
    """A workflow as lists show it: everything but its draft diagram."""

    id: str
    name: str
    description: str
    active_version: int | None
    webhook_url: str
    created_at: datetime
    updated_at: datetime
    settings: WorkflowSettings = msgspec.field(default_factory=WorkflowSettings)
    draft_revision: int = 0
    archived_at: datetime | None = None  # set: archived (no webhook, schedule or new runs)
    tags: list[str] = msgspec.field(default_factory=list)


class WorkflowOut(WorkflowSummary, kw_only=True):
    """A workflow with its draft diagram."""

    draft: dict[str, Any]


class WorkflowDuplicate(msgspec.Struct, forbid_unknown_fields=True):
    """Body of POST /api/workflows/{id}/duplicate; without ``name`` the copy is named
    ``"<name> (copy)"``."""

    name: Name | None = None


class DiagramIn(msgspec.Struct, forbid_unknown_fields=True):
    """Body carrying a diagram (save draft, compile)."""

    diagram: Diagram


class DraftIn(msgspec.Struct, forbid_unknown_fields=True):
    """Body of PUT /api/workflows/{id}/draft.

    ``base_revision``: the ``draft_revision`` this edit is based on; when given and the
    stored draft has moved on, the save is refused with 409
    (problem details with ``revision``, ``saved_by`` and ``saved_at``: backend/problems.py).
    """

    diagram: Diagram
    base_revision: int | None = None


class DraftSavedOut(msgspec.Struct):
    """A saved draft: its new ``revision`` and diagnostics (``ok`` False on errors)."""

    ok: bool
    diagnostics: list[Diagnostic]
    revision: int


class DiagnosticsOut(msgspec.Struct):
    """Compile result: ``ok`` is False when any error blocks publishing."""

    ok: bool
    diagnostics: list[Diagnostic]


class PublishOut(msgspec.Struct):
    """Result of publishing: the active version and whether it is new."""

    version: VersionOut
    created: bool
    webhook_url: str
    warnings: list[Diagnostic] = msgspec.field(default_factory=list)  # never block publishing


class RunCreate(msgspec.Struct, forbid_unknown_fields=True):
    """Body of POST /api/workflows/{id}/runs (manual or API trigger)."""

    input: Any = msgspec.field(default_factory=dict)


class RerunIn(msgspec.Struct, forbid_unknown_fields=True):
    """Body of POST /api/runs/{id}/rerun: ``from`` is ``"failed_step"`` or ``"start"``."""

    start_from: Literal["failed_step", "start"] = msgspec.field(name="from")


class ReplayIn(msgspec.Struct, forbid_unknown_fields=True):
    """Body of POST /api/runs/{id}/replay: the step to run again and its edited input."""

    step_id: str
    input: Any


class RunStarted(msgspec.Struct):
    """A run that was accepted: its ``id``; ``url`` is its page, ``status_url`` its JSON."""

    id: str
    status: str
    url: str
    status_url: str


class DeliveryAccepted(msgspec.Struct):
    """A webhook delivery that started (or found) a run: ``run_id`` names the run; ``url``
    is its page, ``status_url`` its JSON (docs/webhooks.md, "Answers")."""

    run_id: str
    status: str
    url: str
    status_url: str
