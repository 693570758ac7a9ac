"""Built-in node types: one module each, holding the spec and the behaviour.

Each module defines ``SPEC`` (a :class:`~designer_schema.catalog.NodeTypeSpec`) and ``NODE``
(a :class:`~backend.engine.nodes.base.NodeType`: that spec plus its behaviour). A changed
behaviour is a new version: a new ``NodeType`` whose spec has ``version`` one higher,
registered next to the old one (see :mod:`backend.engine.nodes.registry` and
docs/engine.md, "Node types and their versions").

:data:`NODE_TYPES` is the process's registry, in palette order. The orchestrator runs each
step with the behaviour of the version the step's graph pins; the catalog shows the latest.
"""

from __future__ import annotations

from backend.engine.nodes import (
    control_delay,
    control_foreach,
    control_if,
    control_join,
    control_respond,
    control_set,
    control_stop_error,
    control_subworkflow,
    control_switch,
    control_wait_until,
    trigger_manual,
    trigger_schedule,
    trigger_webhook,
)
from backend.engine.nodes.base import NodeType
from backend.engine.nodes.registry import NodeRegistry

BUILTIN_NODES: tuple[NodeType, ...] = (
    trigger_webhook.NODE,
    trigger_webhook.NODE_V2,
    trigger_webhook.NODE_V3,
    trigger_webhook.NODE_V4,
    trigger_schedule.NODE,
    trigger_manual.NODE,
    control_if.NODE,
    control_set.NODE,
    control_respond.NODE,
    control_switch.NODE,
    control_join.NODE,
    control_stop_error.NODE,
    control_delay.NODE,
    control_wait_until.NODE,
    control_subworkflow.NODE,
    control_foreach.NODE,
)
"""Every built-in node type version, in palette order."""

NODE_TYPES = NodeRegistry(BUILTIN_NODES)
"""The node-type registry the engine runs with unless it is handed another."""

__all__ = ["BUILTIN_NODES", "NODE_TYPES", "NodeRegistry", "NodeType"]
