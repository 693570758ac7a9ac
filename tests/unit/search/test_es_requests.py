"""Elasticsearch request building against the documented request formats (index
template, bulk NDJSON, search with bool/sort/search_after/aggs/track_total_hits) and reading
a documented search response back."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from backend.search.criteria import build_criteria
from backend.search.es_documents import (
    MAPPINGS,
    audit_document,
    bulk_operations,
    flatten_values,
    index_template,
    run_document,
    workflow_document,
)
from backend.search.es_requests import WorkflowInfo, read_response, search_body
from backend.search.model import CursorError, Visibility, decode_cursor
from backend.search.query import Scope

T = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
ALL = Visibility(None, True)


def test_index_template_follows_the_put_index_template_format() -> None:
    body = index_template("railyard", "runs")
    assert body["index_patterns"] == ["railyard-runs*"]
    assert set(body["template"]) == {"settings", "mappings"}
    settings = body["template"]["settings"]
    analyzers = settings["analysis"]["analyzer"]
    normalizers = settings["analysis"]["normalizer"]
    props = body["template"]["mappings"]["properties"]
    assert body["template"]["mappings"]["dynamic"] == "strict"
    for field in props.values():
        assert field["type"] in {"keyword", "text", "date", "integer", "long", "boolean"}
        assert field.get("analyzer", "railyard_text") in analyzers
        assert field.get("normalizer", "railyard_lower") in normalizers
    json.dumps(body)  # plain JSON


def test_documents_hold_exactly_their_mapped_fields() -> None:
    run = run_document(
        {
            "id": "r1",
            "workflow_id": "w1",
            "status": "failed",
            "trigger": "webhook",
            "version_number": 3,
            "input": {"customer": {"id": "cust-4711", "tags": ["vip", 7, True, None]}},
            "output": None,
            "error": {"message": "HTTP 504 gateway timeout", "step_id": "http_1"},
            "created_at": T,
            "started_at": T,
            "finished_at": datetime(2026, 11, 30, 9, 0, 2, 500000, tzinfo=UTC),
            "steps": ["webhook", "http_1"],
        }
    )
    assert set(run) == set(MAPPINGS["runs"]["properties"])
    assert run["duration_ms"] == 2500 and run["error_message"] == "HTTP 504 gateway timeout"
    assert run["text"] == "cust-4711 vip 7 HTTP 504 gateway timeout http_1"
    wf = workflow_document(
        {
            "id": "w1",
            "name": "Order intake",
            "description": "",
            "tags": ["billing"],
            "active_version": None,
            "updated_at": T,
            "owner": "ada@example.com",
            "node_types": ["trigger.webhook", "http.request", "http.request"],
        }
    )
    assert set(wf) == set(MAPPINGS["workflows"]["properties"])
    assert wf["node_types"] == ["http.request", "trigger.webhook"] and wf["published"] is False
    audit = audit_document(
        {
            "id": 9,
            "at": T,
            "action": "workflow.update",
            "object_type": "workflow",
            "object_id": "w1",
            "actor_label": None,
            "actor_user_id": None,
            "details": {"fields": ["tags"]},
            "before": {"tags": []},
            "after": {"tags": ["eu"]},
        }
    )
    assert set(audit) == set(MAPPINGS["audit"]["properties"])
    assert audit["action_area"] == "workflow" and audit["actor"] == "system"
    assert flatten_values({"a": [1.5, {"b": "x"}], "c": False}) == ["1.5", "x"]


def test_bulk_body_pairs_actions_with_sources() -> None:
    ops = bulk_operations("railyard-runs", [{"id": "r1", "status": "failed"}], ["r0"])
    assert ops == [
        {"index": {"_index": "railyard-runs", "_id": "r1"}},
        {"id": "r1", "status": "failed"},
        {"delete": {"_index": "railyard-runs", "_id": "r0"}},
    ]
    ndjson = "\n".join(json.dumps(o) for o in ops) + "\n"
    assert ndjson.count("\n") == 3


def test_search_body_of_the_issues_example() -> None:
    c = build_criteria('status:failed tag:billing "gateway timeout" -cust-1 since:24h', now=T)
    # the backend resolves tag: to workflow ids in PostgreSQL before building
    c.filters[1] = type(c.filters[1])("workflow_id", ("w1", "w2"))
    body = search_body(c, Visibility(frozenset({"w2", "w1"}), False), limit=25, cursor=None)
    assert body == {
        "query": {
            "bool": {
                "filter": [
                    {"terms": {"workflow_id": ["w1", "w2"]}},
                    {"range": {"created_at": {"gte": "2026-11-29T09:00:00+00:00"}}},
                    {"terms": {"status": ["failed"]}},
                    {"terms": {"workflow_id": ["w1", "w2"]}},
                ],
                "must": [
                    {
                        "multi_match": {
                            "query": "gateway timeout",
                            "fields": ["text"],
                            "type": "phrase",
                        }
                    }
                ],
                "must_not": [
                    {
                        "multi_match": {
                            "query": "cust-1",
                            "fields": ["text"],
                            "type": "best_fields",
                            "operator": "and",
                        }
                    }
                ],
            }
        },
        "sort": [{"created_at": "desc"}, {"id": "desc"}],
        "size": 26,
        "track_total_hits": 10000,
        "aggs": {
            "status": {"terms": {"field": "status", "size": 10}},
            "workflow": {"terms": {"field": "workflow_id", "size": 1000}},
            "trigger": {"terms": {"field": "trigger", "size": 10}},
        },
    }


def test_search_body_visibility_scopes_and_sorts() -> None:
    none = search_body(build_criteria("x"), Visibility(frozenset(), True), limit=5, cursor=None)
    assert none["query"] == {"match_none": {}}
    audit = build_criteria("in:audit action:workflow actor:ada@example.com")
    assert search_body(audit, Visibility(None, False), limit=5, cursor=None)["query"] == {
        "match_none": {}
    }
    body = search_body(audit, ALL, limit=5, cursor=None)
    assert body["query"]["bool"]["filter"][0] == {
        "bool": {
            "should": [{"term": {"action": "workflow"}}, {"term": {"action_area": "workflow"}}],
            "minimum_should_match": 1,
        }
    }
    assert body["sort"] == [{"at": "desc"}, {"id": "desc"}]
    wf = build_criteria("in:workflows ordr sort:name")
    body = search_body(wf, ALL, limit=5, cursor=None)
    assert body["query"]["bool"]["must"][0]["multi_match"]["fuzziness"] == "AUTO"
    assert body["sort"] == [{"name.raw": "asc"}, {"id": "asc"}]
    dur = search_body(build_criteria("sort:duration"), ALL, limit=5, cursor=None)
    assert dur["sort"][0] == {"duration_ms": {"order": "desc", "missing": -1}}


def test_response_becomes_a_result_with_facets_and_a_cursor() -> None:
    response = {
        "took": 3,
        "timed_out": False,
        "hits": {
            "total": {"value": 10000, "relation": "gte"},
            "max_score": None,
            "hits": [
                {
                    "_index": "railyard-runs",
                    "_id": rid,
                    "_score": None,
                    "_source": {
                        "id": rid,
                        "workflow_id": "w1",
                        "status": "failed",
                        "trigger": "webhook",
                        "version": 2,
                        "error_message": "boom",
                        "created_at": "2026-11-30T09:00:00+00:00",
                        "finished_at": None,
                        "duration_ms": None,
                    },
                    "sort": [1764493200000 - i, rid],
                }
                for i, rid in enumerate(["r3", "r2", "r1"])
            ],
        },
        "aggregations": {
            "status": {"buckets": [{"key": "failed", "doc_count": 12000}]},
            "workflow": {
                "buckets": [{"key": "w1", "doc_count": 9000}, {"key": "w2", "doc_count": 3000}]
            },
            "trigger": {"buckets": [{"key": "webhook", "doc_count": 12000}]},
        },
    }
    c = build_criteria("status:failed")
    workflows = {
        "w1": WorkflowInfo("Order intake", ("billing", "eu")),
        "w2": WorkflowInfo("B", ("eu",)),
    }
    result = read_response(response, c, query="status:failed", limit=2, workflows=workflows)
    assert [h.id for h in result.hits] == ["r3", "r2"]
    assert result.hits[0].title == "Order intake #2" and result.hits[0].detail["tags"] == [
        "billing",
        "eu",
    ]
    assert result.hits[0].url == "/runs/r3?search=status%3Afailed"
    assert (result.total, result.total_exact, result.backend) == (10000, False, "elasticsearch")
    facets = {f.field: [(v.value, v.count, v.label) for v in f.values] for f in result.facets}
    assert facets["workflow"] == [("w1", 9000, "Order intake"), ("w2", 3000, "B")]
    assert facets["tag"] == [("eu", 12000, ""), ("billing", 9000, "")]
    assert result.next_cursor is not None
    assert decode_cursor(result.next_cursor, "newest", 2) == [1764493200000 - 1, "r2"]
    after = search_body(c, ALL, limit=2, cursor=result.next_cursor)
    assert after["search_after"] == [1764493200000 - 1, "r2"]
    with pytest.raises(CursorError):
        search_body(build_criteria("sort:oldest"), ALL, limit=2, cursor=result.next_cursor)
    assert Scope.RUNS.value == result.scope
