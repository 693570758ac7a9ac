"""Built-in HubSpot CRM connector (CRM API v3 contacts and deals, v4 associations).

Base URL: setting ``hubspot.api_url`` (``RAILYARD_HUBSPOT_API_URL``, default
``https://api.hubapi.com``). Auth: ``Authorization: Bearer <token>`` from a
``hubspot.private_app`` (private app access token) or ``hubspot.oauth2`` credential.

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
message carries the message and correlation id. 429 (category ``RATE_LIMITS``) is
retryable: it waits ``Retry-After`` when sent, else the
``X-HubSpot-RateLimit-Interval-Milliseconds`` window (converted to seconds) when
``X-HubSpot-RateLimit-Remaining`` is 0, else 10 s. 5xx are retryable; other 4xx are not.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import httpx
import msgspec

from connectors import sdk
from connectors.builtin.hubspot_outputs import (
    AssociationOutput,
    ContactSearchOutput,
    CrmObject,
    UpsertedContact,
)

__all__ = ["PRIVATE_APP", "connector"]

DEFAULT_API_URL = "https://api.hubapi.com"
_CRED = ("hubspot.private_app", "hubspot.oauth2")


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
CredentialField = Annotated[str, sdk.credential_meta(*_CRED, title="HubSpot account")]


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


def _rate_limit_wait(response: httpx.Response) -> float:
    retry_after = sdk.parse_retry_after(response.headers.get("retry-after"))
    if retry_after is not None:
        return retry_after
    remaining = response.headers.get("x-hubspot-ratelimit-remaining")
    interval = response.headers.get("x-hubspot-ratelimit-interval-milliseconds")
    if remaining == "0" and interval and interval.isdigit():
        return int(interval) / 1000.0
    return 10.0


def _raise_hubspot_error(response: httpx.Response, what: str) -> None:
    try:
        body = response.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    category = str(body.get("category") or f"http_{response.status_code}")
    message = str(body.get("message") or response.reason_phrase or "error")
    correlation = body.get("correlationId")
    text = f"HubSpot {what} failed ({response.status_code} {category}): {message}"
    if correlation:
        text += f" [correlationId {correlation}]"
    details = {"status": response.status_code, "category": category, "correlationId": correlation}
    kind = "hubspot_" + category.lower()
    status = response.status_code
    if status == 429:
        raise sdk.ActionError(
            text, kind=kind, retry_after=_rate_limit_wait(response), details=details
        )
    if status >= 500:
        raise sdk.ActionError(text, kind=kind, details=details)
    raise sdk.NonRetryableError(text, kind=kind, details=details)


async def _call(method: str, path: str, what: str, body: Any = None) -> Any:
    cred = sdk.credential("credential")
    token = cred.get("access_token") or cred.get("token")
    base = str(sdk.setting("hubspot.api_url", DEFAULT_API_URL)).rstrip("/")
    with sdk.http_errors(base + path, method=method, service=f"HubSpot {what}:"):
        response = await sdk.http_client().request(
            method,
            base + path,
            json=body,
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
        )
    if response.status_code >= 400:
        _raise_hubspot_error(response, what)
    return response.json() if response.content else None


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
    return await _call(
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
    return await _call(
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
    data = await _call(
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
    return await _call("POST", "/crm/v3/objects/contacts/search", "search contacts", body)


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
    return await _call(
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
    return await _call(
        "PUT",
        f"/crm/v4/objects/deals/{deal_id}/associations/default/contacts/{contact_id}",
        "associate deal with contact",
    )


connector = sdk.Connector(
    name="hubspot",
    label="HubSpot",
    version="1.0.0",
    description="HubSpot CRM contacts and deals",
    actions=[
        create_contact,
        update_contact,
        upsert_contact,
        search_contacts,
        create_deal,
        associate_deal_contact,
    ],
    credential_types=[PRIVATE_APP, HUBSPOT_OAUTH2],
    icon="users",
    docs_url="https://developers.hubspot.com/docs/api/crm/contacts",
)
