"""Core data nodes: filter, sort, aggregate, date/time, text template."""

from __future__ import annotations

import pytest

from connectors import sdk
from connectors.builtin import data
from connectors.testing import ActionTestEnvironment
from tests.unit.connectors.output_schema import assert_declared_output

ROWS = [
    {"name": "b", "team": "x", "score": 3, "meta": {"city": "Oslo"}},
    {"name": "a", "team": "y", "score": 10},
    {"name": "c", "team": "x", "score": None},
    {"name": "d", "team": "x", "score": 7, "meta": {"city": "Rome"}},
]


async def test_filter() -> None:
    env = ActionTestEnvironment()
    out = await env.run(data.filter_items, {"field": "score", "operator": "gte", "value": 7}, ROWS)
    assert [r["name"] for r in out["items"]] == ["a", "d"]
    assert out["count"] == 2 and out["dropped"] == 2
    out = await env.run(data.filter_items, {"field": "meta.city", "operator": "exists"}, ROWS)
    assert [r["name"] for r in out["items"]] == ["b", "d"]
    out = await env.run(
        data.filter_items, {"items": ROWS, "field": "team", "operator": "in", "value": ["y"]}, None
    )
    assert [r["name"] for r in out["items"]] == ["a"]
    with pytest.raises(sdk.ConfigError):
        await env.run(data.filter_items, {"field": "x"}, {"not": "a list"})


async def test_filter_condition_is_jsonata_read_on_each_item() -> None:
    """What the designer's condition builder writes: AND within a group, OR between."""
    env = ActionTestEnvironment()
    condition = '(team = "x" and score = 7) or team = "y"'
    out = await env.run(data.filter_items, {"condition": condition}, ROWS)
    assert [r["name"] for r in out["items"]] == ["a", "d"]
    assert out["count"] == 2 and out["dropped"] == 2
    # the condition wins over field/operator/value; a leading "=" is allowed
    out = await env.run(
        data.filter_items, {"condition": '=$contains(name, "a")', "field": "team"}, ROWS
    )
    assert [r["name"] for r in out["items"]] == ["a"]


async def test_filter_condition_errors_name_the_field() -> None:
    env = ActionTestEnvironment()
    with pytest.raises(sdk.ConfigError, match="condition: not a valid JSONata"):
        await env.run(data.filter_items, {"condition": "score >"}, ROWS)
    with pytest.raises(sdk.ConfigError, match="condition: set a condition"):
        await env.run(data.filter_items, {}, ROWS)
    # JSONata refuses to order null against a number: the step fails naming the field
    with pytest.raises(sdk.ActionError, match="condition: evaluating the expression failed"):
        await env.run(data.filter_items, {"condition": "score > 5"}, ROWS)


async def test_sort_multi_key_none_last() -> None:
    env = ActionTestEnvironment()
    out = await env.run(
        data.sort_items,
        {"keys": [{"field": "team"}, {"field": "score", "direction": "desc"}]},
        ROWS,
    )
    assert [r["name"] for r in out["items"]] == ["d", "b", "c", "a"]


async def test_aggregate_grouped_and_total() -> None:
    env = ActionTestEnvironment()
    aggs = [
        {"op": "count", "as": "n"},
        {"op": "sum", "field": "score", "as": "total"},
        {"op": "avg", "field": "score"},
        {"op": "collect", "field": "name", "as": "names"},
    ]
    out = await env.run(data.aggregate, {"group_by": "team", "aggregations": aggs}, ROWS)
    assert out["groups"] == [
        {"key": "x", "n": 3, "total": 10, "avg_score": 5.0, "names": ["b", "c", "d"]},
        {"key": "y", "n": 1, "total": 10, "avg_score": 10.0, "names": ["a"]},
    ]
    out = await env.run(data.aggregate, {"aggregations": [{"op": "max", "field": "score"}]}, ROWS)
    assert out == {"result": {"max_score": 10}}


async def test_datetime_zones_and_format() -> None:
    env = ActionTestEnvironment()
    out = await env.run(
        data.format_datetime,
        {
            "value": "2026-03-29T00:30:00Z",
            "timezone": "Europe/Berlin",
            "format": "%Y-%m-%d %H:%M %Z",
            "add_hours": 2,
        },
        None,
    )
    assert out["formatted"] == "2026-03-29 04:30 CEST"  # DST starts at 01:00 UTC
    assert out["weekday"] == "Sunday"
    out = await env.run(
        data.format_datetime,
        {"value": "2026-01-01T09:00:00", "input_timezone": "America/New_York"},
        None,
    )
    assert out["iso"] == "2026-01-01T14:00:00+00:00"
    with pytest.raises(sdk.ConfigError):
        await env.run(data.format_datetime, {"timezone": "Mars/Base"}, None)
    with pytest.raises(sdk.NonRetryableError):
        await env.run(data.format_datetime, {"value": "yesterday-ish"}, None)


BERLIN = {"input_timezone": "Europe/Berlin", "timezone": "Europe/Berlin"}


async def test_datetime_never_produces_a_local_time_that_does_not_exist() -> None:
    """Clocks in Berlin jump from 02:00 to 03:00 on 29 March 2026: the scheduler's rule
    (the first instant after the gap) holds for days; hours are elapsed time."""
    env = ActionTestEnvironment()
    day = await env.run(
        data.format_datetime, {**BERLIN, "value": "2026-03-28T02:30:00", "add_days": 1}, None
    )
    assert day["iso"] == "2026-03-29T03:00:00+02:00"
    hour = await env.run(
        data.format_datetime, {**BERLIN, "value": "2026-03-29T01:30:00", "add_hours": 1}, None
    )
    assert hour["iso"] == "2026-03-29T03:30:00+02:00"
    # clocks fall back on 25 October: a repeated 02:30 is its first occurrence
    repeated = await env.run(
        data.format_datetime, {**BERLIN, "value": "2026-10-24T02:30:00", "add_days": 1}, None
    )
    assert repeated["iso"] == "2026-10-25T02:30:00+02:00"


async def test_datetime_reads_a_naive_time_in_the_gap_by_the_schedulers_rule() -> None:
    """02:30 on 29 March 2026 does not exist in Berlin: given as it is, it is read as the
    first instant after the gap (03:00), the same answer "+1 day" from 28 March gives and
    the scheduler fires at; a repeated 02:30 in October is its first occurrence (CEST)."""
    env = ActionTestEnvironment()
    direct = await env.run(data.format_datetime, {**BERLIN, "value": "2026-03-29T02:30:00"}, None)
    assert direct["iso"] == "2026-03-29T03:00:00+02:00"
    repeated = await env.run(data.format_datetime, {**BERLIN, "value": "2026-10-25T02:30:00"}, None)
    assert repeated["iso"] == "2026-10-25T02:30:00+02:00"


async def test_datetime_days_are_calendar_days_with_or_without_an_offset() -> None:
    env = ActionTestEnvironment()
    naive = await env.run(
        data.format_datetime, {**BERLIN, "value": "2026-03-28T12:00:00", "add_days": 1}, None
    )
    offset = await env.run(
        data.format_datetime, {**BERLIN, "value": "2026-03-28T12:00:00+01:00", "add_days": 1}, None
    )
    assert naive["iso"] == offset["iso"] == "2026-03-29T12:00:00+02:00"


async def test_text_template_never_rounds_an_integer_beyond_2_53() -> None:
    """Arithmetic on a big id in a template answers the exact integer or fails the step
    naming the operation, never ``4503599627370496.0`` or ``1.35e+16``."""
    env = ActionTestEnvironment()
    big = {"id": 9007199254740993}
    template = "{{ input.id }} {{ input.id + 1 }} {{ input.id / 1 }} {{ input.id | round }}"
    out = await env.run(data.render_text, {"template": template}, big)
    assert out == {"text": "9007199254740993 9007199254740994 9007199254740993 9007199254740993"}
    assert (await env.run(data.render_text, {"template": "{{ 7 / 2 }}"}, big))["text"] == "3.5"
    for inexact in ("{{ input.id / 2 }}", "{{ input.id * 1.5 }}"):
        with pytest.raises(sdk.NonRetryableError, match="has no exact value") as err:
            await env.run(data.render_text, {"template": inexact}, big)
        assert err.value.kind == "template_error"


async def test_text_template_sandboxed_and_escaped() -> None:
    env = ActionTestEnvironment()
    out = await env.run(
        data.render_text,
        {"template": "Hi {{ input.name }}, {{ data | length }}", "data": [1, 2]},
        {"name": "<b>"},
    )
    assert out == {"text": "Hi <b>, 2"}
    out = await env.run(
        data.render_text, {"template": "{{ input.name }}", "html": True}, {"name": "<b>"}
    )
    assert out == {"text": "&lt;b&gt;"}
    with pytest.raises(sdk.NonRetryableError) as err:
        await env.run(data.render_text, {"template": "{{ input.__class__.__subclasses__() }}"}, {})
    assert err.value.kind == "template_error"


# -- each node's real output satisfies the output schema it declares ------------------


async def test_filter_output_matches_declared_schema() -> None:
    env = ActionTestEnvironment()
    out = await env.run(data.filter_items, {"field": "score", "operator": "gt", "value": 5}, ROWS)
    assert out["count"] == 2
    assert_declared_output(data.filter_items, out)
    none_kept = await env.run(data.filter_items, {"field": "missing", "operator": "exists"}, ROWS)
    assert none_kept == {"items": [], "count": 0, "dropped": 4}
    assert_declared_output(data.filter_items, none_kept)


async def test_sort_output_matches_declared_schema() -> None:
    env = ActionTestEnvironment()
    out = await env.run(data.sort_items, {"keys": [{"field": "name"}]}, {"items": ROWS})
    assert [r["name"] for r in out["items"]] == ["a", "b", "c", "d"]
    assert_declared_output(data.sort_items, out)


EVERY_AGGREGATION = [
    {"op": "count"},
    {"op": "sum", "field": "score"},
    {"op": "avg", "field": "score"},
    {"op": "min", "field": "score", "as": "low"},
    {"op": "max", "field": "score", "as": "high"},
    {"op": "collect", "field": "meta.city", "as": "cities"},
    {"op": "count_distinct", "field": "team", "as": "teams"},
    {"op": "first", "field": "meta"},
    {"op": "last", "field": "name"},
]


async def test_aggregate_output_matches_declared_schema() -> None:
    env = ActionTestEnvironment()
    total = await env.run(data.aggregate, {"aggregations": EVERY_AGGREGATION}, ROWS)
    assert total["result"]["cities"] == ["Oslo", "Rome"] and total["result"]["teams"] == 2
    assert_declared_output(data.aggregate, total)
    grouped = await env.run(
        data.aggregate, {"group_by": "meta.city", "aggregations": EVERY_AGGREGATION}, ROWS
    )
    assert [g["key"] for g in grouped["groups"]] == ["Oslo", None, "Rome"]
    assert grouped["groups"][1]["first_meta"] is None
    assert_declared_output(data.aggregate, grouped)
    empty = await env.run(
        data.aggregate, {"group_by": "team", "aggregations": [{"op": "count"}]}, []
    )
    assert empty == {"groups": []}
    assert_declared_output(data.aggregate, empty)


async def test_datetime_output_matches_declared_schema() -> None:
    env = ActionTestEnvironment()
    out = await env.run(
        data.format_datetime,
        {"value": 1767225600, "timezone": "Asia/Tokyo", "format": "%d.%m.%Y", "add_days": 1.5},
        None,
    )
    assert out["formatted"] == "02.01.2026" and out["iso"] == "2026-01-02T21:00:00+09:00"
    assert_declared_output(data.format_datetime, out)
    now = await env.run(data.format_datetime, {}, None)
    assert_declared_output(data.format_datetime, now)


async def test_text_template_output_matches_declared_schema() -> None:
    env = ActionTestEnvironment()
    out = await env.run(
        data.render_text, {"template": "{% for r in input %}{{ r.name }}{% endfor %}"}, ROWS
    )
    assert out == {"text": "bacd"}
    assert_declared_output(data.render_text, out)
