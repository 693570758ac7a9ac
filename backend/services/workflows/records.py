"""Read-only shapes of the stored objects that services hand to the web layers.

Service functions return stored rows; the API and the pages read them through these
protocols, so they name no database model (imports point inward: DESIGN.md). A stored
row satisfies its protocol structurally; nothing outside ``backend.services`` and
``backend.db`` may write to one.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Protocol


class WorkflowRecord(Protocol):
    """A workflow as the API and pages show it."""

    @property
    def id(self) -> uuid.UUID:
        """The workflow's id."""

    @property
    def name(self) -> str:
        """Its name."""

    @property
    def description(self) -> str:
        """Its description ("" when none)."""

    @property
    def tags(self) -> list[str]:
        """Its search labels, lower case (backend.services.workflows.workflows.normalize_tags)."""

    @property
    def draft(self) -> dict[str, Any]:
        """The draft diagram (JSON object)."""

    @property
    def draft_revision(self) -> int:
        """Revision of the draft, bumped by every save (optimistic concurrency)."""

    @property
    def active_version(self) -> int | None:
        """Number of the version webhooks and schedules start, None when unpublished."""

    @property
    def webhook_token(self) -> str:
        """The unguessable token of its webhook URL (``/hooks/<token>``)."""

    @property
    def archived_at(self) -> datetime | None:
        """When it was archived (deleted in the UI); None while it is active."""

    @property
    def settings(self) -> dict[str, Any]:
        """Stored workflow settings (read with ``WorkflowSettings.from_stored``)."""

    @property
    def created_at(self) -> datetime:
        """When it was created (UTC)."""

    @property
    def updated_at(self) -> datetime:
        """When it last changed (UTC)."""


class VersionRecord(Protocol):
    """A published workflow version as the API shows it."""

    @property
    def number(self) -> int:
        """Its number (1, 2, ... per workflow)."""

    @property
    def content_hash(self) -> str:
        """SHA-256 of its compiled graph."""

    @property
    def created_at(self) -> datetime:
        """When it was published (UTC)."""

    @property
    def created_by(self) -> uuid.UUID | None:
        """Who published it (None when that account was deleted)."""

    @property
    def note(self) -> str:
        """The publisher's note ("" when none was given)."""
