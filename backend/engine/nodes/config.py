"""A node type's config as a msgspec Struct: one declaration gives the designer's config
schema (:func:`config_schema`) and the typed value its behaviour works with
(:func:`decode_config`).

A built-in node module declares ``class XConfig(msgspec.Struct, kw_only=True)`` with every
field defaulted and described through ``Annotated[T, msgspec.Meta(title=...,
description=..., extra_json_schema=...)]``, as connector actions declare theirs
(:func:`connectors.sdk.schema.config_json_schema` generates both schemas). What the
designer's form needs beyond msgspec's output is done here, the same way for every node:

- a field ``T | None = None`` (optional, no default) is shown as ``T`` without a default,
  and so is any field whose default is ``None`` (an ``Any`` one);
- a field whose ``extra_json_schema`` gives its own ``type`` (a union the form shows as
  one control, e.g. the Set's list-or-object *Fields*) keeps that ``type``: msgspec's
  ``anyOf`` is dropped;
- ``enum`` lists keep the ``Literal``'s order (msgspec sorts them; the designer shows
  the choices in the order declared);
- no top-level ``title``/``description`` (the node's label and description say it) and
  no empty ``required``.

Behaviours that declare their Struct (``config_type``) get the step's config with its
expressions evaluated decoded into it when the step starts (:func:`typed_config`), as
given (a string is not a number), except that a literal ``None`` is an unset field, as
the compiler reads it (an expression's ``None`` is a value).

Stored configs (a trigger's, read by the webhook endpoint) were written by every earlier
designer, so decoding them is lenient where the dict readers were: a ``None`` or
empty-string value means "not set" (the field's default), numbers and booleans written
as strings are converted (msgspec's ``strict=False``). Unknown keys are ignored either
way. A value that does not fit raises :class:`~backend.engine.nodes.base.NodeError` of
kind ``invalid_config`` naming the field.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

import msgspec

from backend.engine.nodes.base import Behaviour, NodeError
from connectors.sdk.schema import config_json_schema

__all__ = [
    "config_schema",
    "convert_config",
    "decode_config",
    "literal_config",
    "typed_config",
]

S = TypeVar("S", bound=msgspec.Struct)

_AT = re.compile(r" - at `\$\.?(?P<path>[^`]*)`$")
_MISSING = re.compile(r"missing required field `(?P<path>[^`]*)`")


def _literal_values(annotation: Any) -> list[Any] | None:
    """The values of the ``Literal`` inside ``annotation`` (through ``Annotated`` and
    ``| None``), in declaration order; ``None`` when it holds none."""
    if get_origin(annotation) is Literal:
        return list(get_args(annotation))
    for arg in get_args(annotation):
        found = _literal_values(arg)
        if found is not None:
            return found
    return None


def _collapse_optional(prop: dict[str, Any]) -> dict[str, Any]:
    """``{"anyOf": [X, {"type": "null"}], "default": None, ...}`` as ``X`` (plus the
    outer keys): an optional field is simply unset in the designer's form. An ``anyOf``
    beside a declared ``type`` is left out, and so is a ``None`` default."""
    members = prop.get("anyOf")
    if isinstance(members, list) and "type" in prop:
        prop = {k: v for k, v in prop.items() if k != "anyOf"}
    elif isinstance(members, list) and prop.get("default", 0) is None:
        others = [m for m in members if m != {"type": "null"}]
        if len(others) == 1 and len(others) != len(members):
            outer = {k: v for k, v in prop.items() if k not in ("anyOf", "default")}
            prop = {**others[0], **outer}
    if "default" in prop and prop["default"] is None:
        prop = {k: v for k, v in prop.items() if k != "default"}
    return prop


def config_schema(
    struct: type[msgspec.Struct], *, exclude: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """The designer's config schema of ``struct`` (``{"type": "object", "properties":
    {...}}``, properties in field order), leaving out the fields in ``exclude`` (those a
    node type's earlier version did not have)."""
    generated = config_json_schema(struct)
    hints = get_type_hints(struct, include_extras=True)
    properties: dict[str, Any] = {}
    for name, prop in generated["properties"].items():
        if name in exclude:
            continue
        prop = _collapse_optional(prop)
        order = _literal_values(hints[name])
        if order is not None and "enum" in prop:
            prop = {**prop, "enum": order}
        properties[name] = prop
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = [name for name in generated.get("required", []) if name not in exclude]
    if required:
        schema["required"] = required
    return schema


def convert_config(struct: type[S], config: Mapping[str, Any], *, strict: bool) -> S:
    """``config`` converted to ``struct`` by msgspec (``strict``: a string is not a
    number). Raises :class:`NodeError` (kind ``invalid_config``, ``field`` the config
    field at fault) when a value does not fit its field or a required one is missing."""
    try:
        return msgspec.convert(config, struct, strict=strict)
    except msgspec.ValidationError as exc:
        message = str(exc)
        found = _AT.search(message)
        missing = _MISSING.search(message)
        field = found.group("path") if found else (missing.group("path") if missing else None)
        text = message[: found.start()] if found else message
        where = f"{field}: " if field else ""
        raise NodeError(
            f"invalid config: {where}{text}", kind="invalid_config", field=field
        ) from None


def decode_config(struct: type[S], config: Mapping[str, Any], *, stored: bool = True) -> S:
    """``config`` as ``struct``: a stored node config leniently, a resolved one
    (``stored=False``) as given (see the module doc).

    Raises :class:`NodeError` (kind ``invalid_config``, ``field`` the config field at
    fault) when a value does not fit its field or a required one is missing."""
    given = {k: v for k, v in config.items() if v is not None and v != ""} if stored else config
    return convert_config(struct, given, strict=not stored)


def literal_config(config: Mapping[str, Any], expressions: Collection[str]) -> dict[str, Any]:
    """``config`` without the literal ``None`` values: a compiled step's ``None`` is an
    unset field (:mod:`designer_schema.node_compiler`), unless the field is an
    expression (``expressions``: its paths), whose value ``None`` is given."""
    return {k: v for k, v in config.items() if v is not None or k in expressions}


def typed_config(
    behaviour: Behaviour, config: dict[str, Any], expressions: Collection[str] = ()
) -> Any:
    """The resolved ``config`` of a step as ``behaviour`` takes it: decoded into its
    ``config_type`` as given (a literal ``None`` being unset: :func:`literal_config`;
    ``expressions`` the step's expression paths), or the dict itself when it declares
    none. Raises :class:`NodeError` (``invalid_config``) naming the field."""
    struct = behaviour.config_type
    if struct is None:
        return config
    return convert_config(struct, literal_config(config, expressions), strict=True)
