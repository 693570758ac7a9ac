"""Built-in core data nodes: filter, sort, aggregate, date/time formatting, text template;
the connector also holds the item-list nodes (connectors/builtin/data_lists.py: merge,
split out, remove duplicates, limit, rename keys), ``data.date_calc``
(connectors/builtin/data_dates.py) and ``data.crypto`` (connectors/builtin/data_crypto.py).

Decision: these are *actions* (run on workers like any connector), not inline control
nodes. They are pure and cheap, but running them as actions keeps the engine's inline
set small (if/switch/set/merge/join), gives each one attempts, timing and errors in the
run view like every other step, and lets them be written against the public SDK only.
Their list inputs are expression fields: ``items`` defaults to the step input, or point
it at any earlier output (``=$steps.fetch.body.results``).

Paths (``field``) are dotted: ``address.city``, ``tags.0``. A missing path is ``None``.

- ``data.filter`` -> ``{"items": [...kept], "count": n, "dropped": m}``: an item is kept
  when ``condition`` (JSONata read on the item, what the designer's condition builder
  writes, e.g. ``total > 100 and country = "DE"``) is true (Python truthiness of its
  JSON result: ``false``, ``null``/undefined, ``0``, ``""``, ``[]`` and ``{}`` drop it);
  without a condition, when ``field`` matches ``operator`` ``value``. The condition's
  evaluations over all items share one budget of
  :data:`connectors.builtin.polling.JSONATA_TIMEOUT_MS`; an item the condition cannot be
  evaluated on (JSONata refuses ``null > 5``) fails the step naming ``condition``.
- ``data.sort`` -> ``{"items": [...]}``; stable; ``None`` sorts last in both directions;
  numbers before strings when types are mixed.
- ``data.aggregate`` -> ``{"groups": [{"key": k, "<as>": value, ...}]}`` with
  ``group_by``, else ``{"result": {"<as>": value, ...}}``. Operations: ``count``,
  ``sum``, ``avg``, ``min``, ``max`` (numbers; non-numbers ignored; empty -> ``None``,
  ``sum`` -> 0), ``collect``, ``count_distinct``, ``first``, ``last``.
- ``data.datetime`` -> ``{"iso", "formatted", "epoch", "timezone", "weekday"}``: parses
  ISO 8601 or epoch seconds (``"now"`` for the current time), interprets naive times in
  ``input_timezone``, adds ``add_days`` as calendar days on ``input_timezone``'s wall clock
  (an input with an offset is first read in that zone, so ``12:00`` stays ``12:00`` with
  or without one) and ``add_hours`` / ``add_minutes`` as elapsed time, converts to
  ``timezone`` (IANA names via ``zoneinfo``), formats with ``strftime`` (``format``;
  ``"iso"`` gives ISO 8601). A nonexistent or repeated local time follows the product's
  one rule (:mod:`connectors.sdk.wallclock`: the first instant after a gap, the first of
  two occurrences), the scheduler's too.
- ``data.template`` -> ``{"text": ...}``: a Jinja2 template rendered in a
  ``SandboxedEnvironment`` with ``input`` and ``data`` (``autoescape`` for HTML output);
  undefined variables are errors. Compiled templates are cached by source
  (connectors/builtin/templating.py).
"""

from __future__ import annotations

import time
from datetime import UTC, timedelta
from typing import Annotated, Any, Literal, TypedDict, cast

import jinja2
import msgspec

from connectors import sdk
from connectors.builtin import data_lists, polling, templating
from connectors.builtin.data_crypto import HMAC_KEY, crypto
from connectors.builtin.data_dates import date_calc
from connectors.builtin.data_values import Items, get_path, is_number, items_of, parse_moment, zone
from connectors.sdk.wallclock import add_local_days

__all__ = ["connector", "get_path"]  # get_path: from data_values, kept here for plugins

# -- filter ----------------------------------------------------------------------------

Operator = Literal[
    "eq", "ne", "gt", "gte", "lt", "lte", "contains", "starts_with", "in", "exists", "not_exists"
]
#: What the designer shows for each operator (``x-enum-labels``).
OPERATOR_LABELS = {
    "eq": "equals",
    "ne": "does not equal",
    "gt": "is greater than",
    "gte": "is greater than or equal to",
    "lt": "is less than",
    "lte": "is less than or equal to",
    "contains": "contains",
    "starts_with": "starts with",
    "in": "is one of (list)",
    "exists": "exists",
    "not_exists": "does not exist",
}


class FilterConfig(msgspec.Struct, kw_only=True):
    """Keep the items where ``condition`` holds, or without one, whose ``field`` matches
    ``operator`` ``value``."""

    items: Items = None
    condition: Annotated[
        str,
        msgspec.Meta(
            title="Keep items where",
            description="A condition read on each item, by its fields (JSONata, e.g. "
            'total > 100 and country = "DE"); when set, Field, Operator and Value are '
            "not used",
        ),
    ] = ""
    field: Annotated[
        str, msgspec.Meta(title="Field", description="Dotted path (without a condition)")
    ] = ""
    operator: Annotated[
        Operator,
        msgspec.Meta(title="Operator", extra_json_schema={"x-enum-labels": OPERATOR_LABELS}),
    ] = "eq"
    value: Annotated[Any, msgspec.Meta(title="Value")] = None


def _compare(actual: Any, op: str, expected: Any) -> bool:
    if op == "exists":
        return actual is not None
    if op == "not_exists":
        return actual is None
    if op == "eq":
        return bool(actual == expected)
    if op == "ne":
        return bool(actual != expected)
    if op == "contains":
        return isinstance(actual, str | list) and expected in actual
    if op == "starts_with":
        return isinstance(actual, str) and isinstance(expected, str) and actual.startswith(expected)
    if op == "in":
        return isinstance(expected, list) and actual in expected
    both_numbers = is_number(actual) and is_number(expected)
    both_strings = isinstance(actual, str) and isinstance(expected, str)
    if not (both_numbers or both_strings):
        return False
    return {
        "gt": actual > expected,
        "gte": actual >= expected,
        "lt": actual < expected,
        "lte": actual <= expected,
    }[op]


class FilterOutput(TypedDict):
    """The kept `items` (in input order), how many were kept (`count`) and dropped."""

    items: list[Any]
    count: int
    dropped: int


@sdk.action(
    "data.filter",
    label="Filter",
    config=FilterConfig,
    category="Data",
    icon="funnel",
    expression_fields=("items", "value"),
)
async def filter_items(config: FilterConfig, input: Any) -> FilterOutput:
    """Keep matching items."""
    items = items_of(config.items, input)
    if config.condition.strip():
        condition = polling.compile_jsonata(config.condition, "condition")
        kept = [i for i in items if polling.evaluate(condition, i, "condition")]
    elif config.field:
        kept = [
            i for i in items if _compare(get_path(i, config.field), config.operator, config.value)
        ]
    else:
        raise sdk.ConfigError(
            "condition: set a condition (or a Field to compare)", details={"field": "condition"}
        )
    return {"items": kept, "count": len(kept), "dropped": len(items) - len(kept)}


# -- sort ------------------------------------------------------------------------------


class SortKey(msgspec.Struct, kw_only=True):
    """One sort key."""

    field: str
    direction: Literal["asc", "desc"] = "asc"


class SortConfig(msgspec.Struct, kw_only=True):
    """Sort items by one or more keys."""

    items: Items = None
    keys: Annotated[list[SortKey], msgspec.Meta(title="Sort keys", min_length=1)]


def _rank(value: Any) -> tuple[int, Any]:
    if is_number(value):
        return (0, value)
    if isinstance(value, str):
        return (1, value)
    if isinstance(value, bool):
        return (2, value)
    return (3, msgspec.json.encode(value))


class SortOutput(TypedDict):
    """The sorted `items` (stable; missing values last)."""

    items: list[Any]


@sdk.action(
    "data.sort",
    label="Sort",
    config=SortConfig,
    category="Data",
    icon="arrow-up-down",
    expression_fields=("items",),
)
async def sort_items(config: SortConfig, input: Any) -> SortOutput:
    """Stable multi-key sort; ``None`` last."""
    items = list(items_of(config.items, input))
    for key in reversed(config.keys):
        present = [i for i in items if get_path(i, key.field) is not None]
        missing = [i for i in items if get_path(i, key.field) is None]
        field_path = key.field

        def rank(item: Any, path: str = field_path) -> tuple[int, Any]:
            return _rank(get_path(item, path))

        present.sort(key=rank, reverse=key.direction == "desc")
        items = present + missing
    return {"items": items}


# -- aggregate -------------------------------------------------------------------------

AggregateOp = Literal[
    "count", "sum", "avg", "min", "max", "collect", "count_distinct", "first", "last"
]


class Aggregation(msgspec.Struct, kw_only=True):
    """One aggregate: ``op`` over ``field``, named ``as_`` (``as`` in JSON)."""

    op: AggregateOp
    field: str = ""
    as_: str = msgspec.field(default="", name="as")


class AggregateConfig(msgspec.Struct, kw_only=True):
    """Group items (optional) and compute aggregates."""

    items: Items = None
    group_by: Annotated[str, msgspec.Meta(title="Group by", description="Dotted path")] = ""
    aggregations: Annotated[list[Aggregation], msgspec.Meta(title="Aggregations", min_length=1)]


def _aggregate(op: str, values: list[Any]) -> Any:
    if op == "count":
        return len(values)
    if op == "collect":
        return values
    if op == "count_distinct":
        return len({msgspec.json.encode(v) for v in values})
    if op == "first":
        return values[0] if values else None
    if op == "last":
        return values[-1] if values else None
    nums = [v for v in values if is_number(v)]
    if op == "sum":
        return sum(nums)
    if not nums:
        return None
    if op == "avg":
        return sum(nums) / len(nums)
    return min(nums) if op == "min" else max(nums)


def _apply(aggs: list[Aggregation], items: list[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for agg in aggs:
        if agg.op == "count" and not agg.field:
            values = list(items)
        else:
            values = [get_path(i, agg.field) for i in items]
            values = [v for v in values if v is not None]
        out[agg.as_ or (f"{agg.op}_{agg.field}" if agg.field else agg.op)] = _aggregate(
            agg.op, values
        )
    return out


class AggregateGroup(TypedDict):
    """One group: its `key` (the Group by value) and one property per aggregation."""

    key: Any


class AggregateOutput(TypedDict, total=False):
    """`groups` (first-seen order) with Group by, else `result`; each aggregation adds a
    property named by its `as` (default `<op>_<field>`, or `count`): a number for count,
    sum, avg, min, max and count_distinct (`null` for avg/min/max without numbers), a
    list for collect, an item value for first and last."""

    groups: list[
        Annotated[AggregateGroup, msgspec.Meta(extra_json_schema={"additionalProperties": True})]
    ]
    result: dict[str, Any]


@sdk.action(
    "data.aggregate",
    label="Aggregate",
    config=AggregateConfig,
    category="Data",
    icon="sigma",
    expression_fields=("items",),
)
async def aggregate(
    config: AggregateConfig, input: Any
) -> Annotated[
    AggregateOutput,
    # the designer's data picker and path checks show the one the config gives
    msgspec.Meta(
        extra_json_schema={"x-properties-if": {"groups": "group_by", "result": "!group_by"}}
    ),
]:
    """Count, sum, average, ... optionally per group (groups in first-seen order)."""
    items = items_of(config.items, input)
    if not config.group_by:
        return {"result": _apply(config.aggregations, items)}
    groups: dict[bytes, tuple[Any, list[Any]]] = {}
    for item in items:
        key = get_path(item, config.group_by)
        groups.setdefault(msgspec.json.encode(key), (key, []))[1].append(item)
    return {
        "groups": [
            cast(AggregateGroup, {"key": key, **_apply(config.aggregations, members)})
            for key, members in groups.values()
        ]
    }


# -- date / time -----------------------------------------------------------------------


class DateTimeConfig(msgspec.Struct, kw_only=True):
    """Parse, shift, convert and format a date/time."""

    value: Annotated[
        Any, msgspec.Meta(title="Value", description="ISO 8601, epoch seconds, or now")
    ] = "now"
    input_timezone: Annotated[
        str, msgspec.Meta(title="Timezone of naive values", description="IANA name")
    ] = "UTC"
    timezone: Annotated[str, msgspec.Meta(title="Output timezone", description="IANA name")] = "UTC"
    format: Annotated[str, msgspec.Meta(title="Format", description="strftime pattern, or iso")] = (
        "iso"
    )
    add_days: Annotated[float, msgspec.Meta(title="Add days")] = 0
    add_hours: Annotated[float, msgspec.Meta(title="Add hours")] = 0
    add_minutes: Annotated[float, msgspec.Meta(title="Add minutes")] = 0


class DateTimeOutput(TypedDict):
    """The moment in the output timezone: `iso` (ISO 8601 with offset), `formatted` (per
    Format), `epoch` (Unix seconds), `timezone` (IANA name) and `weekday` (e.g. Monday)."""

    iso: str
    formatted: str
    epoch: float
    timezone: str
    weekday: str


@sdk.action(
    "data.datetime",
    label="Date & time",
    config=DateTimeConfig,
    category="Data",
    icon="clock",
    expression_fields=("value",),
)
async def format_datetime(config: DateTimeConfig, input: Any) -> DateTimeOutput:
    """Convert a moment between timezones and format it."""
    naive_zone = zone(config.input_timezone)
    moment = parse_moment(config.value, naive_zone)
    if config.add_days:
        moment = add_local_days(moment, config.add_days, naive_zone)
    # elapsed time: added to the instant, never to a zone's wall clock
    moment = moment.astimezone(UTC) + timedelta(hours=config.add_hours, minutes=config.add_minutes)
    local = moment.astimezone(zone(config.timezone))
    formatted = local.isoformat() if config.format == "iso" else local.strftime(config.format)
    return {
        "iso": local.isoformat(),
        "formatted": formatted,
        "epoch": local.timestamp(),
        "timezone": config.timezone,
        "weekday": local.strftime("%A"),
    }


# -- text template ---------------------------------------------------------------------


class TemplateConfig(msgspec.Struct, kw_only=True):
    """Render a Jinja2 template."""

    template: Annotated[
        str,
        msgspec.Meta(
            title="Template",
            description="Jinja2; variables input and data",
            extra_json_schema={"x-multiline": True},
        ),
    ]
    data: Annotated[Any, msgspec.Meta(title="Data", description="Available as data")] = None
    html: Annotated[bool, msgspec.Meta(title="HTML output (autoescape)")] = False


class TemplateOutput(TypedDict):
    """The rendered `text`."""

    text: str


@sdk.action(
    "data.template",
    label="Text template",
    config=TemplateConfig,
    category="Data",
    icon="type",
    expression_fields=("data",),
)
async def render_text(config: TemplateConfig, input: Any) -> TemplateOutput:
    """Render the template in the sandbox; undefined variables fail the step."""
    started = time.perf_counter()
    variables = {"input": input, "data": config.data}
    try:
        text = templating.render(config.template, variables, html=config.html)
    except jinja2.TemplateError as err:
        raise sdk.NonRetryableError(
            f"template error: {type(err).__name__}: {err}", kind="template_error"
        ) from None
    sdk.logger().debug("rendered in %.2f ms", (time.perf_counter() - started) * 1000)
    return {"text": text}


connector = sdk.Connector(
    name="data",
    label="Data",
    version="1.0.0",
    description=(
        "Filter, sort, aggregate, merge, split out, deduplicate, limit and rename items; "
        "date/time, crypto and text templates"
    ),
    actions=[
        filter_items,
        sort_items,
        aggregate,
        *data_lists.ACTIONS,
        format_datetime,
        date_calc,
        crypto,
        render_text,
    ],
    credential_types=[HMAC_KEY],
    icon="table",
)
