"""Elasticsearch index templates, mappings, documents and bulk bodies (pure).

Formats follow the Elasticsearch 8/9 REST API reference: "Create or update an index
template" (``PUT _index_template/<name>``) and "Bulk API" (``POST _bulk``: NDJSON lines,
an action line followed by the document's source for ``index``). Documents are built from
PostgreSQL rows by :mod:`backend.search.es_indexer`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

KINDS = ("runs", "workflows", "audit")
MAX_TEXT = 32_000  # characters of flattened values kept per document

# Analysis shared by every index: identifiers, e-mails and URLs stay whole tokens
# (uax_url_email), case and accents folded; keywords compared lower-cased.
ANALYSIS = {
    "analyzer": {
        "railyard_text": {
            "type": "custom",
            "tokenizer": "uax_url_email",
            "filter": ["lowercase", "asciifolding"],
        }
    },
    "normalizer": {"railyard_lower": {"type": "custom", "filter": ["lowercase", "asciifolding"]}},
}
_TEXT = {"type": "text", "analyzer": "railyard_text"}
_KEYWORD = {"type": "keyword"}
_LOWER = {"type": "keyword", "normalizer": "railyard_lower"}
_DATE = {"type": "date"}

MAPPINGS: dict[str, dict[str, Any]] = {
    "runs": {
        "dynamic": "strict",
        "properties": {
            "id": _KEYWORD,
            "workflow_id": _KEYWORD,
            "status": _KEYWORD,
            "trigger": _KEYWORD,
            "version": {"type": "integer"},
            "steps": _KEYWORD,
            "error": _TEXT,
            "error_message": {"type": "keyword", "index": False},
            "text": _TEXT,
            "created_at": _DATE,
            "finished_at": _DATE,
            "duration_ms": {"type": "long"},
        },
    },
    "workflows": {
        "dynamic": "strict",
        "properties": {
            "id": _KEYWORD,
            "workflow_id": _KEYWORD,
            "name": {**_TEXT, "fields": {"raw": _LOWER}},
            "description": _TEXT,
            "tags": _LOWER,
            "node_types": _KEYWORD,
            "owner": _LOWER,
            "published": {"type": "boolean"},
            "active_version": {"type": "integer"},
            "updated_at": _DATE,
        },
    },
    "audit": {
        "dynamic": "strict",
        "properties": {
            "id": {"type": "long"},
            "at": _DATE,
            "action": _KEYWORD,
            "action_area": _KEYWORD,
            "object_type": _KEYWORD,
            "object_id": _KEYWORD,
            "actor": _LOWER,
            "actor_user_id": _KEYWORD,
            "text": _TEXT,
        },
    },
}


def index_name(prefix: str, kind: str) -> str:
    """The index of ``kind`` (runs, workflows, audit): ``<prefix>-<kind>``."""
    return f"{prefix}-{kind}"


def index_template(prefix: str, kind: str) -> dict[str, Any]:
    """Body of ``PUT _index_template/<prefix>-<kind>``: settings, analysis and the strict
    mapping of the kind's documents, applied to ``<prefix>-<kind>*`` indexes."""
    return {
        "index_patterns": [f"{index_name(prefix, kind)}*"],
        "priority": 200,
        "template": {
            "settings": {
                "number_of_shards": 1,
                "refresh_interval": "1s",
                "analysis": ANALYSIS,
            },
            "mappings": MAPPINGS[kind],
        },
        "_meta": {"managed_by": "railyard", "kind": kind},
    }


def flatten_values(value: Any, out: list[str] | None = None) -> list[str]:
    """The string and number values (not keys) in a JSON value, depth first; the same
    values PostgreSQL's ``jsonb_to_tsvector(..., '["string", "numeric"]')`` indexes."""
    out = [] if out is None else out
    if isinstance(value, dict):
        for v in value.values():
            flatten_values(v, out)
    elif isinstance(value, list):
        for v in value:
            flatten_values(v, out)
    elif isinstance(value, bool) or value is None:
        pass
    elif isinstance(value, str | int | float):
        out.append(str(value))
    return out


def joined_text(*values: Any) -> str:
    """Flattened values of ``values`` joined by spaces, at most :data:`MAX_TEXT` chars."""
    parts: list[str] = []
    for v in values:
        flatten_values(v, parts)
    return " ".join(parts)[:MAX_TEXT]


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def run_document(row: dict[str, Any]) -> dict[str, Any]:
    """The ``runs`` document of a run: ``row`` holds the run's columns plus ``steps`` (its
    step ids). The workflow's name and tags are not copied: they change without touching
    the run, so searches resolve ``workflow:`` and ``tag:`` to workflow ids in PostgreSQL
    (:mod:`backend.search.elastic`)."""
    started, finished = row.get("started_at"), row.get("finished_at")
    duration = int((finished - started).total_seconds() * 1000) if started and finished else None
    error = row.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    return {
        "id": str(row["id"]),
        "workflow_id": str(row["workflow_id"]),
        "status": row["status"],
        "trigger": row["trigger"],
        "version": row["version_number"],
        "steps": list(row.get("steps") or []),
        "error": joined_text(error),
        "error_message": message if isinstance(message, str) else None,
        "text": joined_text(row.get("input"), row.get("output"), error),
        "created_at": _iso(row["created_at"]),
        "finished_at": _iso(finished),
        "duration_ms": duration,
    }


def workflow_document(row: dict[str, Any]) -> dict[str, Any]:
    """The ``workflows`` document: ``row`` holds the workflow's columns plus ``owner``
    (e-mail) and ``node_types``."""
    return {
        "id": str(row["id"]),
        "workflow_id": str(row["id"]),
        "name": row["name"],
        "description": row.get("description") or "",
        "tags": list(row.get("tags") or []),
        "node_types": sorted(set(row.get("node_types") or [])),
        "owner": row.get("owner"),
        "published": row.get("active_version") is not None,
        "active_version": row.get("active_version"),
        "updated_at": _iso(row["updated_at"]),
    }


def audit_document(row: dict[str, Any]) -> dict[str, Any]:
    """The ``audit`` document of an audit log row."""
    action = row["action"]
    return {
        "id": row["id"],
        "at": _iso(row["at"]),
        "action": action,
        "action_area": action.split(".", 1)[0],
        "object_type": row["object_type"],
        "object_id": row["object_id"],
        "actor": row.get("actor_label") or "system",
        "actor_user_id": str(row["actor_user_id"]) if row.get("actor_user_id") else None,
        "text": joined_text(
            [action, row["object_type"], row["object_id"], row.get("actor_label") or ""],
            row.get("details"),
            row.get("before"),
            row.get("after"),
        ),
    }


def bulk_operations(
    index: str, documents: list[dict[str, Any]], deletes: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """The ``_bulk`` body (as the list of NDJSON lines the client sends): an ``index``
    action and source per document (``_id`` = the document's id, so re-sending replaces),
    a ``delete`` action per id in ``deletes``."""
    ops: list[dict[str, Any]] = []
    for doc in documents:
        ops.append({"index": {"_index": index, "_id": str(doc["id"])}})
        ops.append(doc)
    for doc_id in deletes:
        ops.append({"delete": {"_index": index, "_id": str(doc_id)}})
    return ops
