"""The dashboard's chart links are searches the search accepts (frontend/dashboard_pages.py)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlsplit

from backend.search.criteria import build_criteria
from frontend.dashboard_pages import search_link


def query_of(link: str) -> str:
    parts = urlsplit(link)
    assert parts.path == "/search"
    return parse_qs(parts.query)["q"][0]


def test_dashboard_links_are_searches_of_the_window() -> None:
    wid = uuid.UUID("0b6c3e0e-5d1f-4f5c-9a51-3f0c2f1f6a10")
    q = query_of(search_link("failed", wid, minutes=60))
    assert q == f"status:failed,timed_out workflow:{wid} since:60m"
    criteria = build_criteria(q)
    assert {f.field: f.values for f in criteria.filters} == {
        "status": ("failed", "timed_out"),
        "workflow": (str(wid),),
    }
    assert criteria.after is not None and criteria.before is None
    assert query_of(search_link(minutes=15)) == (
        "status:succeeded,failed,cancelled,timed_out since:15m"
    )
    assert query_of(search_link("running", minutes=15)) == "status:running"
    slowest = query_of(search_link(None, wid, minutes=60, sort="duration"))
    assert slowest.endswith(f"workflow:{wid} since:60m sort:duration")
    assert build_criteria(slowest).sort == "duration"


def test_dashboard_bar_links_search_their_bucket() -> None:
    start = datetime(2026, 12, 1, 14, 5, tzinfo=UTC)
    end = datetime(2026, 12, 1, 14, 6, tzinfo=UTC)
    q = query_of(search_link("other", start=start, end=end))
    assert q == "status:cancelled after:2026-12-01T14:05 before:2026-12-01T14:06"
    criteria = build_criteria(q)
    assert (criteria.after, criteria.before) == (start, end)
