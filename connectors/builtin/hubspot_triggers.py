"""HubSpot polling triggers: ``hubspot.contact_created`` and ``hubspot.contact_updated``.

Each poll asks HubSpot's CRM search (``POST /crm/v3/objects/contacts/search``, HubSpot's
"CRM search" guide) for the contacts whose timestamp property (``createdate`` for
created, ``lastmodifieddate`` for updated) is at or after the cursor, oldest first::

    {"filterGroups": [{"filters": [{"propertyName": "createdate", "operator": "GTE",
                                    "value": "<cursor ms>"}]}],
     "sorts": [{"propertyName": "createdate", "direction": "ASCENDING"}],
     "properties": [...], "limit": 100, "after": "<offset>"}

and starts one run per contact and timestamp: the event id is ``<contact id>:<createdate
ms>`` (created) or ``<contact id>:<lastmodifieddate ms>`` (updated: every change HubSpot
stamps is its own event; a contact's creation stamps ``lastmodifieddate`` too, so a new
contact is also "updated"). The event data is the contact as the search returns it
(``{"id", "properties", "createdAt", "updatedAt", "archived"}``).

What the search does, and how the trigger copes (from HubSpot's guide):

- **One sort, offsets for pages.** Results are sorted by one property; ``paging.next.after``
  is an offset into a result set computed again for every request. A contact changed
  between two requests moves in that order and would shift later ones past a page
  boundary, so each page is asked for afresh from the newest timestamp read so far (the
  cursor time advances page by page); only contacts sharing that one timestamp are paged
  through with ``after``.
- **10,000 results per query.** Paging past the 10,000th result answers 400. Advancing
  the cursor time per page keeps every query's offset under 100 unless more than 100
  contacts share a millisecond; past 10,000 such contacts the poll fails with kind
  ``hubspot_search_cap``.
- **Ties.** Many contacts can share a millisecond (batch imports and updates). The
  cursor keeps the event ids read at or after its time, so a contact at the cursor time
  is neither lost nor started twice.
- **Search lags writes.** "It may take a few moments for newly created or updated CRM
  objects to appear in search results": a contact can appear after a later one was read.
  The cursor time therefore stays ``lookback_seconds`` behind HubSpot's clock (its
  ``Date`` header), and the contacts read inside that window are remembered, so a late
  one is started once and an early one is not started again.
- **Rate limits.** The search endpoints allow a few requests per second per account; a
  429 (or a 5xx, or a network error) before anything was read raises the retryable step
  error with ``retry_after`` (:func:`connectors.builtin.hubspot_api.rate_limit_wait`), so
  the product backs off; after some contacts were read, the poll returns those with a
  cursor right after them and the next poll continues.

A poll returns at most :data:`MAX_EVENTS_PER_POLL` events (the next poll continues). The
first poll (no cursor) returns the :data:`PAGE_SIZE` newest contacts (for "include
existing items" and test events) with a cursor after them: from then on, only contacts
created (or changed) after the trigger was activated start runs.

Cursor (JSON): ``{"after": <ms>, "seen": ["<id>:<ms>", ...]}``: the next search starts at
``after``; ``seen`` are the event ids already returned with a timestamp >= ``after``.
"""

from __future__ import annotations

import email.utils
import time
from datetime import UTC, datetime
from typing import Annotated, Any

import httpx
import msgspec

from connectors import sdk
from connectors.builtin.hubspot_api import CredentialField, request
from connectors.builtin.hubspot_outputs import CrmObject

__all__ = [
    "MAX_EVENTS_PER_POLL",
    "PAGE_SIZE",
    "SEARCH_RESULT_CAP",
    "ContactTriggerConfig",
    "contact_created",
    "contact_updated",
]

SEARCH_PATH = "/crm/v3/objects/contacts/search"
PAGE_SIZE = 100
"""Results per search request (HubSpot allows up to 200)."""
SEARCH_RESULT_CAP = 10_000
"""Results one search query can page through (HubSpot: 400 beyond)."""
MAX_EVENTS_PER_POLL = 1_000
"""Events one poll returns at most; the next poll continues after them."""


class ContactTriggerConfig(msgspec.Struct, kw_only=True):
    """Config of ``hubspot.contact_created`` and ``hubspot.contact_updated``."""

    credential: CredentialField
    properties: Annotated[
        list[Annotated[str, msgspec.Meta(pattern=r"^[a-z0-9_]+$")]],
        msgspec.Meta(
            title="Properties",
            description="Contact properties (internal names) in each event; createdate, "
            "lastmodifieddate and hs_object_id are always included.",
        ),
    ] = msgspec.field(default_factory=lambda: ["email", "firstname", "lastname"])
    lookback_seconds: Annotated[
        int,
        msgspec.Meta(
            title="Search delay (seconds)",
            description="HubSpot's search shows new and changed contacts after a short "
            "delay; contacts this recent are looked for again on the next poll (never "
            "started twice).",
            ge=0,
            le=900,
        ),
    ] = 60


class Cursor(msgspec.Struct, forbid_unknown_fields=True):
    """The stored cursor (module doc)."""

    after: int
    seen: list[str] = []


def _ms(value: Any) -> int | None:
    """Milliseconds since the epoch of HubSpot's ISO 8601 text (or digits), else None."""
    if not isinstance(value, str) or not value:
        return None
    if value.isdigit():
        return int(value)
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return round(parsed.timestamp() * 1000)


def _server_now_ms(response: httpx.Response) -> int:
    """HubSpot's clock from the answer's ``Date`` header (ours when it has none)."""
    try:
        return int(email.utils.parsedate_to_datetime(response.headers["date"]).timestamp() * 1000)
    except (KeyError, TypeError, ValueError, IndexError):
        return int(time.time() * 1000)


class _Scan:
    """One poll's reading of the search results for timestamp property ``prop``."""

    def __init__(self, config: ContactTriggerConfig, prop: str, fallback: str) -> None:
        self.config, self.prop, self.fallback = config, prop, fallback
        self.properties = sorted({*config.properties, "createdate", "lastmodifieddate"})
        self.now_ms: int | None = None

    async def search(self, *, bound: int | None, offset: int, descending: bool = False) -> Any:
        body: dict[str, Any] = {
            "sorts": [
                {
                    "propertyName": self.prop,
                    "direction": "DESCENDING" if descending else "ASCENDING",
                }
            ],
            "properties": self.properties,
            "limit": PAGE_SIZE,
        }
        if bound is not None:
            filters = [{"propertyName": self.prop, "operator": "GTE", "value": str(bound)}]
            body["filterGroups"] = [{"filters": filters}]
        if offset:
            body["after"] = str(offset)
        response = await request("POST", SEARCH_PATH, "search contacts", body)
        if self.now_ms is None:
            self.now_ms = _server_now_ms(response)
        page = response.json()
        if not isinstance(page, dict) or not isinstance(page.get("results"), list):
            raise sdk.ActionError(
                "HubSpot search answered without results", kind="hubspot_bad_response"
            )
        return page

    def stamp(self, contact: dict[str, Any]) -> int:
        """The contact's timestamp in ms; raises ``ActionError`` when HubSpot sent none."""
        props = contact.get("properties") or {}
        found = _ms(props.get(self.prop)) or _ms(contact.get(self.fallback))
        if found is None:
            raise sdk.NonRetryableError(
                f"HubSpot contact {contact.get('id')!r} has no valid {self.prop}",
                kind="hubspot_bad_response",
            )
        return found

    def event(self, contact: dict[str, Any], stamp: int) -> sdk.TriggerEvent:
        contact_id = str(contact.get("id") or "")
        if not contact_id:
            raise sdk.NonRetryableError(
                "HubSpot search returned a contact without id", kind="hubspot_bad_response"
            )
        data = {
            "id": contact_id,
            "properties": dict(contact.get("properties") or {}),
            "createdAt": str(contact.get("createdAt") or ""),
            "updatedAt": str(contact.get("updatedAt") or ""),
            "archived": bool(contact.get("archived", False)),
        }
        return sdk.TriggerEvent(
            id=f"{contact_id}:{stamp}", data=data, meta={"contact_id": contact_id}
        )

    async def read(self, cursor: Cursor) -> tuple[list[sdk.TriggerEvent], int, set[str]]:
        """The new events after ``cursor`` (up to :data:`MAX_EVENTS_PER_POLL`), the newest
        timestamp read, and every event id read (old and new)."""
        seen = set(cursor.seen)
        events: list[sdk.TriggerEvent] = []
        bound = high = cursor.after
        offset = 0
        try:
            while True:
                page = await self.search(bound=bound, offset=offset)
                for contact in page["results"]:
                    stamp = self.stamp(contact)
                    high = max(high, stamp)
                    found = self.event(contact, stamp)
                    if found.id in seen:
                        continue
                    seen.add(found.id)
                    events.append(found)
                    if len(events) >= MAX_EVENTS_PER_POLL:
                        return events, high, seen
                following = ((page.get("paging") or {}).get("next") or {}).get("after")
                if not following or not page["results"]:
                    return events, high, seen
                if high > bound:  # ask afresh from the newest timestamp read
                    bound, offset = high, 0
                    continue
                offset = int(following)  # a whole page at one timestamp: page through it
                if offset + PAGE_SIZE > SEARCH_RESULT_CAP:
                    raise sdk.ActionError(
                        f"more than {SEARCH_RESULT_CAP} HubSpot contacts share the "
                        f"{self.prop} {bound} ms; the search cannot page through them",
                        kind="hubspot_search_cap",
                    )
        except sdk.ActionError as err:
            if not err.retryable or not events:
                raise
            sdk.logger().warning("HubSpot poll stopped early, continuing next poll: %s", err)
            return events, high, seen

    def cursor(self, after: int, high: int, seen: set[str]) -> dict[str, Any]:
        """The cursor after a read up to ``high``: its time no later than ``high`` nor
        than HubSpot's clock less the look-back, never earlier than ``after``."""
        now = self.now_ms if self.now_ms is not None else int(time.time() * 1000)
        new_after = max(after, min(high, now - self.config.lookback_seconds * 1000))
        kept = sorted(k for k in seen if int(k.rsplit(":", 1)[1]) >= new_after)
        return msgspec.to_builtins(Cursor(after=new_after, seen=kept))  # type: ignore[no-any-return]

    async def first(self) -> sdk.PollResult:
        """The newest page of contacts (oldest first) and a cursor after them."""
        page = await self.search(bound=None, offset=0, descending=True)
        read = [(self.stamp(c), c) for c in page["results"]]
        events = [self.event(c, stamp) for stamp, c in reversed(read)]
        if not read:
            return sdk.PollResult(events=[], cursor={"after": 0, "seen": []})
        high, low = read[0][0], read[-1][0]
        after = 0
        if len(read) >= PAGE_SIZE:  # older contacts exist: start after the oldest read
            after = low + 1
        seen = {e.id for e in events}
        return sdk.PollResult(events=events, cursor=self.cursor(after, high, seen))


def _parse_cursor(raw: Any) -> Cursor:
    try:
        return msgspec.convert(raw, Cursor)
    except msgspec.ValidationError as err:
        raise sdk.NonRetryableError(
            f"the stored HubSpot cursor is not valid ({err}); deactivate and activate the "
            "workflow to start again from now",
            kind="cursor_invalid",
        ) from None


async def _poll(config: ContactTriggerConfig, raw: Any, prop: str, fallback: str) -> sdk.PollResult:
    scan = _Scan(config, prop, fallback)
    if raw is None:
        return await scan.first()
    cursor = _parse_cursor(raw)
    events, high, seen = await scan.read(cursor)
    return sdk.PollResult(events=events, cursor=scan.cursor(cursor.after, high, seen))


_CONTACT_EXAMPLE = {
    "id": "512",
    "properties": {
        "createdate": "2026-01-05T09:30:12.345Z",
        "email": "ada@example.com",
        "firstname": "Ada",
        "hs_object_id": "512",
        "lastmodifieddate": "2026-01-05T09:31:40.002Z",
        "lastname": "Lovelace",
    },
    "createdAt": "2026-01-05T09:30:12.345Z",
    "updatedAt": "2026-01-05T09:31:40.002Z",
    "archived": False,
}


def _contact_trigger(
    type: str, label: str, icon: str, description: str, prop: str, fallback: str
) -> sdk.TriggerDefinition:
    """Declare the polling trigger of contacts by timestamp property ``prop``
    (``fallback``: the top-level field holding the same time)."""

    async def poll(config: ContactTriggerConfig, cursor: Any) -> sdk.PollResult:
        return await _poll(config, cursor, prop, fallback)

    poll.__doc__ = f"Contacts by ``{prop}``; event id ``<contact id>:<{prop} ms>``."
    declare = sdk.polling_trigger(
        type,
        label=label,
        config=ContactTriggerConfig,
        interval=60,
        min_interval=15,
        category="CRM",
        icon=icon,
        description=description,
        output=CrmObject,
        output_example=_CONTACT_EXAMPLE,
    )
    return declare(poll)


contact_created = _contact_trigger(
    "hubspot.contact_created",
    "HubSpot: contact created",
    "user-plus",
    "Start a run for each new HubSpot contact (polls HubSpot's CRM search).",
    "createdate",
    "createdAt",
)
contact_updated = _contact_trigger(
    "hubspot.contact_updated",
    "HubSpot: contact updated",
    "user-check",
    "Start a run each time a HubSpot contact is created or changed (polls HubSpot's CRM search).",
    "lastmodifieddate",
    "updatedAt",
)
