"""Facet links of the results page: the clause is added once, values are quoted when the
query syntax needs it, and the link parses back to the same criteria."""

from __future__ import annotations

from backend.search.criteria import build_criteria
from frontend.search_pages import quoted, search_url, with_clause


def test_facet_links_add_a_quoted_clause_once() -> None:
    assert quoted("failed") == "failed"
    assert quoted("Order intake") == '"Order intake"'
    assert quoted('say "hi", ok') == '"say \\"hi\\", ok"'
    q = with_clause("cust-4711", "status", "failed")
    assert q == "cust-4711 status:failed"
    assert with_clause(q, "status", "failed") == q
    named = with_clause("", "workflow", 'Order "B", intake')
    criteria = build_criteria(named)
    assert criteria.filters[0].values == ('Order "B", intake',)
    assert search_url("a b", "runs", "oldest") == "/search?q=a+b&in=runs&sort=oldest"
    assert search_url("", "audit") == "/search?in=audit"
