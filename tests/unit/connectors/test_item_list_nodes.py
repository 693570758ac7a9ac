"""Item-list nodes (merge, split out, remove duplicates, limit, rename keys), Crypto and
Date & time: calculate; each output checked against its declared output schema."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import pytest

from connectors import sdk
from connectors.builtin import data_crypto, data_dates, data_lists
from connectors.testing import ActionTestEnvironment
from tests.unit.connectors.output_schema import assert_declared_output

PEOPLE = [{"id": 1, "name": "Ada"}, {"id": 2, "name": "Bob"}, {"id": 3, "name": "Cy"}]
ORDERS = [
    {"person": 1, "total": 10},
    {"person": 1, "total": 5},
    {"person": 4, "total": 7},
]


async def run(action: sdk.ActionDefinition, config: dict[str, Any], input: Any = None) -> Any:
    env = ActionTestEnvironment(
        credentials={"key": {"type": "data.hmac_key", "secret": "s3cret"}},
        credential_types=[data_crypto.HMAC_KEY],
    )
    out = await env.run(action, config, input)
    assert_declared_output(action, out)
    return out


async def merge(mode: str, **config: Any) -> list[Any]:
    out = await run(data_lists.merge, {"left": PEOPLE, "right": ORDERS, "mode": mode, **config})
    assert out["count"] == len(out["items"])
    return list(out["items"])


async def test_merge_append_and_by_position() -> None:
    assert await merge("append") == PEOPLE + ORDERS
    zipped = await merge("by_position")
    assert zipped == [{**p, **o} for p, o in zip(PEOPLE, ORDERS, strict=True)]
    short = await run(
        data_lists.merge, {"left": PEOPLE, "right": ORDERS[:1], "mode": "by_position"}
    )
    assert short["items"] == [{**PEOPLE[0], **ORDERS[0]}, PEOPLE[1], PEOPLE[2]]
    dropped = await run(
        data_lists.merge,
        {"left": PEOPLE, "right": ORDERS[:1], "mode": "by_position", "unpaired": "drop"},
    )
    assert dropped["items"] == [{**PEOPLE[0], **ORDERS[0]}]


async def test_merge_by_key_looks_up_the_first_match() -> None:
    items = await merge("by_key", left_key="id", right_key="person")
    assert items == [{**PEOPLE[0], **ORDERS[0]}, PEOPLE[1], PEOPLE[2]]


@pytest.mark.parametrize(
    ("join_type", "expected"),
    [
        ("inner", [("Ada", 10), ("Ada", 5)]),
        ("left", [("Ada", 10), ("Ada", 5), ("Bob", None), ("Cy", None)]),
        ("right", [("Ada", 10), ("Ada", 5), (None, 7)]),
        ("outer", [("Ada", 10), ("Ada", 5), ("Bob", None), ("Cy", None), (None, 7)]),
    ],
)
async def test_merge_join_is_sql_like(join_type: str, expected: list[Any]) -> None:
    items = await merge("join", left_key="id", right_key="person", join_type=join_type)
    assert [(i.get("name"), i.get("total")) for i in items] == expected


async def test_merge_refuses_what_it_cannot_merge() -> None:
    with pytest.raises(sdk.ConfigError, match="needs a Left key"):
        await run(data_lists.merge, {"left": PEOPLE, "right": ORDERS, "mode": "join"})
    with pytest.raises(sdk.ConfigError, match="right must be a list"):
        await run(data_lists.merge, {"left": PEOPLE, "right": {"a": 1}})
    with pytest.raises(sdk.ConfigError, match="merging needs objects"):
        await run(data_lists.merge, {"left": [1], "right": [2], "mode": "by_position"})


async def test_split_out() -> None:
    rows = [{"order": 1, "lines": [{"sku": "a"}, {"sku": "b"}]}, {"order": 2, "lines": "x"}]
    out = await run(data_lists.split_out, {"field": "lines"}, rows)
    assert out == {"items": [{"sku": "a"}, {"sku": "b"}], "count": 2}
    out = await run(
        data_lists.split_out,
        {"field": "lines", "include": "other_fields", "destination": "line"},
        rows,
    )
    assert out["items"] == [{"order": 1, "line": {"sku": "a"}}, {"order": 1, "line": {"sku": "b"}}]
    nested = [{"o": {"tags": [1, 2], "k": 0}}]
    out = await run(data_lists.split_out, {"field": "o.tags", "include": "other_fields"}, nested)
    assert out["items"] == [{"o": {"k": 0}, "tags": 1}, {"o": {"k": 0}, "tags": 2}]


async def test_remove_duplicates() -> None:
    rows = [{"a": 1, "b": 1}, {"a": 1, "b": 2}, {"a": 2, "b": 1}, {"a": 1, "b": 1}]
    out = await run(data_lists.remove_duplicates, {}, rows)
    assert out == {"items": rows[:3], "count": 3, "removed": 1}
    out = await run(data_lists.remove_duplicates, {"fields": ["a"]}, rows)
    assert out["items"] == [rows[0], rows[2]]
    out = await run(data_lists.remove_duplicates, {"fields": ["a"], "keep": "last"}, rows)
    assert out["items"] == [rows[2], rows[3]]
    out = await run(data_lists.remove_duplicates, {}, [{"x": 1, "y": 2}, {"y": 2, "x": 1}, 1, "1"])
    assert out["removed"] == 1  # key order does not matter; 1 and "1" differ


async def test_limit() -> None:
    rows = list(range(5))
    assert (await run(data_lists.limit, {"max_items": 2}, rows))["items"] == [0, 1]
    out = await run(data_lists.limit, {"max_items": 2, "keep": "last"}, {"items": rows})
    assert out == {"items": [3, 4], "count": 2, "dropped": 3}
    assert (await run(data_lists.limit, {"max_items": 0, "keep": "last"}, rows))["items"] == []
    with pytest.raises(sdk.ConfigError):
        await run(data_lists.limit, {"max_items": -1}, rows)


async def test_rename_keys() -> None:
    rows = [{"first": "Ada", "addr": {"zip": "1"}}, {"other": 1}]
    renames = [{"from": "first", "to": "name"}, {"from": "addr.zip", "to": "postal.code"}]
    out = await run(data_lists.rename_keys, {"renames": renames}, rows)
    assert out["items"] == [{"addr": {}, "name": "Ada", "postal": {"code": "1"}}, {"other": 1}]


async def test_crypto_hash_hmac_and_random() -> None:
    out = await run(data_crypto.crypto, {"value": "abc"})
    assert out["value"] == hashlib.sha256(b"abc").hexdigest()
    out = await run(data_crypto.crypto, {"value": {"b": 1, "a": 2}, "algorithm": "md5"})
    assert out["value"] == hashlib.md5(b'{"a":2,"b":1}').hexdigest()
    out = await run(data_crypto.crypto, {"operation": "hmac", "value": "abc", "secret": "key"})
    assert out["value"] == hmac.new(b"s3cret", b"abc", "sha256").hexdigest()
    out = await run(
        data_crypto.crypto, {"operation": "random", "length": 16, "encoding": "base64url"}
    )
    assert len(out["value"]) == 22
    out = await run(data_crypto.crypto, {"operation": "random", "encoding": "uuid"})
    assert len(out["value"]) == 36 and out["value"][14] == "4"
    with pytest.raises(sdk.ConfigError, match="HMAC needs an HMAC key"):
        await run(data_crypto.crypto, {"operation": "hmac", "value": "abc"})


async def calc(**config: Any) -> Any:
    return (await run(data_dates.date_calc, config))["result"]


async def test_date_calc_add_in_calendar_and_elapsed_units() -> None:
    assert await calc(value="2024-01-31T10:00:00Z", amount=1, unit="months") == (
        "2024-02-29T10:00:00+00:00"
    )
    assert await calc(value="2024-03-31", amount=-1, unit="quarters") == "2023-12-31T00:00:00+00:00"
    berlin = {"timezone": "Europe/Berlin"}
    # a wall-clock day across the spring-forward gap keeps 09:00; 24 hours do not
    assert await calc(value="2024-03-30T09:00:00", amount=1, unit="days", **berlin) == (
        "2024-03-31T09:00:00+02:00"
    )
    assert await calc(value="2024-03-30T09:00:00", amount=24, unit="hours", **berlin) == (
        "2024-03-31T10:00:00+02:00"
    )
    with pytest.raises(sdk.ConfigError, match="whole numbers"):
        await calc(value="2024-01-01", amount=0.5, unit="months")


async def test_date_calc_months_and_naive_times_never_land_in_a_dst_gap() -> None:
    """Berlin's clocks jump from 02:00 to 03:00 on 29 March 2026: a month added onto that
    night and a naive 02:30 read as it is both give the first instant after the gap, as
    days do (the scheduler's rule, connectors.sdk.wallclock), never 02:30 or 03:30."""
    berlin = {"timezone": "Europe/Berlin"}
    assert await calc(value="2026-01-29T02:30:00", amount=2, unit="months", **berlin) == (
        "2026-03-29T03:00:00+02:00"
    )
    assert await calc(value="2026-02-28T02:30:00", amount=1, unit="days", **berlin) == (
        "2026-03-01T02:30:00+01:00"
    )
    assert await calc(value="2026-03-29T02:30:00", amount=0, unit="days", **berlin) == (
        "2026-03-29T03:00:00+02:00"
    )
    assert await calc(value="2026-03-29T02:30:00", amount=1, unit="hours", **berlin) == (
        "2026-03-29T04:00:00+02:00"
    )


async def test_date_calc_difference() -> None:
    pair = {"value": "2024-01-31T00:00:00Z", "other": "2024-03-30T12:00:00Z"}
    assert await calc(operation="difference", unit="months", **pair) == 1
    assert await calc(operation="difference", unit="days", **pair) == 59.5
    swapped = {"value": pair["other"], "other": pair["value"]}
    assert await calc(operation="difference", unit="months", **swapped) == -1
    assert await calc(operation="difference", unit="years", **pair) == 0


async def test_date_calc_start_end_and_parts() -> None:
    moment = {"value": "2024-05-15T13:45:30Z", "timezone": "America/New_York"}
    assert await calc(operation="start_of", unit="days", **moment) == "2024-05-15T00:00:00-04:00"
    assert await calc(operation="start_of", unit="weeks", **moment) == "2024-05-13T00:00:00-04:00"
    assert await calc(operation="end_of", unit="months", **moment) == (
        "2024-05-31T23:59:59.999999-04:00"
    )
    assert await calc(operation="start_of", unit="quarters", **moment) == (
        "2024-04-01T00:00:00-04:00"
    )
    assert await calc(operation="extract", part="hour", **moment) == 9
    assert await calc(operation="extract", part="weekday", **moment) == 3
    assert await calc(operation="extract", part="iso_week", **moment) == 20
    assert await calc(operation="extract", part="quarter", **moment) == 2
    with pytest.raises(sdk.NonRetryableError, match="cannot parse"):
        await calc(value="yesterday-ish")
    with pytest.raises(sdk.ConfigError, match="unknown timezone"):
        await calc(timezone="Mars/Olympus")
