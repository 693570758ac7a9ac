"""HubSpot connector against a local HubSpot-like server (tests/fakes/apis.py)."""

from __future__ import annotations

from typing import Any

import pytest

from connectors import sdk
from connectors.builtin import hubspot
from connectors.testing import ActionTestEnvironment
from tests.fakes.apis import HubSpotLike
from tests.unit.connectors.output_schema import assert_declared_output


def _env(crm: HubSpotLike, token: str = "pat-valid") -> ActionTestEnvironment:
    return ActionTestEnvironment(**crm.environment(token), credential_types=[hubspot.PRIVATE_APP])


async def test_contact_lifecycle_and_deal_association(crm: HubSpotLike) -> None:
    env = _env(crm)
    created = await env.run(
        hubspot.create_contact,
        {"credential": "hs", "properties": {"email": "Ada@Example.com", "firstname": "Ada"}},
        None,
    )
    assert created["id"] and created["properties"]["email"] == "ada@example.com"
    assert crm.requests[0].body == {"properties": {"email": "Ada@Example.com", "firstname": "Ada"}}
    updated = await env.run(
        hubspot.update_contact,
        {"credential": "hs", "contact_id": created["id"], "properties": {"lastname": "L"}},
        None,
    )
    assert updated["properties"]["lastname"] == "L"
    upserted = await env.run(
        hubspot.upsert_contact,
        {"credential": "hs", "email": "ada@example.com", "properties": {"phone": "1"}},
        None,
    )
    assert upserted["id"] == created["id"] and upserted["new"] is False
    fresh = await env.run(
        hubspot.upsert_contact, {"credential": "hs", "email": "bob@example.com"}, None
    )
    assert fresh["new"] is True
    assert crm.requests[-1].body == {
        "inputs": [
            {
                "idProperty": "email",
                "id": "bob@example.com",
                "properties": {"email": "bob@example.com"},
            }
        ]
    }
    found = await env.run(
        hubspot.search_contacts, {"credential": "hs", "value": "ada@example.com"}, None
    )
    assert found["total"] == 1 and found["results"][0]["id"] == created["id"]
    assert crm.requests[-1].body["filterGroups"] == [
        {"filters": [{"propertyName": "email", "operator": "EQ", "value": "ada@example.com"}]}
    ]
    deal = await env.run(
        hubspot.create_deal,
        {"credential": "hs", "properties": {"dealname": "Big", "amount": "1000"}},
        None,
    )
    assoc = await env.run(
        hubspot.associate_deal_contact,
        {"credential": "hs", "deal_id": deal["id"], "contact_id": created["id"]},
        None,
    )
    assert assoc["status"] == "COMPLETE"
    assert crm.associations == [(deal["id"], created["id"])]
    assert crm.requests[-1].method == "PUT"
    assert crm.requests[-1].path == (
        f"/crm/v4/objects/deals/{deal['id']}/associations/default/contacts/{created['id']}"
    )


async def test_conflict_error_body_is_mapped(crm: HubSpotLike) -> None:
    env = _env(crm)
    await env.run(
        hubspot.create_contact, {"credential": "hs", "properties": {"email": "a@b.c"}}, None
    )
    with pytest.raises(sdk.NonRetryableError) as err:
        await env.run(
            hubspot.create_contact, {"credential": "hs", "properties": {"email": "a@b.c"}}, None
        )
    assert err.value.kind == "hubspot_conflict"
    assert "Contact already exists" in err.value.message
    assert "correlationId" in err.value.message
    assert err.value.details["status"] == 409


async def test_validation_and_not_found(crm: HubSpotLike) -> None:
    env = _env(crm)
    with pytest.raises(sdk.NonRetryableError) as err:
        await env.run(hubspot.create_deal, {"credential": "hs", "properties": {"amount": 1}}, None)
    assert err.value.kind == "hubspot_validation_error"
    with pytest.raises(sdk.NonRetryableError) as err:
        await env.run(
            hubspot.update_contact,
            {"credential": "hs", "contact_id": "999", "properties": {"a": 1}},
            None,
        )
    assert err.value.kind == "hubspot_object_not_found"
    with pytest.raises(sdk.ConfigError):
        await env.run(
            hubspot.update_contact,
            {"credential": "hs", "contact_id": "../x", "properties": {}},
            None,
        )


async def test_rate_limit_429_is_retried_after_the_interval(crm: HubSpotLike) -> None:
    crm.rate_limit_next = 1
    env = _env(crm)
    with pytest.raises(sdk.ActionError) as err:
        await env.run(hubspot.search_contacts, {"credential": "hs", "value": "x"}, None)
    assert err.value.retryable and err.value.kind == "hubspot_rate_limits"
    assert err.value.retry_after == 10.0  # X-HubSpot-RateLimit-Interval-Milliseconds
    out = await env.run(hubspot.search_contacts, {"credential": "hs", "value": "x"}, None)
    assert out["total"] == 0


async def test_bad_token(crm: HubSpotLike) -> None:
    with pytest.raises(sdk.NonRetryableError) as err:
        await _env(crm, token="pat-wrong").run(
            hubspot.search_contacts, {"credential": "hs", "value": "x"}, None
        )
    assert err.value.kind == "hubspot_invalid_authentication"


# -- each action's real output satisfies the output schema it declares ----------------


async def _create(env: ActionTestEnvironment, action: sdk.ActionDefinition, **props: str) -> Any:
    """Run a create action with ``props``; its output."""
    return await env.run(action, {"credential": "hs", "properties": props}, None)


async def test_create_contact_output_matches_declared_schema(crm: HubSpotLike) -> None:
    props = {"email": "ada@example.com", "firstname": "Ada", "company": "Analytical"}
    out = await _env(crm).run(
        hubspot.create_contact, {"credential": "hs", "properties": props}, None
    )
    assert out["properties"]["firstname"] == "Ada"
    assert_declared_output(hubspot.create_contact, out)


async def test_update_contact_output_matches_declared_schema(crm: HubSpotLike) -> None:
    env = _env(crm)
    created = await _create(env, hubspot.create_contact, email="a@b.co")
    out = await env.run(
        hubspot.update_contact,
        {"credential": "hs", "contact_id": created["id"], "properties": {"lastname": "Byron"}},
        None,
    )
    assert out["properties"] == {"email": "a@b.co", "lastname": "Byron"}
    assert_declared_output(hubspot.update_contact, out)


async def test_upsert_contact_output_matches_declared_schema(crm: HubSpotLike) -> None:
    env = _env(crm)
    config = {"credential": "hs", "email": "grace@example.com", "properties": {"firstname": "G"}}
    first = await env.run(hubspot.upsert_contact, config, None)
    again = await env.run(hubspot.upsert_contact, config, None)
    assert (first["new"], again["new"]) == (True, False) and first["id"] == again["id"]
    assert_declared_output(hubspot.upsert_contact, first)
    assert_declared_output(hubspot.upsert_contact, again)


async def test_search_contacts_output_matches_declared_schema(crm: HubSpotLike) -> None:
    env = _env(crm)
    for email in ("x@acme.example", "y@acme.example"):
        await _create(env, hubspot.create_contact, email=email, company="Acme")
    config = {"credential": "hs", "property": "company", "value": "Acme", "limit": 1}
    config["properties"] = ["email", "phone"]
    first = await env.run(hubspot.search_contacts, config, None)
    assert first["total"] == 2 and first["paging"]["next"]["after"] == "1"
    assert first["results"][0]["properties"] == {"email": "x@acme.example", "phone": None}
    assert_declared_output(hubspot.search_contacts, first)
    last = await env.run(hubspot.search_contacts, {**config, "after": "1"}, None)
    assert "paging" not in last and len(last["results"]) == 1
    assert_declared_output(hubspot.search_contacts, last)


async def test_create_deal_output_matches_declared_schema(crm: HubSpotLike) -> None:
    props = {"dealname": "Renewal", "amount": "1500.00", "dealstage": "appointmentscheduled"}
    out = await _env(crm).run(hubspot.create_deal, {"credential": "hs", "properties": props}, None)
    assert out["properties"]["amount"] == "1500.00"
    assert_declared_output(hubspot.create_deal, out)


async def test_associate_deal_contact_output_matches_declared_schema(crm: HubSpotLike) -> None:
    env = _env(crm)
    contact = await _create(env, hubspot.create_contact, email="c@d.co")
    deal = await _create(env, hubspot.create_deal, dealname="D")
    out = await env.run(
        hubspot.associate_deal_contact,
        {"credential": "hs", "deal_id": deal["id"], "contact_id": contact["id"]},
        None,
    )
    assert out["results"][0]["from"] == {"id": deal["id"]}
    assert out["results"][0]["to"] == {"id": contact["id"]}
    assert_declared_output(hubspot.associate_deal_contact, out)
