"""The answers of the unversioned ``/api`` aliases in the shapes they had before
``/api/v1`` (docs/api.md, "Versions"), so a caller written against them keeps working
until the aliases' sunset (:data:`backend.api.versioning.SUNSET`).

``/api/v1`` answers every collection in the list envelope (:mod:`backend.api.lists`);
before, most lists were bare JSON arrays, the audit log ``{entries, next_before_id}`` paged
by ``before_id``, search ``{..., hits, next_cursor}``, a run's children ``{children,
total, next_cursor}``, a started run's own id was ``run_id`` (:data:`RENAMED`) and a
version number was ``version_number`` on runs and ``number`` on versions
(:data:`ITEM_RESHAPED`, :data:`NESTED_RESHAPED`; an imported connector's versions too).
:func:`reshape` turns a ``/api/v1`` answer of such an operation back into its old shape
(lists: the first page; ``limit`` and ``cursor`` work as in ``/api/v1``);
:func:`legacy_query` turns the audit log's old ``before_id`` into a ``cursor``. Lists that
embedded whole drafts (the workflow list) keep answering without them.

:class:`backend.api.versioning.UnversionedAlias` applies both to alias requests only.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qsl, urlencode

import msgspec

from backend.services.paging import encode_cursor

BARE_LISTS = frozenset(
    {
        "list_all_tokens",
        "list_api_tokens",
        "list_credential_grants",
        "list_credential_types",
        "list_credentials",
        "list_grant_subjects",
        "list_groups",
        "list_imported_connectors",
        "list_own_sessions",
        "list_project_grants",
        "list_projects",
        "list_runs",
        "list_service_accounts",
        "list_sessions",
        "list_settings",
        "list_users",
        "list_versions",
        "list_webhook_deliveries",
        "list_workflow_grants",
        "list_workflows",
    }
)
"""Operations whose unversioned answer was a bare JSON array (the envelope's ``data``)."""

_ENVELOPE = ("data", "has_more", "next_cursor", "next")


def _renamed(items: str, *, keep_cursor: bool) -> Callable[[dict[str, Any]], Any]:
    """A reshaper putting ``data`` back under its old name ``items``."""

    def old(value: dict[str, Any]) -> Any:
        rest = {k: v for k, v in value.items() if k not in _ENVELOPE}
        cursor = {"next_cursor": value.get("next_cursor")} if keep_cursor else {}
        return {**rest, items: value.get("data"), **cursor}

    return old


def _audit(value: dict[str, Any]) -> Any:
    entries = value.get("data") or []
    last = entries[-1].get("id") if value.get("has_more") and entries else None
    return {"entries": entries, "next_before_id": last}


_OBJECTS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "list_audit_entries": _audit,
    "search": _renamed("hits", keep_cursor=True),
    "list_run_children": _renamed("children", keep_cursor=True),
}


_RUN_ID = {"id": "run_id"}
RENAMED: dict[str, dict[str, str]] = {
    "start_run": _RUN_ID,
    "rerun_run": _RUN_ID,
    "replay_run": _RUN_ID,
    "start_test_run": _RUN_ID,
    "get_run": {"version": "version_number"},
    "get_version": {"version": "number"},
}
"""Per operation: ``{v1 member: member before v1}`` of an object answer (a started run's
own id was ``run_id``; a run's version ``version_number``, a version's own number
``number``)."""


_RUN_VERSION = {"version": "version_number"}
_VERSION_NUMBER = {"version": "number"}


def _rename(value: Any, names: dict[str, str]) -> Any:
    """``value`` with its members renamed per ``names`` (``{v1 name: old name}``); a list
    item by item; anything else as is."""
    if isinstance(value, list):
        return [_rename(item, names) for item in value]
    if not isinstance(value, dict):
        return value
    return {names.get(k, k): v for k, v in value.items()}


def _within(member: str, names: dict[str, str]) -> Callable[[Any], Any]:
    """A reshaper renaming per ``names`` inside an object's ``member``."""

    def old(value: Any) -> Any:
        if not isinstance(value, dict) or member not in value:
            return value
        return {**value, member: _rename(value[member], names)}

    return old


ITEM_RESHAPED: dict[str, Callable[[Any], Any]] = {
    "list_runs": lambda item: _rename(item, _RUN_VERSION),
    "list_versions": lambda item: _rename(item, _VERSION_NUMBER),
    "list_imported_connectors": _within("versions", _VERSION_NUMBER),
}
"""Per bare-list operation: each item in its old shape (a run's version was
``version_number``; a version's own number ``number``, also in a connector's
``versions``)."""

NESTED_RESHAPED: dict[str, Callable[[Any], Any]] = {
    "publish_workflow": _within("version", _VERSION_NUMBER),
    "get_imported_connector": _within("versions", _VERSION_NUMBER),
}
"""Per object operation: its answer in the old shape (a published version's own number
was ``version.number``, an imported connector's ``versions[].number``)."""


def reshapes(operation_id: object) -> bool:
    """Whether an alias answer of ``operation_id`` is reshaped by :func:`reshape`."""
    return isinstance(operation_id, str) and (
        operation_id in BARE_LISTS
        or operation_id in _OBJECTS
        or operation_id in RENAMED
        or operation_id in NESTED_RESHAPED
    )


def reshape(operation_id: str, body: bytes) -> bytes:
    """``body`` (a ``/api/v1`` JSON answer of ``operation_id``) in its old shape."""
    try:
        value: Any = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return body
    if not isinstance(value, dict):
        return body
    if operation_id in BARE_LISTS:
        items = value.get("data")
        if operation_id in ITEM_RESHAPED and isinstance(items, list):
            items = [ITEM_RESHAPED[operation_id](item) for item in items]
        return msgspec.json.encode(items)
    if operation_id in RENAMED:
        return msgspec.json.encode(_rename(value, RENAMED[operation_id]))
    if operation_id in NESTED_RESHAPED:
        return msgspec.json.encode(NESTED_RESHAPED[operation_id](value))
    return msgspec.json.encode(_OBJECTS[operation_id](value))


AUDIT_PATH = "/api/v1/admin/audit"


def legacy_query(path: str, query_string: bytes) -> bytes:
    """``query_string`` of an alias request to ``path`` (the ``/api/v1`` path) with the
    audit log's old ``before_id=N`` as the ``cursor`` naming entry N."""
    if path != AUDIT_PATH or b"before_id=" not in query_string:
        return query_string
    pairs = parse_qsl(query_string.decode("latin-1"), keep_blank_values=True)
    out = []
    for name, value in pairs:
        if name == "before_id" and value.isdigit():
            out.append(("cursor", encode_cursor([int(value)], "audit")))
        else:
            out.append((name, value))
    return urlencode(out).encode("latin-1")
