"""Elasticsearch search bodies (pure) and reading a search response back into a
:class:`~backend.search.model.SearchResult`.

Formats follow the Elasticsearch 8/9 REST API reference, "Search API": a ``bool`` query
(``filter``, ``must``, ``must_not``), ``sort`` with ``search_after`` pagination,
``terms`` aggregations and ``track_total_hits``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import quote

from backend.search.criteria import Criteria, Filter
from backend.search.model import (
    COUNT_LIMIT,
    FACET_SIZE,
    Facet,
    FacetValue,
    Hit,
    SearchResult,
    Visibility,
    decode_cursor,
    encode_cursor,
)
from backend.search.query import Scope

_TEXT_FIELDS = {
    Scope.RUNS: ["text"],
    Scope.WORKFLOWS: ["name^3", "description", "tags"],
    Scope.AUDIT: ["text"],
}
_TIME = {Scope.RUNS: "created_at", Scope.WORKFLOWS: "updated_at", Scope.AUDIT: "at"}
_SORTS: dict[str, list[Any]] = {
    "newest": [{"@time": "desc"}, {"id": "desc"}],
    "oldest": [{"@time": "asc"}, {"id": "asc"}],
    "duration": [{"duration_ms": {"order": "desc", "missing": -1}}, {"id": "desc"}],
    "relevance": ["_score", {"id": "desc"}],
    "name": [{"name.raw": "asc"}, {"id": "asc"}],
}
FACET_FIELDS: dict[Scope, dict[str, str]] = {
    Scope.RUNS: {"status": "status", "workflow": "workflow_id", "trigger": "trigger"},
    Scope.WORKFLOWS: {"tag": "tags", "type": "node_types"},
    Scope.AUDIT: {"action": "action", "object": "object_type", "actor": "actor"},
}


def _term_query(scope: Scope, f: Filter) -> dict[str, Any]:
    values = [v for v in f.values]
    if f.field == "workflow_id":
        return {"terms": {"workflow_id": [str(v) for v in values]}}
    if f.field == "step":
        return {"terms": {"steps": values}}
    if f.field == "error":
        return {
            "bool": {
                "should": [{"match_phrase": {"error": str(v)}} for v in values],
                "minimum_should_match": 1,
            }
        }
    if f.field == "published":
        return {"terms": {"published": [v == "yes" for v in values]}}
    if f.field == "action":
        should: list[dict[str, Any]] = []
        for v in values:
            v = str(v).rstrip(".")
            should += [{"term": {"action": v}}, {"term": {"action_area": v}}]
        return {"bool": {"should": should, "minimum_should_match": 1}}
    if f.field == "actor":
        return {
            "bool": {
                "should": [
                    {"terms": {"actor": [str(v).lower() for v in values]}},
                    {"terms": {"actor_user_id": [str(v) for v in values]}},
                ],
                "minimum_should_match": 1,
            }
        }
    if f.field == "object":
        return {
            "bool": {
                "should": [
                    {"terms": {"object_type": [str(v).lower() for v in values]}},
                    {"terms": {"object_id": [str(v) for v in values]}},
                ],
                "minimum_should_match": 1,
            }
        }
    field = {"version": "version", "type": "node_types"}.get(f.field, f.field)
    return {"terms": {field: values}}


def query_of(criteria: Criteria, visible: Visibility) -> dict[str, Any]:
    """The ``bool`` query of ``criteria`` limited to what ``visible`` allows."""
    scope = criteria.scope
    filters: list[dict[str, Any]] = []
    must: list[dict[str, Any]] = []
    must_not: list[dict[str, Any]] = []
    if scope is Scope.AUDIT and not visible.audit:
        return {"match_none": {}}
    if scope is not Scope.AUDIT and visible.workflow_ids is not None:
        if not visible.workflow_ids:
            return {"match_none": {}}
        filters.append({"terms": {"workflow_id": sorted(visible.workflow_ids)}})
    for term in criteria.text:
        kind = "phrase" if term.phrase else "best_fields"
        clause: dict[str, Any] = {
            "multi_match": {
                "query": term.text,
                "fields": _TEXT_FIELDS[scope],
                "type": kind,
                **({} if term.phrase else {"operator": "and"}),
            }
        }
        if scope is Scope.WORKFLOWS and not term.phrase:
            clause["multi_match"]["fuzziness"] = "AUTO"
        (must_not if term.negated else must).append(clause)
    time: dict[str, str] = {}
    if criteria.after is not None:
        time["gte"] = criteria.after.isoformat()
    if criteria.before is not None:
        time["lt"] = criteria.before.isoformat()
    if time:
        filters.append({"range": {_TIME[scope]: time}})
    for f in criteria.filters:
        (must_not if f.negated else filters).append(_term_query(scope, f))
    body: dict[str, Any] = {"filter": filters}
    if must:
        body["must"] = must
    if must_not:
        body["must_not"] = must_not
    return {"bool": body}


def sort_of(criteria: Criteria) -> list[Any]:
    """The ``sort`` of the criteria (the id breaks ties, so ``search_after`` is exact)."""
    time = _TIME[criteria.scope]
    return [
        {time: s["@time"]} if isinstance(s, dict) and "@time" in s else s
        for s in _SORTS[criteria.sort]
    ]


WORKFLOW_BUCKETS = 1000  # run counts per workflow, to sum the tag facet from


def _agg_size(name: str) -> int:
    return WORKFLOW_BUCKETS if name == "workflow" else FACET_SIZE


def search_body(
    criteria: Criteria, visible: Visibility, *, limit: int, cursor: str | None
) -> dict[str, Any]:
    """Body of ``POST <index>/_search``: query, sort, one extra hit to know whether a next
    page exists, ``search_after`` from the cursor, facet aggregations, totals counted up
    to :data:`COUNT_LIMIT`. Raises :class:`~backend.search.model.CursorError`."""
    sort = sort_of(criteria)
    body: dict[str, Any] = {
        "query": query_of(criteria, visible),
        "sort": sort,
        "size": limit + 1,
        "track_total_hits": COUNT_LIMIT,
        "aggs": {
            name: {"terms": {"field": field, "size": _agg_size(name)}}
            for name, field in FACET_FIELDS[criteria.scope].items()
        },
    }
    if cursor:
        body["search_after"] = decode_cursor(cursor, criteria.sort, len(sort))
    return body


def _when(value: Any) -> datetime | None:
    """A time the index holds as ISO 8601 text, as a datetime (answered ending ``Z``)."""
    return datetime.fromisoformat(value) if isinstance(value, str) and value else None


def _hit(
    scope: Scope, source: dict[str, Any], query: str, workflows: dict[str, WorkflowInfo]
) -> Hit:
    if scope is Scope.RUNS:
        wf = workflows.get(source["workflow_id"], WorkflowInfo("(deleted workflow)", ()))
        url = f"/runs/{source['id']}" + (f"?search={quote(query, safe='')}" if query else "")
        return Hit(
            kind="run",
            id=source["id"],
            title=f"{wf.name} #{source['version']}",
            url=url,
            at=datetime.fromisoformat(source["created_at"]),
            status=source["status"],
            snippet=source.get("error_message") or "",
            detail={
                "workflow_id": source["workflow_id"],
                "workflow_name": wf.name,
                "version": source["version"],
                "trigger": source["trigger"],
                "tags": list(wf.tags),
                "finished_at": _when(source.get("finished_at")),
                "duration_ms": source.get("duration_ms"),
                "error": source.get("error_message"),
            },
        )
    if scope is Scope.WORKFLOWS:
        return Hit(
            kind="workflow",
            id=source["id"],
            title=source["name"],
            url=f"/workflows/{source['id']}/designer",
            at=datetime.fromisoformat(source["updated_at"]),
            status="published" if source.get("published") else "draft",
            snippet=(source.get("description") or "")[:200],
            detail={
                "tags": source.get("tags") or [],
                "active_version": source.get("active_version"),
                "owner": source.get("owner"),
                "node_types": source.get("node_types") or [],
            },
        )
    return Hit(
        kind="audit",
        id=str(source["id"]),
        title=f"{source['action']} {source['object_type']} {source['object_id']}",
        url=f"/admin/audit?object_type={quote(source['object_type'])}"
        f"&object_id={quote(source['object_id'])}",
        at=datetime.fromisoformat(source["at"]),
        detail={
            "action": source["action"],
            "object_type": source["object_type"],
            "object_id": source["object_id"],
            "actor": source.get("actor") or "system",
        },
    )


@dataclass(frozen=True)
class WorkflowInfo:
    """What a run hit shows of its workflow (read from PostgreSQL at search time)."""

    name: str
    tags: tuple[str, ...]


def read_response(
    response: dict[str, Any],
    criteria: Criteria,
    *,
    query: str,
    limit: int,
    workflows: dict[str, WorkflowInfo] | None = None,
) -> SearchResult:
    """A :class:`SearchResult` from a ``_search`` response body. ``workflows``: name and
    tags by workflow id, for run hits, the workflow facet's labels and the tag facet
    (summed over the per-workflow run counts)."""
    workflows = workflows or {}
    raw_hits = response.get("hits", {}).get("hits", [])
    page = raw_hits[:limit]
    total_info = response.get("hits", {}).get("total", {"value": 0, "relation": "eq"})
    exact = total_info.get("relation", "eq") == "eq"
    aggs = response.get("aggregations", {})
    facets = []
    for name in FACET_FIELDS[criteria.scope]:
        buckets = aggs.get(name, {}).get("buckets", [])
        values = [
            FacetValue(
                str(b["key"]),
                int(b["doc_count"]),
                workflows[str(b["key"])].name
                if name == "workflow" and str(b["key"]) in workflows
                else "",
            )
            for b in buckets
        ]
        facets.append(Facet(name, values[:FACET_SIZE]))
    if criteria.scope is Scope.RUNS:
        tags: dict[str, int] = {}
        for b in aggs.get("workflow", {}).get("buckets", []):
            for tag in workflows.get(str(b["key"]), WorkflowInfo("", ())).tags:
                tags[tag] = tags.get(tag, 0) + int(b["doc_count"])
        ranked = sorted(tags.items(), key=lambda kv: (-kv[1], kv[0]))[:FACET_SIZE]
        facets.append(Facet("tag", [FacetValue(t, n) for t, n in ranked]))
    next_cursor = (
        encode_cursor(criteria.sort, list(page[-1]["sort"]))
        if len(raw_hits) > limit and page
        else None
    )
    return SearchResult(
        scope=criteria.scope.value,
        query=query,
        sort=criteria.sort,
        total=int(total_info.get("value", 0)),
        total_exact=exact,
        hits=[_hit(criteria.scope, h["_source"], query, workflows) for h in page],
        facets=facets,
        next_cursor=next_cursor,
        backend="elasticsearch",
    )
