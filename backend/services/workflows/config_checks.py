"""Publish-time check of each step's literal config against its node type's config Struct.

Every node type declares its config as a msgspec Struct: a built-in one as its behaviour's
``config_type`` (:mod:`backend.engine.nodes.config`), a connector's action or trigger as
its definition's ``config_type``. The compiler checks a literal's JSON type and enum only
(:mod:`designer_schema.config_types`); :func:`config_diagnostics` decodes every step's
literal fields the way the step will be read when it runs, so what the Struct refuses
(a bound such as ``concurrency >= 1`` or ``status <= 599``, an item of the wrong type, an
empty workflow id) is an ``invalid_config`` error on the node and the field before the
version is published, not a failed step after:

- a built-in flow step's config as resolved (:func:`~backend.engine.nodes.config.typed_config`:
  strict, a literal ``None`` unset);
- a built-in trigger's as stored (:func:`~backend.engine.nodes.config.decode_config`);
- a connector's as its SDK converts it (``msgspec.convert(..., strict=False)``), a
  trigger's without the product's own keys (``poll_interval``, ``include_existing``:
  :func:`backend.services.triggers.events.subscriptions.connector_config`).

Fields holding an expression (anywhere inside them) are left out: their value is known
only when the step runs, where the same decoding names the field in the step error. A
required field left out that way is not reported (nor one missing outright: the compiler
reports that as ``missing_config``). The Webhook trigger is checked by
:func:`backend.services.workflows.diagram_checks.webhook_config_diagnostic` (before compiling).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from backend.engine.nodes.base import NodeError
from backend.engine.nodes.config import convert_config, decode_config, literal_config
from backend.services.triggers.events.subscriptions import connector_config
from backend.services.triggers.webhook_versions import WEBHOOK_TRIGGER
from designer_schema.diagnostics import Diagnostic
from designer_schema.graph import Step, WorkflowGraph
from designer_schema.step_options import RESERVED_CONFIG_KEYS

Reading = Literal["resolved", "stored", "connector"]

_MISSING = "missing required field"


def step_struct(step: Step, catalog: Any) -> tuple[type[Any] | None, Reading]:
    """The config Struct of the node-type version ``step`` pins and how its config is
    read (see the module docstring); ``None`` when the catalog knows no Struct for it."""
    nodes = getattr(catalog, "nodes", None)
    builtin = nodes.get(step.type, step.type_version) if nodes is not None else None
    if builtin is not None:
        behaviour = builtin.behaviour
        return behaviour.config_type, "stored" if behaviour.kind == "trigger" else "resolved"
    action = catalog.action(step.type, step.type_version) if hasattr(catalog, "action") else None
    definition = action or getattr(catalog, "triggers", {}).get(step.type)
    struct = getattr(definition, "config_type", None)
    is_struct = isinstance(struct, type) and hasattr(struct, "__struct_fields__")
    return (struct if is_struct else None), "connector"


def _holds_expression(name: str, expressions: Mapping[str, str]) -> bool:
    prefix = f"{name}."
    return any(path == name or path.startswith(prefix) for path in expressions)


def step_config_problem(step: Step, catalog: Any) -> NodeError | None:
    """Why ``step``'s literal config does not decode into its Struct (a
    :class:`NodeError` of kind ``invalid_config`` naming the field), or ``None``."""
    struct, reading = step_struct(step, catalog)
    if struct is None:
        return None
    literal = {
        k: v
        for k, v in step.config.items()
        if k not in RESERVED_CONFIG_KEYS and not _holds_expression(k, step.expressions)
    }
    try:
        if reading == "stored":
            decode_config(struct, literal)
        elif reading == "resolved":
            convert_config(struct, literal_config(literal, ()), strict=True)
        elif step.kind == "trigger":
            convert_config(struct, connector_config(literal), strict=False)
        else:
            convert_config(struct, literal, strict=False)
    except NodeError as exc:
        return None if _MISSING in str(exc) else exc
    return None


def config_diagnostics(graph: WorkflowGraph, catalog: Any) -> list[Diagnostic]:
    """``invalid_config`` (error, on the node and the field) for every step whose literal
    config its node type's Struct refuses, in graph order."""
    found = []
    for step in graph.steps:
        if step.type == WEBHOOK_TRIGGER:
            continue
        problem = step_config_problem(step, catalog)
        if problem is not None:
            found.append(
                Diagnostic("error", "invalid_config", str(problem), step.id, None, problem.field)
            )
    return found
