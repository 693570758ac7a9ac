"""What changed between two imports of a document, and the node-type versions that follow.

An operation (by key) is *changed* when what a step sends or receives differs: its method,
path, fields (names, places, schemas, required), body media type, credential types,
output schema, pagination or server. Its label, description and tags are text only.
A changed operation gets the next node-type version (one above the highest it ever had,
so an operation removed and brought back never reuses a number); an unchanged one keeps
its version, so workflows built with it see no difference.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .definition import ConnectorDefinition, OperationSpec

TEXT_ONLY = ("label", "description", "tags")
ASPECTS = (
    ("method", "method"),
    ("path", "path"),
    ("fields", "fields"),
    ("body_media_type", "body media type"),
    ("body_required", "body required"),
    ("credential_types", "credentials"),
    ("credential_optional", "credentials"),
    ("output_schema", "output schema"),
    ("pagination", "pagination"),
    ("server_url", "server"),
)


class Changes(msgspec.Struct, kw_only=True):
    """The difference of a new import from the latest stored one."""

    added: list[str] = []
    removed: list[str] = []
    changed: dict[str, list[str]] = {}
    unchanged: int = 0
    refused_before: int = 0
    refused_now: int = 0
    base_url: list[str] = []
    """``[before, after]`` when the server URL changed."""

    @property
    def empty(self) -> bool:
        """Nothing a step would notice changed (text aside)."""
        return not (self.added or self.removed or self.changed or self.base_url)


def _encoded(value: Any) -> bytes:
    return msgspec.json.encode(value, order="sorted")


def _field_changes(before: OperationSpec, after: OperationSpec) -> list[str]:
    old = {f.name: f for f in before.fields}
    new = {f.name: f for f in after.fields}
    out = [f"field {n} added" for n in new if n not in old]
    out += [f"field {n} removed" for n in old if n not in new]
    out += [f"field {n} changed" for n in new if n in old and _encoded(new[n]) != _encoded(old[n])]
    return out


def operation_changes(before: OperationSpec, after: OperationSpec) -> list[str]:
    """What differs between two versions of one operation (``[]``: nothing that matters)."""
    found: list[str] = []
    for attr, what in ASPECTS:
        if _encoded(getattr(before, attr)) == _encoded(getattr(after, attr)):
            continue
        if attr == "fields":
            found += _field_changes(before, after)
        elif what not in found:
            found.append(what)
    return found


def compare(
    previous: ConnectorDefinition | None,
    previous_versions: dict[str, int],
    highest: dict[str, int],
    new: ConnectorDefinition,
) -> tuple[Changes, dict[str, int]]:
    """``(changes, {operation key: node-type version})`` of ``new`` after ``previous``
    (``None``: a first import; every operation is version 1). ``previous_versions`` are
    the latest import's versions, ``highest`` each key's highest version ever stored."""
    versions: dict[str, int] = {}
    if previous is None:
        return Changes(added=[o.key for o in new.operations], refused_now=len(new.refused)), {
            o.key: highest.get(o.key, 0) + 1 for o in new.operations
        }
    old = {o.key: o for o in previous.operations}
    changes = Changes(refused_before=len(previous.refused), refused_now=len(new.refused))
    for op in new.operations:
        before = old.get(op.key)
        if before is None:
            changes.added.append(op.key)
            versions[op.key] = highest.get(op.key, 0) + 1
            continue
        found = operation_changes(before, op)
        if found:
            changes.changed[op.key] = found
            versions[op.key] = max(highest.get(op.key, 0), previous_versions.get(op.key, 1)) + 1
        else:
            changes.unchanged += 1
            versions[op.key] = previous_versions.get(op.key, 1)
    keys = {o.key for o in new.operations}
    changes.removed = [k for k in old if k not in keys]
    if previous.base_url != new.base_url:
        changes.base_url = [previous.base_url, new.base_url]
    return changes, versions
