"""Item-list nodes of the Data connector: merge two lists, split a list out of each item,
remove duplicates, limit, rename keys. Actions like the other Data nodes (docs/connectors.md,
"Data nodes are actions"); lists are expression fields defaulting to the step input
(:func:`~connectors.builtin.data_values.items_of`), paths are dotted.

- ``data.merge`` -> ``{"items", "count"}``. Modes: ``append`` (``left`` then ``right``);
  ``by_position`` (item *i* of each merged, ``right`` winning a clash; the longer list's
  rest kept unless ``unpaired`` is ``drop``); ``by_key`` (each ``left`` item merged with
  the first ``right`` item whose ``right_key`` equals its ``left_key``, unmatched ``left``
  items kept as they are: a lookup); ``join`` (SQL-like: every matching pair merged,
  ``join_type`` ``inner``, ``left``, ``right`` or ``outer`` keeping the unmatched items
  of that side, in ``left`` order then the unmatched ``right`` ones). Keys compare as JSON
  (``1`` and ``"1"`` differ); an item without the key matches nothing. Merging needs
  objects: another item is a ``ConfigError``.
- ``data.split_out`` -> ``{"items", "count"}``: one item per element of the list at
  ``field`` of each item, the element itself, or, with ``include`` ``other_fields``, the
  item's other fields plus ``{<destination>: element}``; an item whose field is missing
  or not a list gives none (``count`` counts the new items).
- ``data.remove_duplicates`` -> ``{"items", "count", "removed"}``: items equal on
  ``fields`` (all of them: whole items when empty), the first (or, with ``keep``
  ``last``, the last) one kept, in input order.
- ``data.limit`` -> ``{"items", "count", "dropped"}``: the first (or last) ``max_items``.
- ``data.rename_keys`` -> ``{"items"}``: each ``from`` key (a dotted path) moved to
  ``to`` (dotted too) in every item; a missing ``from`` is skipped; objects only.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypedDict

import msgspec

from connectors import sdk
from connectors.builtin.data_values import Items, get_path, items_of

__all__ = ["ACTIONS"]


class ListOutput(TypedDict):
    """The resulting `items` and how many there are (`count`)."""

    items: list[Any]
    count: int


Keep = Annotated[
    Literal["first", "last"],
    msgspec.Meta(
        title="Keep", extra_json_schema={"x-enum-labels": {"first": "First", "last": "Last"}}
    ),
]
"""Which end of the list a node keeps (the first or last duplicate, items)."""


def _key(value: Any) -> bytes:
    return msgspec.json.encode(value, order="deterministic")


def _object(item: Any, where: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise sdk.ConfigError(f"{where} holds {type(item).__name__} items; merging needs objects")
    return item


# -- merge -----------------------------------------------------------------------------

MergeMode = Literal["append", "by_position", "by_key", "join"]
MERGE_MODE_LABELS = {
    "append": "Append (left, then right)",
    "by_position": "By position (zip)",
    "by_key": "By key (look up in right)",
    "join": "Join (SQL-like)",
}
JOIN_LABELS = {
    "inner": "Inner: matches only",
    "left": "Left: all left items",
    "right": "Right: all right items",
    "outer": "Full outer: all items",
}


class MergeConfig(msgspec.Struct, kw_only=True):
    """Merge two lists of items."""

    left: Annotated[Any, msgspec.Meta(title="Left items", description="A list")]
    right: Annotated[Any, msgspec.Meta(title="Right items", description="A list")]
    mode: Annotated[
        MergeMode,
        msgspec.Meta(title="Mode", extra_json_schema={"x-enum-labels": MERGE_MODE_LABELS}),
    ] = "append"
    left_key: Annotated[str, msgspec.Meta(title="Left key", description="Dotted path")] = ""
    right_key: Annotated[
        str, msgspec.Meta(title="Right key", description="Dotted path; defaults to Left key")
    ] = ""
    join_type: Annotated[
        Literal["inner", "left", "right", "outer"],
        msgspec.Meta(title="Join type", extra_json_schema={"x-enum-labels": JOIN_LABELS}),
    ] = "inner"
    unpaired: Annotated[
        Literal["keep", "drop"],
        msgspec.Meta(
            title="Unpaired items (by position)",
            extra_json_schema={"x-enum-labels": {"keep": "Keep", "drop": "Drop"}},
        ),
    ] = "keep"


def _by_position(left: list[Any], right: list[Any], unpaired: str) -> list[Any]:
    pairs = min(len(left), len(right))
    merged = [
        {**_object(a, "left"), **_object(b, "right")}
        for a, b in zip(left[:pairs], right[:pairs], strict=True)
    ]
    if unpaired == "keep":
        merged += left[pairs:] + right[pairs:]
    return merged


def _index(items: list[Any], path: str) -> dict[bytes, list[int]]:
    index: dict[bytes, list[int]] = {}
    for position, item in enumerate(items):
        value = get_path(_object(item, "right"), path)
        if value is not None:
            index.setdefault(_key(value), []).append(position)
    return index


def _join(config: MergeConfig, left: list[Any], right: list[Any]) -> list[Any]:
    left_key = config.left_key
    right_key = config.right_key or left_key
    if not left_key:
        raise sdk.ConfigError(f"mode {config.mode} needs a Left key")
    index = _index(right, right_key)
    matched_right: set[int] = set()
    merged: list[Any] = []
    for item in left:
        value = get_path(_object(item, "left"), left_key)
        hits = index.get(_key(value), []) if value is not None else []
        if config.mode == "by_key":
            merged.append({**item, **right[hits[0]]} if hits else item)
            continue
        matched_right.update(hits)
        merged += [{**item, **right[hit]} for hit in hits]
        if not hits and config.join_type in ("left", "outer"):
            merged.append(item)
    if config.mode == "join" and config.join_type in ("right", "outer"):
        merged += [item for k, item in enumerate(right) if k not in matched_right]
    return merged


@sdk.action(
    "data.merge",
    label="Merge",
    config=MergeConfig,
    category="Data",
    icon="merge",
    expression_fields=("left", "right"),
)
async def merge(config: MergeConfig, input: Any) -> ListOutput:
    """Append, zip, look up or join two lists of items."""
    left = items_of(config.left, None, "left")
    right = items_of(config.right, None, "right")
    if config.mode == "append":
        merged = left + right
    elif config.mode == "by_position":
        merged = _by_position(left, right, config.unpaired)
    else:
        merged = _join(config, left, right)
    return {"items": merged, "count": len(merged)}


# -- split out -------------------------------------------------------------------------


class SplitOutConfig(msgspec.Struct, kw_only=True):
    """One item per element of a list field."""

    items: Items = None
    field: Annotated[str, msgspec.Meta(title="Field to split out", description="Dotted path")]
    include: Annotated[
        Literal["none", "other_fields"],
        msgspec.Meta(
            title="Include",
            extra_json_schema={
                "x-enum-labels": {"none": "The element only", "other_fields": "Other fields too"}
            },
        ),
    ] = "none"
    destination: Annotated[
        str,
        msgspec.Meta(
            title="Destination key",
            description="Key of the element with other fields (default: the field's name)",
        ),
    ] = ""


def _without(item: dict[str, Any], path: str) -> dict[str, Any]:
    """``item`` without the key at dotted ``path`` (copied along the way)."""
    head, _, rest = path.partition(".")
    if not rest:
        return {k: v for k, v in item.items() if k != head}
    inner = item.get(head)
    if not isinstance(inner, dict):
        return dict(item)
    return {**item, head: _without(inner, rest)}


@sdk.action(
    "data.split_out",
    label="Split out",
    config=SplitOutConfig,
    category="Data",
    icon="ungroup",
    expression_fields=("items",),
)
async def split_out(config: SplitOutConfig, input: Any) -> ListOutput:
    """Turn a list inside each item into items of their own."""
    destination = config.destination or config.field.rsplit(".", 1)[-1]
    out: list[Any] = []
    for item in items_of(config.items, input):
        elements = get_path(item, config.field)
        if not isinstance(elements, list):
            continue
        if config.include == "none":
            out += elements
        else:
            rest = _without(_object(item, "items"), config.field)
            out += [{**rest, destination: element} for element in elements]
    return {"items": out, "count": len(out)}


# -- remove duplicates -----------------------------------------------------------------


class RemoveDuplicatesConfig(msgspec.Struct, kw_only=True):
    """Keep one item of each set of equal items."""

    items: Items = None
    fields: Annotated[
        list[str],
        msgspec.Meta(title="Compare fields", description="Dotted paths; empty: whole items"),
    ] = []
    keep: Keep = "first"


class DedupOutput(TypedDict):
    """The kept `items` (input order), how many (`count`) and how many were `removed`."""

    items: list[Any]
    count: int
    removed: int


@sdk.action(
    "data.remove_duplicates",
    label="Remove duplicates",
    config=RemoveDuplicatesConfig,
    category="Data",
    icon="copy-minus",
    expression_fields=("items",),
)
async def remove_duplicates(config: RemoveDuplicatesConfig, input: Any) -> DedupOutput:
    """Drop items equal (on the chosen fields) to one kept."""
    items = items_of(config.items, input)
    chosen: dict[bytes, int] = {}
    for position, item in enumerate(items):
        values = [get_path(item, f) for f in config.fields] if config.fields else item
        key = _key(values)
        if config.keep == "last" or key not in chosen:
            chosen[key] = position
    kept = [items[k] for k in sorted(chosen.values())]
    return {"items": kept, "count": len(kept), "removed": len(items) - len(kept)}


# -- limit -----------------------------------------------------------------------------


class LimitConfig(msgspec.Struct, kw_only=True):
    """Keep at most a number of items."""

    items: Items = None
    max_items: Annotated[int, msgspec.Meta(title="Max items", ge=0)] = 10
    keep: Keep = "first"


class LimitOutput(TypedDict):
    """The kept `items`, how many (`count`) and how many were `dropped`."""

    items: list[Any]
    count: int
    dropped: int


@sdk.action(
    "data.limit",
    label="Limit",
    config=LimitConfig,
    category="Data",
    icon="list-end",
    expression_fields=("items",),
)
async def limit(config: LimitConfig, input: Any) -> LimitOutput:
    """The first or last Max items items."""
    items = items_of(config.items, input)
    n = config.max_items
    kept = items[:n] if config.keep == "first" else (items[-n:] if n else [])
    return {"items": kept, "count": len(kept), "dropped": len(items) - len(kept)}


# -- rename keys -----------------------------------------------------------------------


class Rename(msgspec.Struct, kw_only=True):
    """Move the key at ``from`` (dotted) to ``to`` (dotted)."""

    from_: str = msgspec.field(name="from")
    to: str


class RenameKeysConfig(msgspec.Struct, kw_only=True):
    """Rename keys of every item."""

    items: Items = None
    renames: Annotated[list[Rename], msgspec.Meta(title="Renames", min_length=1)]


class RenameOutput(TypedDict):
    """The `items` with their keys renamed."""

    items: list[Any]


def _put(item: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    head, _, rest = path.partition(".")
    if not rest:
        return {**item, head: value}
    inner = item.get(head)
    return {**item, head: _put(inner if isinstance(inner, dict) else {}, rest, value)}


_MISSING = object()


def _take(item: dict[str, Any], path: str) -> Any:
    head, _, rest = path.partition(".")
    if head not in item:
        return _MISSING
    if not rest:
        return item[head]
    inner = item[head]
    return _take(inner, rest) if isinstance(inner, dict) else _MISSING


@sdk.action(
    "data.rename_keys",
    label="Rename keys",
    config=RenameKeysConfig,
    category="Data",
    icon="text-cursor-input",
    expression_fields=("items",),
)
async def rename_keys(config: RenameKeysConfig, input: Any) -> RenameOutput:
    """Rename keys (dotted paths) in every item."""
    out = []
    for item in items_of(config.items, input):
        renamed = _object(item, "items")
        for rename in config.renames:
            value = _take(renamed, rename.from_)
            if value is not _MISSING:
                renamed = _put(_without(renamed, rename.from_), rename.to, value)
        out.append(renamed)
    return {"items": out}


ACTIONS = [merge, split_out, remove_duplicates, limit, rename_keys]
"""The item-list actions, in palette order."""
