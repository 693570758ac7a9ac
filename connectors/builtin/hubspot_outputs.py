"""The outputs of the HubSpot actions: HubSpot's CRM API v3/v4 response bodies.

Shapes from HubSpot's published OpenAPI specs (CRM objects v3 ``SimplePublicObject``,
``SimplePublicUpsertObject``, ``CollectionResponseWithTotalSimplePublicObjectForwardPaging``;
associations v4 ``BatchResponsePublicDefaultAssociation``). HubSpot sends every property
value as text (numbers and dates too: ``"1500.00"``, ``"2026-01-01T00:00:00Z"``) or
``null``; timestamps are ISO 8601 text. Fields HubSpot sends only on request
(``propertiesWithHistory``, ``associations``) are left out because these actions never
request them.
"""

from __future__ import annotations

from typing import NotRequired, TypedDict

__all__ = ["AssociationOutput", "ContactSearchOutput", "CrmObject", "UpsertedContact"]


class CrmObject(TypedDict):
    """The record as HubSpot returns it: property values are text (numbers and dates
    too) or `null`, timestamps ISO 8601."""

    id: str
    properties: dict[str, str | None]
    createdAt: str
    updatedAt: str
    archived: NotRequired[bool]
    archivedAt: NotRequired[str]


class UpsertedContact(TypedDict):
    """The created or updated contact as HubSpot returns it; `new` is true when HubSpot
    created it."""

    id: str
    properties: dict[str, str | None]
    createdAt: str
    updatedAt: str
    new: bool
    archived: NotRequired[bool]
    archivedAt: NotRequired[str]
    objectWriteTraceId: NotRequired[str]


class NextPage(TypedDict):
    """The cursor of the next page: pass `after` as the After config key."""

    after: str
    link: NotRequired[str]


class Paging(TypedDict):
    """Present while more results follow."""

    next: NotRequired[NextPage]


class ContactSearchOutput(TypedDict):
    """`total` matches, this page's `results` (contacts with the requested properties)
    and, while more pages follow, `paging.next.after` (the After of the next page)."""

    total: int
    results: list[CrmObject]
    paging: NotRequired[Paging]


class ObjectId(TypedDict):
    """One side of an association."""

    id: str


class AssociationSpec(TypedDict):
    """The association label: HubSpot's default deal-to-contact type is 3."""

    associationCategory: str
    associationTypeId: int


# The functional form because ``from`` is a Python keyword.
DefaultAssociation = TypedDict(
    "DefaultAssociation",
    {"from": ObjectId, "to": ObjectId, "associationSpec": AssociationSpec},
)
DefaultAssociation.__doc__ = "One created association: deal (`from`) to contact (`to`)."


class AssociationOutput(TypedDict):
    """HubSpot's batch answer: `status` (`COMPLETE`) and the default deal-to-contact
    association (type 3) in `results`."""

    status: str
    results: list[DefaultAssociation]
    startedAt: NotRequired[str]
    completedAt: NotRequired[str]
    requestedAt: NotRequired[str]
    links: NotRequired[dict[str, str]]
