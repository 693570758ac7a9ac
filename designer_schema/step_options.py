"""The reserved config keys every node has: ``retry``, ``timeout``, ``join``, ``on_error``.

The engine reads them for every node type, so they are not part of config schemas; each
``parse_*`` function returns the compiled option (the default when the value is unusable)
and reports problems as ``invalid_config`` with the field path (``retry.max_attempts``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from designer_schema.config_types import json_type_of, short
from designer_schema.diagnostic_sink import DiagnosticSink
from designer_schema.diagram import Node
from designer_schema.graph import JoinMode, JoinSpec, OnError, RetryPolicy

RESERVED_CONFIG_KEYS: Final = frozenset({"retry", "timeout", "join", "on_error"})
"""Config keys read by the engine for every node type (not part of config schemas)."""

_ON_ERROR_VALUES: Final[tuple[OnError, ...]] = ("fail", "error_port", "continue")
_JOIN_MODES: Final[tuple[JoinMode, ...]] = ("all", "first", "n_of_m")


def struct_field(
    node: Node,
    key: str,
    struct_type: type[RetryPolicy] | type[JoinSpec],
    sink: DiagnosticSink,
) -> dict[str, Any] | None:
    """Common checks of an object-valued reserved key; returns its fields when usable."""
    value = node.config.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        sink.add(
            "invalid_config",
            f"{key} must be an object, got {json_type_of(value)}",
            node_id=node.id,
            field=key,
        )
        return None
    known = set(struct_type.__struct_fields__)
    fields: dict[str, Any] = {}
    for name, item in value.items():
        if name in known:
            fields[str(name)] = item
        else:
            sink.add(
                "invalid_config",
                f"unknown {key} setting {name!r}; expected one of {', '.join(sorted(known))}",
                node_id=node.id,
                field=f"{key}.{name}",
            )
    return fields


def convert_error(exc: msgspec.ValidationError, node: Node, key: str, sink: DiagnosticSink) -> None:
    """Report a msgspec validation error of reserved key ``key`` as ``invalid_config``
    on the field it names (``retry.max_attempts``)."""
    text = str(exc)
    message, sep, where = text.partition(" - at `$")
    field = key
    if sep:
        suffix = where.rstrip("`").replace("[", ".").replace("]", "")
        field = f"{key}{suffix}"
    sink.add("invalid_config", message, node_id=node.id, field=field)


def parse_retry(node: Node, sink: DiagnosticSink) -> RetryPolicy:
    """The node's ``retry`` policy (the default when absent or invalid; problems reported)."""
    fields = struct_field(node, "retry", RetryPolicy, sink)
    if fields is None:
        return RetryPolicy()
    try:
        policy = msgspec.convert(fields, RetryPolicy)
    except msgspec.ValidationError as exc:
        convert_error(exc, node, "retry", sink)
        return RetryPolicy()
    problems: list[tuple[str, str]] = []
    if policy.max_attempts < 1:
        problems.append(("max_attempts", "must be at least 1"))
    for name in ("initial_interval", "max_interval", "backoff_coefficient", "jitter"):
        number = getattr(policy, name)
        if not math.isfinite(number):
            problems.append((name, "must be a finite number"))
    if policy.initial_interval < 0:
        problems.append(("initial_interval", "must not be negative"))
    if policy.backoff_coefficient < 1:
        problems.append(("backoff_coefficient", "must be at least 1"))
    if policy.max_interval < policy.initial_interval:
        problems.append(("max_interval", "must be at least initial_interval"))
    if not 0 <= policy.jitter <= 1:
        problems.append(("jitter", "must be between 0 and 1"))
    for name, message in problems:
        sink.add("invalid_config", message, node_id=node.id, field=f"retry.{name}")
    return RetryPolicy() if problems else policy


def parse_join(node: Node, sink: DiagnosticSink) -> JoinSpec:
    """The node's ``join`` spec (waits for all when absent or invalid; problems reported)."""
    fields = struct_field(node, "join", JoinSpec, sink)
    if fields is None:
        return JoinSpec()
    try:
        join = msgspec.convert(fields, JoinSpec)
    except msgspec.ValidationError as exc:
        convert_error(exc, node, "join", sink)
        return JoinSpec()
    if join.count < 0:
        sink.add("invalid_config", "must not be negative", node_id=node.id, field="join.count")
        return JoinSpec()
    if join.mode == "n_of_m" and join.count < 1:
        sink.add(
            "invalid_config",
            "n_of_m needs a count of at least 1",
            node_id=node.id,
            field="join.count",
        )
        return JoinSpec()
    return join


def config_join(config: Mapping[str, Any]) -> JoinSpec:
    """The join of a node whose own ``mode``/``count`` fields say what it waits for (the
    Join node; ``NodeTypeSpec.config_join``): an unknown mode waits for all, a count that
    is not an integer counts 1 (the schema check has reported bad literals already)."""
    mode: JoinMode = "all"
    for known in _JOIN_MODES:
        if config.get("mode") == known:
            mode = known
    count = config.get("count") or 1
    usable = isinstance(count, int) and not isinstance(count, bool)
    return JoinSpec(mode=mode, count=count if usable else 1)


def parse_timeout(node: Node, sink: DiagnosticSink) -> float | None:
    """The node's ``timeout`` in seconds per attempt (None when absent or invalid)."""
    value = node.config.get("timeout")
    if value is None:
        return None
    seconds: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            seconds = float(value)
        except OverflowError:
            seconds = None
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        sink.add(
            "invalid_config",
            f"timeout must be a positive number of seconds, got {short(value)}",
            node_id=node.id,
            field="timeout",
        )
        return None
    return seconds


def parse_on_error(node: Node, sink: DiagnosticSink) -> OnError:
    """The node's ``on_error`` (``fail`` when absent or invalid; problems reported)."""
    value = node.config.get("on_error")
    if value is None:
        return "fail"
    for allowed in _ON_ERROR_VALUES:
        if isinstance(value, str) and value == allowed:
            return allowed
    sink.add(
        "invalid_config",
        f"on_error must be one of {', '.join(_ON_ERROR_VALUES)}, got {short(value)}",
        node_id=node.id,
        field="on_error",
    )
    return "fail"
