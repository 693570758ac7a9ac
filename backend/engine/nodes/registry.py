"""Node types by type name and version.

A published workflow graph pins each step's node-type version (``Step.type_version``);
:meth:`NodeRegistry.behaviour` returns that version's behaviour, so a published version
keeps its meaning when a node evolves: changed behaviour is a new version, registered next
to the old one, and only graphs compiled afterwards (which pin the latest version) get it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from backend.engine.nodes.base import (
    ActionBehaviour,
    Behaviour,
    InlineBehaviour,
    InlineResult,
    NodeError,
    NodeType,
    TriggerBehaviour,
)
from backend.engine.nodes.pinned_output import PINNED, PINNED_TYPE
from designer_schema.catalog import NodeTypeSpec
from designer_schema.graph import Step

_SPEC_KINDS = {"trigger": {"trigger"}, "action": {"action"}, "control": {"inline", "timer", "call"}}

_TRIGGER = TriggerBehaviour()
_ACTION = ActionBehaviour()


class _NotInstalled(InlineBehaviour):
    """A control step whose node type version is not registered: it fails the step."""

    def evaluate(self, step: Step, config: dict[str, Any], data: Any) -> InlineResult:
        raise NodeError(
            f"node type {step.type} version {step.type_version} is not installed",
            kind="unknown_node_type",
        )


_NOT_INSTALLED = _NotInstalled()


class NodeRegistry:
    """Node types registered by ``(type, version)``; the catalog shows the latest version.

    Palette order is the order in which each type was first registered.
    """

    def __init__(self, nodes: Iterable[NodeType] = ()) -> None:
        self._nodes: dict[tuple[str, int], NodeType] = {}
        self._latest: dict[str, NodeType] = {}
        for node in nodes:
            self.register(node)

    def register(self, node: NodeType) -> None:
        """Add one version of a node type.

        Raises ``ValueError`` when that ``(type, version)`` is already registered, the
        version is below 1, or the behaviour's kind does not fit the spec's kind
        (``trigger``/``action`` specs need that behaviour; ``control`` specs an inline,
        timer or call behaviour).
        """
        spec, behaviour = node.spec, node.behaviour
        if node.key in self._nodes:
            raise ValueError(f"node type {spec.type} version {spec.version} is already registered")
        if spec.version < 1:
            raise ValueError(f"node type {spec.type}: version must be >= 1, got {spec.version}")
        if behaviour.kind not in _SPEC_KINDS[spec.kind]:
            raise ValueError(
                f"node type {spec.type}: a {spec.kind} node cannot have "
                f"a {behaviour.kind} behaviour"
            )
        self._nodes[node.key] = node
        latest = self._latest.get(spec.type)
        if latest is None or latest.spec.version < spec.version:
            self._latest[spec.type] = node

    def unregister(self, node_type: str, version: int) -> None:
        """Remove one version (``KeyError`` when absent); the latest is recomputed."""
        del self._nodes[(node_type, version)]
        remaining = [n for (t, _), n in self._nodes.items() if t == node_type]
        if remaining:
            self._latest[node_type] = max(remaining, key=lambda n: n.spec.version)
        else:
            del self._latest[node_type]

    def get(self, node_type: str, version: int | None = None) -> NodeType | None:
        """The node type at ``version`` (``None``: the latest), or ``None``."""
        if version is None:
            return self._latest.get(node_type)
        return self._nodes.get((node_type, version))

    def versions(self, node_type: str) -> list[int]:
        """Registered versions of ``node_type``, ascending."""
        return sorted(v for (t, v) in self._nodes if t == node_type)

    def latest_specs(self) -> list[NodeTypeSpec]:
        """The spec of each type's latest version, in palette order."""
        return [node.spec for node in self._latest.values()]

    def behaviour(self, step: Step) -> Behaviour:
        """The behaviour of the node-type version ``step`` pins.

        Types not registered here are a connector's: ``action`` steps dispatch to workers,
        ``trigger`` steps complete at the start. A ``control`` step whose version is not
        registered gets a behaviour that fails it (kind ``unknown_node_type``). A test
        run's pinned step (``test.pinned``) outputs its pinned data.
        """
        if step.type == PINNED_TYPE:
            return PINNED
        node = self._nodes.get((step.type, step.type_version))
        if node is not None:
            return node.behaviour
        if step.kind == "action":
            return _ACTION
        if step.kind == "trigger":
            return _TRIGGER
        return _NOT_INSTALLED
