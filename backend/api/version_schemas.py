"""Wire types of version history, restore, compare, import and export (msgspec Structs)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec

from designer_schema.diagnostics import Diagnostic
from designer_schema.diagram import Diagram
from designer_schema.diff import DiagramDiff

Note = Annotated[str, msgspec.Meta(max_length=2000, description="At most 2000 characters")]
"""A publish note (what changed, why)."""


class PublishIn(msgspec.Struct, forbid_unknown_fields=True):
    """Body of POST /api/workflows/{id}/publish (optional): the version's ``note``."""

    note: Note = ""


class VersionDetailOut(msgspec.Struct):
    """One published version with its diagram; ``publisher`` is the display name or
    e-mail of ``created_by`` (None when the account is gone)."""

    version: int
    content_hash: str
    created_at: datetime
    created_by: str | None
    publisher: str | None
    note: str
    active: bool
    diagram: Diagram


class RestoreIn(msgspec.Struct, forbid_unknown_fields=True):
    """Body of POST .../versions/{number}/restore: the ``draft_revision`` the restore is
    based on (409 when the draft moved on; ``null`` overwrites)."""

    base_revision: int | None = None


class RestoredOut(msgspec.Struct):
    """The draft after a restore: its new ``revision``, the restored ``diagram`` and its
    diagnostics (``ok`` False on errors)."""

    ok: bool
    revision: int
    version: int
    diagram: Diagram
    diagnostics: list[Diagnostic]


class CompareOut(msgspec.Struct):
    """What changed from ``from`` to ``to`` (version numbers or ``"draft"``), positions
    ignored; ``summary`` counts nodes and edges by kind of change."""

    from_ref: int | str = msgspec.field(name="from")
    to_ref: int | str = msgspec.field(name="to")
    summary: dict[str, int] = msgspec.field(default_factory=dict)
    diff: DiagramDiff | None = None


class ImportedOut(msgspec.Struct):
    """An imported workflow (or draft): its id and designer ``url``, the draft
    ``revision``, and diagnostics: references to re-bind (``import_*`` warnings) and the
    compiler's."""

    id: str
    name: str
    url: str
    revision: int
    references_bound: int
    diagnostics: list[Diagnostic]
