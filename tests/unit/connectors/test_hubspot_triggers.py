"""HubSpot polling triggers (connectors/builtin/hubspot_triggers.py) against the local
HubSpot-like server (tests/fakes/apis.py), driven by TriggerTestEnvironment."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from connectors import sdk
from connectors.builtin import hubspot, hubspot_triggers
from connectors.builtin.hubspot_triggers import contact_created, contact_updated
from connectors.testing import TriggerTestEnvironment
from tests.fakes.apis import HubSpotLike
from tests.unit.connectors.output_schema import assert_declared_output

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z in ms: long past, so the search delay is over
CONFIG = {"credential": "hs"}


def _env(crm: HubSpotLike, token: str = "pat-valid") -> TriggerTestEnvironment:
    return TriggerTestEnvironment(**crm.environment(token), credential_types=[hubspot.PRIVATE_APP])


def _searches(crm: HubSpotLike) -> list[dict[str, Any]]:
    return [r.body for r in crm.requests if r.path.endswith("/search")]


async def _drain(
    env: TriggerTestEnvironment, trig: sdk.TriggerDefinition, cursor: Any, **config: Any
) -> tuple[list[str], Any, int]:
    """Poll until a poll returns nothing: every event id in order, the last cursor and
    the number of polls that returned events."""
    ids: list[str] = []
    polls = 0
    while True:
        result = await env.poll(trig, {**CONFIG, **config}, cursor)
        cursor = result.cursor
        if not result.events:
            return ids, cursor, polls
        polls += 1
        ids += [e.id for e in result.events]


async def test_the_first_poll_starts_from_now(crm: HubSpotLike) -> None:
    env = _env(crm)
    old = [crm.add_contact({"email": f"old{n}@example.com"}, created_ms=T0 + n) for n in range(3)]
    first = await env.poll(contact_created, CONFIG, None)
    # The newest contacts, oldest first (what "include existing items" and a test event use).
    assert [e.id for e in first.events] == [f"{cid}:{T0 + n}" for n, cid in enumerate(old)]
    assert (await env.poll(contact_created, CONFIG, first.cursor)).events == []
    new = crm.add_contact({"email": "new@example.com", "firstname": "Ada"}, created_ms=T0 + 10)
    later = await env.poll(contact_created, CONFIG, first.cursor)
    (event,) = later.events
    assert event.id == f"{new}:{T0 + 10}" and event.meta == {"contact_id": new}
    assert event.data["properties"]["email"] == "new@example.com"
    assert event.data["properties"]["createdate"] == "2026-01-01T00:00:00.010Z"
    assert_declared_output(contact_created, event.data)  # type: ignore[arg-type]
    assert_declared_output(contact_created, contact_created.output_example)  # type: ignore[arg-type]
    assert _searches(crm)[-1] == {
        "filterGroups": [
            {"filters": [{"propertyName": "createdate", "operator": "GTE", "value": str(T0 + 2)}]}
        ],
        "sorts": [{"propertyName": "createdate", "direction": "ASCENDING"}],
        "properties": ["createdate", "email", "firstname", "lastmodifieddate", "lastname"],
        "limit": 100,
    }
    assert (await env.poll(contact_created, CONFIG, later.cursor)).events == []


async def test_the_first_poll_of_a_big_account_skips_everything_older(crm: HubSpotLike) -> None:
    env = _env(crm)
    for n in range(150):
        crm.add_contact(created_ms=T0 + n // 2)  # pairs share a millisecond
    first = await env.poll(contact_created, CONFIG, None)
    assert len(first.events) == 100
    assert (await env.poll(contact_created, CONFIG, first.cursor)).events == []
    late = crm.add_contact(created_ms=T0 + 80)
    assert [e.id for e in (await env.poll(contact_created, CONFIG, first.cursor)).events] == [
        f"{late}:{T0 + 80}"
    ]


async def test_an_empty_account_then_more_than_a_page_of_contacts(crm: HubSpotLike) -> None:
    env = _env(crm)
    first = await env.poll(contact_created, CONFIG, None)
    assert first.events == [] and first.cursor == {"after": 0, "seen": []}
    made = [crm.add_contact({"email": f"c{n}@example.com"}, created_ms=T0 + n) for n in range(250)]
    ids, _, polls = await _drain(env, contact_created, first.cursor)
    assert ids == [f"{cid}:{T0 + n}" for n, cid in enumerate(made)] and polls == 1
    bodies = _searches(crm)[1:]
    assert len(bodies) >= 3 and all(b["limit"] == 100 for b in bodies)


async def test_contacts_sharing_a_millisecond_are_neither_lost_nor_repeated(
    crm: HubSpotLike,
) -> None:
    env = _env(crm)
    cursor = (await env.poll(contact_created, CONFIG, None)).cursor
    batch = [crm.add_contact(created_ms=T0) for _ in range(250)]  # one batch import
    after = [crm.add_contact(created_ms=T0 + 1) for _ in range(3)]
    ids, cursor, _ = await _drain(env, contact_created, cursor)
    assert ids == [f"{c}:{T0}" for c in batch] + [f"{c}:{T0 + 1}" for c in after]
    assert any(b.get("after") == "200" for b in _searches(crm))  # paged within the tie
    # Two more at the cursor's exact millisecond show up in search late: both, once.
    late = [crm.add_contact(created_ms=T0 + 1) for _ in range(2)]
    again, _, _ = await _drain(env, contact_created, cursor)
    assert again == [f"{c}:{T0 + 1}" for c in late]


async def test_a_poll_is_bounded_and_the_next_one_continues(
    crm: HubSpotLike, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hubspot_triggers, "MAX_EVENTS_PER_POLL", 150)
    env = _env(crm)
    cursor = (await env.poll(contact_created, CONFIG, None)).cursor
    made = [crm.add_contact(created_ms=T0 + n // 40) for n in range(400)]
    ids, _, polls = await _drain(env, contact_created, cursor)
    assert ids == [f"{c}:{T0 + n // 40}" for n, c in enumerate(made)] and polls == 3


async def test_a_contact_changed_between_two_pages_shifts_no_other_out_of_the_poll(
    crm: HubSpotLike,
) -> None:
    env = _env(crm)
    cursor = (await env.poll(contact_updated, CONFIG, None)).cursor
    made = [crm.add_contact(created_ms=T0 + n) for n in range(150)]
    changes = iter([made[10]])

    def change_one(api: HubSpotLike) -> None:  # after the first page was answered
        for contact_id in changes:
            api.modify_contact(contact_id, at_ms=T0 + 10_000)

    crm.after_search = change_one
    ids, _, _ = await _drain(env, contact_updated, cursor)
    # Search orders by offset into results computed afresh per request: had the second
    # page been asked by offset, the contact after the changed one would be skipped.
    expected = [f"{c}:{T0 + n}" for n, c in enumerate(made)] + [f"{made[10]}:{T0 + 10_000}"]
    assert ids == expected


async def test_more_than_ten_thousand_new_contacts_get_past_the_search_cap(
    crm: HubSpotLike,
) -> None:
    env = _env(crm)
    cursor = (await env.poll(contact_created, CONFIG, None)).cursor
    made = {crm.add_contact(created_ms=T0 + n * 1000) for n in range(10_050)}
    ids, _, polls = await _drain(env, contact_created, cursor)
    assert len(ids) == len(set(ids)) == 10_050 and {i.split(":")[0] for i in ids} == made
    assert polls == 11  # 1,000 per poll
    assert max(int(b.get("after", 0)) for b in _searches(crm)) < 10_000


async def test_more_contacts_at_one_millisecond_than_search_can_page_fail_clearly(
    crm: HubSpotLike, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hubspot_triggers, "SEARCH_RESULT_CAP", 300)
    crm.search_cap = 300
    env = _env(crm)
    cursor = (await env.poll(contact_created, CONFIG, None)).cursor
    for _ in range(350):
        crm.add_contact(created_ms=T0)
    first = await env.poll(contact_created, CONFIG, cursor)
    assert len(first.events) == 300  # what could be read, with a cursor after it
    with pytest.raises(sdk.ActionError) as err:
        await env.poll(contact_created, CONFIG, first.cursor)
    assert err.value.kind == "hubspot_search_cap" and "300" in err.value.message


async def test_rate_limits_back_off_or_return_what_was_read(crm: HubSpotLike) -> None:
    env = _env(crm)
    cursor = (await env.poll(contact_created, CONFIG, None)).cursor
    crm.rate_limit_next = 1
    with pytest.raises(sdk.ActionError) as err:
        await env.poll(contact_created, CONFIG, cursor)
    assert err.value.retryable and err.value.retry_after == 10.0  # the interval header
    made = [crm.add_contact(created_ms=T0 + n) for n in range(250)]
    await asyncio.sleep(1.0)
    crm.search_per_second = 2  # HubSpot's secondly limit, tightened
    partial = await env.poll(contact_created, CONFIG, cursor)
    # Two pages were read (the second asked afresh from the 100th contact's time).
    assert [e.id for e in partial.events] == [f"{c}:{T0 + n}" for n, c in enumerate(made[:199])]
    with pytest.raises(sdk.ActionError) as err:
        await env.poll(contact_created, CONFIG, partial.cursor)
    assert err.value.kind == "hubspot_rate_limit" and err.value.retry_after == 1.0
    assert "secondly limit" in err.value.message
    crm.retry_after = "7"
    with pytest.raises(sdk.ActionError) as err:
        await env.poll(contact_created, CONFIG, partial.cursor)
    assert err.value.retry_after == 7.0
    await asyncio.sleep(1.0)
    rest = await env.poll(contact_created, CONFIG, partial.cursor)
    assert [e.id for e in rest.events] == [f"{c}:{T0 + 199 + n}" for n, c in enumerate(made[199:])]


async def test_updated_starts_a_run_per_change_and_created_only_for_new(crm: HubSpotLike) -> None:
    env = _env(crm)
    ada = crm.add_contact({"email": "ada@example.com"}, created_ms=T0)
    created = (await env.poll(contact_created, CONFIG, None)).cursor
    updated = (await env.poll(contact_updated, CONFIG, None)).cursor
    crm.modify_contact(ada, {"lastname": "Lovelace"}, at_ms=T0 + 500)
    assert (await env.poll(contact_created, CONFIG, created)).events == []
    change = await env.poll(contact_updated, CONFIG, updated)
    (event,) = change.events
    assert event.id == f"{ada}:{T0 + 500}" and event.data["properties"]["lastname"] == "Lovelace"
    assert event.data["properties"]["lastmodifieddate"] == "2026-01-01T00:00:00.500Z"
    assert_declared_output(contact_updated, event.data)  # type: ignore[arg-type]
    crm.modify_contact(ada, at_ms=T0 + 900)
    bob = crm.add_contact(created_ms=T0 + 1000)
    again = await env.poll(contact_updated, CONFIG, change.cursor)
    assert [e.id for e in again.events] == [f"{ada}:{T0 + 900}", f"{bob}:{T0 + 1000}"]
    assert [e.id for e in (await env.poll(contact_created, CONFIG, created)).events] == [
        f"{bob}:{T0 + 1000}"
    ]
    filters = _searches(crm)[-2]["filterGroups"][0]["filters"]
    assert filters[0]["propertyName"] == "lastmodifieddate"
    only_email = {"credential": "hs", "properties": ["email"]}
    shown = await env.poll(contact_updated, only_email, updated)
    assert set(shown.events[0].data["properties"]) == {"createdate", "email", "lastmodifieddate"}


@pytest.mark.parametrize(("lookback", "caught"), [(60, True), (0, False)])
async def test_a_contact_that_reaches_search_late_is_started_once(
    crm: HubSpotLike, lookback: int, caught: bool
) -> None:
    env = _env(crm)
    config = {"lookback_seconds": lookback}
    cursor = (await env.poll(contact_created, {**CONFIG, **config}, None)).cursor
    now = round(time.time() * 1000)
    first = crm.add_contact(created_ms=now)
    ids, cursor, _ = await _drain(env, contact_created, cursor, **config)
    assert ids == [f"{first}:{now}"]
    late = crm.add_contact(created_ms=now - 5000)  # written earlier, searchable only now
    ids, _, _ = await _drain(env, contact_created, cursor, **config)
    assert ids == ([f"{late}:{now - 5000}"] if caught else [])


async def test_bad_cursor_config_and_token_are_clear_errors(crm: HubSpotLike) -> None:
    env = _env(crm)
    with pytest.raises(sdk.NonRetryableError) as err:
        await env.poll(contact_created, CONFIG, {"after": "yesterday"})
    assert err.value.kind == "cursor_invalid"
    with pytest.raises(sdk.ConfigError, match="properties"):
        await env.poll(contact_created, {**CONFIG, "properties": ["First Name"]}, None)
    with pytest.raises(sdk.ConfigError, match="lookback_seconds"):
        await env.poll(contact_created, {**CONFIG, "lookback_seconds": -1}, None)
    with pytest.raises(sdk.NonRetryableError) as err:
        await _env(crm, token="pat-wrong").poll(contact_created, CONFIG, None)
    assert err.value.kind == "hubspot_invalid_authentication"


def test_the_hubspot_connector_declares_both_polling_triggers() -> None:
    assert {t.type: (t.kind, t.interval) for t in hubspot.connector.triggers} == {
        "hubspot.contact_created": ("polling", 60.0),
        "hubspot.contact_updated": ("polling", 60.0),
    }
    schema = contact_updated.config_json_schema()
    assert schema["properties"]["credential"]["x-credential-type"] == [
        "hubspot.private_app",
        "hubspot.oauth2",
    ]
