"""The query parser and criteria: terms, fields, quoting, negation, lists, and errors with
their positions."""

from __future__ import annotations

import typing
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from backend.search.criteria import (
    ALL_FIELDS,
    SORTS,
    Filter,
    SortArgumentError,
    SortName,
    build_criteria,
)
from backend.search.query import FieldClause, QuerySyntaxError, Scope, TextTerm, parse

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_the_issues_example_parses_into_clauses_and_a_phrase() -> None:
    q = parse('status:failed workflow:"Order intake" tag:billing "timeout"', ALL_FIELDS)
    assert q.clauses == [
        FieldClause("status", ("failed",), False, 0),
        FieldClause("workflow", ("Order intake",), False, 14),
        FieldClause("tag", ("billing",), False, 38),
    ]
    assert q.text == [TextTerm("timeout", True, False, 50)]


def test_negation_lists_escapes_and_colon_words() -> None:
    q = parse(r'-status:succeeded,failed -rush "say \"hi\"" 12:30 https://x.example/a', ALL_FIELDS)
    assert q.clauses == [FieldClause("status", ("succeeded", "failed"), True, 0)]
    assert [(t.text, t.phrase, t.negated) for t in q.text] == [
        ("rush", False, True),
        ('say "hi"', True, False),
        ("12:30", False, False),
        ("https://x.example/a", False, False),
    ]
    assert parse("-", ALL_FIELDS).text == [TextTerm("-", False, False, 0)]
    assert parse("Status:FAILED", ALL_FIELDS).clauses[0].field == "status"


@pytest.mark.parametrize(
    ("text", "position", "message"),
    [
        ('"open', 0, "unterminated quote"),
        ("a stauts:failed", 2, "did you mean status:?"),
        ("status:", 7, "status: needs a value"),
        ("status:failed,", 14, "status: needs a value"),
        ('tag:"a"b', 7, "separate terms with a space"),
        ("x" * 1001, 1000, "at most 1000"),
    ],
)
def test_parse_errors_say_what_and_where(text: str, position: int, message: str) -> None:
    with pytest.raises(QuerySyntaxError) as caught:
        parse(text, ALL_FIELDS)
    assert message in caught.value.message and caught.value.position == position


def test_criteria_check_values_and_scopes() -> None:
    c = build_criteria("status:FAILED,timed_out version:3 -tag:Billing since:2h", now=NOW)
    assert c.scope is Scope.RUNS and c.sort == "newest"
    assert c.filters == [
        Filter("status", ("failed", "timed_out")),
        Filter("version", (3,)),
        Filter("tag", ("billing",), True),
    ]
    assert c.after == NOW - timedelta(hours=2) and c.before is None
    c = build_criteria("in:workflows type:slack.post_message sort:name", now=NOW)
    assert c.scope is Scope.WORKFLOWS and c.sort == "name"
    c = build_criteria("after:2026-11-01 before:2026-11-02T10:00+01:00", scope=Scope.AUDIT)
    assert c.after == datetime(2026, 11, 1, tzinfo=UTC)
    assert c.before == datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("status:done", "'done' is not a run status"),
        ("trigger:cron", "'cron' is not a trigger"),
        ("type:x", "searches workflows, not runs (add in:workflows)"),
        ("in:audit status:failed", "searches runs, not audit"),
        ("since:soon", "is not a time"),
        ("-since:2h", "cannot be negated"),
        ("sort:fastest", "does not sort runs"),
        ("id:12", "needs a run id"),
        ("in:workflows published:maybe", "published: is yes or no"),
    ],
)
def test_criteria_refuse_bad_values(text: str, message: str) -> None:
    with pytest.raises(QuerySyntaxError) as caught:
        build_criteria(text, now=NOW)
    assert message in caught.value.message


@given(st.text(max_size=200))
def test_any_text_parses_or_fails_with_a_position_inside_it(text: str) -> None:
    try:
        parsed = parse(text, ALL_FIELDS)
    except QuerySyntaxError as exc:
        assert 0 <= exc.position <= max(len(text), 1)
    else:
        assert all(t.text for t in parsed.text)
        assert all(all(v for v in c.values) or c.values for c in parsed.clauses)


def test_the_sort_parameter_names_every_sort_of_every_scope() -> None:
    assert set(typing.get_args(SortName)) == {s for sorts in SORTS.values() for s in sorts}


def test_a_sort_argument_the_scope_lacks_is_the_arguments_fault() -> None:
    with pytest.raises(SortArgumentError):
        build_criteria("", scope=Scope.RUNS, sort="name")
    with pytest.raises(QuerySyntaxError):  # written in the text: the text's fault
        build_criteria("sort:name", scope=Scope.RUNS)
