"""Built-in HubSpot CRM connector (CRM API v3 contacts and deals, v4 associations).

Base URL, auth and error mapping: :mod:`connectors.builtin.hubspot_api` (setting
``hubspot.api_url``; ``Authorization: Bearer <token>`` from a ``hubspot.private_app`` or
``hubspot.oauth2`` credential). The polling triggers ``hubspot.contact_created`` and
``hubspot.contact_updated`` are in :mod:`connectors.builtin.hubspot_triggers`.

Endpoints (as documented by HubSpot):

- ``hubspot.create_contact``: ``POST /crm/v3/objects/contacts`` ``{"properties"}`` -> 201
- ``hubspot.update_contact``: ``PATCH /crm/v3/objects/contacts/{id}`` ``{"properties"}``
  -> 200
- ``hubspot.upsert_contact``: ``POST /crm/v3/objects/contacts/batch/upsert``
  ``{"inputs": [{"idProperty": "email", "id": <email>, "properties"}]}`` -> 200
  ``{"status", "results": [{"id", "properties", "new"}]}`` (output: the one result)
- ``hubspot.search_contacts``: ``POST /crm/v3/objects/contacts/search``
  ``{"filterGroups", "properties", "limit", "after"}`` -> 200
  ``{"total", "results", "paging"}``
- ``hubspot.create_deal``: ``POST /crm/v3/objects/deals`` ``{"properties"}`` -> 201
- ``hubspot.associate_deal_contact``:
  ``PUT /crm/v4/objects/deals/{dealId}/associations/default/contacts/{contactId}`` -> 200
  ``{"status", "results"}``

An object output is HubSpot's ``{"id", "properties", "createdAt", "updatedAt",
"archived"}``; upsert adds ``"new"`` (true when created).

Errors: HubSpot error bodies ``{"status": "error", "message", "correlationId",
"category"}`` become step errors of kind ``hubspot_<category lower-cased>`` (e.g.
``hubspot_validation_error``, ``hubspot_object_not_found``, ``hubspot_conflict``) whose
message carries the message and correlation id. 429 is retryable: it waits
``Retry-After`` when sent, else per the rate-limit policy HubSpot names (1 s for its
secondly limit), else the ``X-HubSpot-RateLimit-Interval-Milliseconds`` window when
``X-HubSpot-RateLimit-Remaining`` is 0, else 10 s. 5xx are retryable; other 4xx are not.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import msgspec

from connectors import sdk
from connectors.builtin.hubspot_api import CredentialField, call
from connectors.builtin.hubspot_outputs import (
    AssociationOutput,
    ContactSearchOutput,
    CrmObject,
    UpsertedContact,
)
from connectors.builtin.hubspot_triggers import contact_created, contact_updated

__all__ = ["PRIVATE_APP", "connector"]


class PrivateAppFields(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """A HubSpot private app access token (``pat-...``) with CRM scopes."""

    token: Annotated[str, sdk.secret("Access token", "pat-...")]


class HubSpotOAuth2Fields(sdk.OAuth2Fields, kw_only=True, forbid_unknown_fields=True):
    """HubSpot's OAuth2 endpoints."""


PRIVATE_APP = sdk.credential_type(
    "hubspot.private_app", label="HubSpot private app", kind="bearer", fields=PrivateAppFields
)
HUBSPOT_OAUTH2 = sdk.credential_type(
    "hubspot.oauth2",
    label="HubSpot (OAuth2)",
    kind="oauth2",
    fields=HubSpotOAuth2Fields,
    defaults={
        "authorize_url": "https://app.hubspot.com/oauth/authorize",
        "token_url": "https://api.hubapi.com/oauth/v1/token",
        "scope": "crm.objects.contacts.write crm.objects.deals.write",
    },
)

Properties = Annotated[
    dict[str, Any],
    msgspec.Meta(title="Properties", description="HubSpot property names and values"),
]


class CreateConfig(msgspec.Struct, kw_only=True):
    """Create a contact or a deal."""

    credential: CredentialField
    properties: Properties


class UpdateContactConfig(msgspec.Struct, kw_only=True):
    """Update a contact by id."""

    credential: CredentialField
    contact_id: Annotated[str, msgspec.Meta(title="Contact id")]
    properties: Properties


class UpsertContactConfig(msgspec.Struct, kw_only=True):
    """Create or update the contact with this email."""

    credential: CredentialField
    email: Annotated[str, msgspec.Meta(title="Email")]
    properties: Properties = {}


class SearchContactsConfig(msgspec.Struct, kw_only=True):
    """Search contacts by one property."""

    credential: CredentialField
    property: Annotated[str, msgspec.Meta(title="Property")] = "email"
    operator: Annotated[
        Literal["EQ", "NEQ", "CONTAINS_TOKEN", "GT", "LT", "HAS_PROPERTY"],
        msgspec.Meta(
            title="Operator",
            extra_json_schema={
                "x-enum-labels": {
                    "EQ": "equals",
                    "NEQ": "does not equal",
                    "CONTAINS_TOKEN": "contains word",
                    "GT": "is greater than",
                    "LT": "is less than",
                    "HAS_PROPERTY": "has a value",
                }
            },
        ),
    ] = "EQ"
    value: Annotated[str, msgspec.Meta(title="Value")] = ""
    properties: Annotated[list[str], msgspec.Meta(title="Properties to return")] = msgspec.field(
        default_factory=lambda: ["email", "firstname", "lastname"]
    )
    limit: Annotated[int, msgspec.Meta(title="Limit", ge=1, le=200)] = 10
    after: Annotated[str, msgspec.Meta(title="After (paging cursor)")] = ""


class AssociateConfig(msgspec.Struct, kw_only=True):
    """Associate a deal with a contact (default association type)."""

    credential: CredentialField
    deal_id: Annotated[str, msgspec.Meta(title="Deal id")]
    contact_id: Annotated[str, msgspec.Meta(title="Contact id")]


def _segment(value: str, name: str) -> str:
    value = str(value).strip()
    if not value or not value.replace("-", "").replace("_", "").isalnum():
        raise sdk.ConfigError(f"{name} must be a HubSpot object id, got {value!r}")
    return value


@sdk.action(
    "hubspot.create_contact",
    label="HubSpot: create contact",
    config=CreateConfig,
    category="CRM",
    icon="user-plus",
    expression_fields=("properties",),
)
async def create_contact(config: CreateConfig, input: Any) -> CrmObject:
    """Create a contact (409 ``CONFLICT`` when the email exists: use upsert)."""
    return await call(
        "POST", "/crm/v3/objects/contacts", "create contact", {"properties": config.properties}
    )


@sdk.action(
    "hubspot.update_contact",
    label="HubSpot: update contact",
    config=UpdateContactConfig,
    category="CRM",
    icon="user",
    expression_fields=("contact_id", "properties"),
)
async def update_contact(config: UpdateContactConfig, input: Any) -> CrmObject:
    """Update a contact's properties by id."""
    contact_id = _segment(config.contact_id, "contact_id")
    return await call(
        "PATCH",
        f"/crm/v3/objects/contacts/{contact_id}",
        "update contact",
        {"properties": config.properties},
    )


@sdk.action(
    "hubspot.upsert_contact",
    label="HubSpot: create or update contact",
    config=UpsertContactConfig,
    category="CRM",
    icon="user-check",
    expression_fields=("email", "properties"),
)
async def upsert_contact(config: UpsertContactConfig, input: Any) -> UpsertedContact:
    """Upsert by email through the batch upsert endpoint (one atomic call, safe to retry)."""
    email = config.email.strip()
    if "@" not in email:
        raise sdk.ConfigError(f"email {config.email!r} is not an email address")
    data = await call(
        "POST",
        "/crm/v3/objects/contacts/batch/upsert",
        "upsert contact",
        {
            "inputs": [
                {
                    "idProperty": "email",
                    "id": email,
                    "properties": {**config.properties, "email": email},
                }
            ]
        },
    )
    results = (data or {}).get("results") or []
    if not results:
        raise sdk.ActionError("HubSpot upsert returned no result", kind="hubspot_bad_response")
    return results[0]


@sdk.action(
    "hubspot.search_contacts",
    label="HubSpot: search contacts",
    config=SearchContactsConfig,
    category="CRM",
    icon="search",
    expression_fields=("value", "after"),
)
async def search_contacts(config: SearchContactsConfig, input: Any) -> ContactSearchOutput:
    """Search contacts; output ``{"total", "results", "paging"}`` as HubSpot returns it."""
    flt: dict[str, Any] = {"propertyName": config.property, "operator": config.operator}
    if config.operator != "HAS_PROPERTY":
        flt["value"] = config.value
    body: dict[str, Any] = {
        "filterGroups": [{"filters": [flt]}],
        "properties": config.properties,
        "limit": config.limit,
    }
    if config.after:
        body["after"] = config.after
    return await call("POST", "/crm/v3/objects/contacts/search", "search contacts", body)


@sdk.action(
    "hubspot.create_deal",
    label="HubSpot: create deal",
    config=CreateConfig,
    category="CRM",
    icon="briefcase",
    expression_fields=("properties",),
)
async def create_deal(config: CreateConfig, input: Any) -> CrmObject:
    """Create a deal (properties such as ``dealname``, ``amount``, ``dealstage``)."""
    return await call(
        "POST", "/crm/v3/objects/deals", "create deal", {"properties": config.properties}
    )


@sdk.action(
    "hubspot.associate_deal_contact",
    label="HubSpot: associate deal with contact",
    config=AssociateConfig,
    category="CRM",
    icon="link",
    expression_fields=("deal_id", "contact_id"),
)
async def associate_deal_contact(config: AssociateConfig, input: Any) -> AssociationOutput:
    """Create the default deal-to-contact association (v4; idempotent)."""
    deal_id = _segment(config.deal_id, "deal_id")
    contact_id = _segment(config.contact_id, "contact_id")
    return await call(
        "PUT",
        f"/crm/v4/objects/deals/{deal_id}/associations/default/contacts/{contact_id}",
        "associate deal with contact",
    )


connector = sdk.Connector(
    name="hubspot",
    label="HubSpot",
    version="1.0.0",
    description="HubSpot CRM contacts and deals; start runs from new and changed contacts",
    actions=[
        create_contact,
        update_contact,
        upsert_contact,
        search_contacts,
        create_deal,
        associate_deal_contact,
    ],
    triggers=[contact_created, contact_updated],
    credential_types=[PRIVATE_APP, HUBSPOT_OAUTH2],
    icon="users",
    docs_url="https://developers.hubspot.com/docs/api/crm/contacts",
)
