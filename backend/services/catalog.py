"""The node-type catalog: the engine's control nodes plus every installed connector.

Connectors are discovered through the ``railyard.connectors`` entry-point group; each entry
point names a ``connectors.sdk.Connector``. A plugin that fails to import or is malformed is
recorded in :attr:`AppCatalog.errors` (shown on the catalog page and logged) and skipped:
it never stops the app.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from typing import Any

from backend.engine.control import CONTROL_NODE_TYPES
from backend.engine.nodes import FLOW_NODE_TYPES
from designer_schema.catalog import NodeTypeSpec

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "railyard.connectors"


@dataclass
class ConnectorInfo:
    """A loaded connector: name, label, version and the node types it provides."""

    name: str
    label: str
    version: str
    node_types: list[str]


@dataclass
class AppCatalog:
    """Implements ``designer_schema.catalog.Catalog`` and the engine's ``ConnectorRegistry``."""

    specs: dict[str, NodeTypeSpec] = field(default_factory=dict)
    actions: dict[str, Any] = field(default_factory=dict)
    connectors: list[ConnectorInfo] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def get(self, node_type: str) -> NodeTypeSpec | None:
        return self.specs.get(node_type)

    def all(self) -> list[NodeTypeSpec]:
        return list(self.specs.values())

    def action(self, node_type: str) -> Any | None:
        return self.actions.get(node_type)

    def add_connector(self, connector: Any) -> None:
        """Register every action of an SDK ``Connector``; raises ValueError on a clash."""
        names = []
        for action in connector.actions:
            if action.type in self.specs:
                raise ValueError(f"node type {action.type} is already provided")
            self.specs[action.type] = spec_for_action(action, connector.name)
            self.actions[action.type] = action
            names.append(action.type)
        self.connectors.append(
            ConnectorInfo(connector.name, connector.label, connector.version, names)
        )


def spec_for_action(action: Any, connector_name: str) -> NodeTypeSpec:
    """Build the designer's :class:`NodeTypeSpec` from an SDK ``ActionDefinition``."""
    schema = action.config_json_schema()
    props = dict(schema.get("properties", {}))
    props.setdefault(
        "on_error",
        {
            "type": "string",
            "enum": ["fail", "error_port", "continue"],
            "default": "fail",
            "title": "On error",
        },
    )
    schema = {**schema, "properties": props}
    return NodeTypeSpec(
        type=action.type,
        label=action.label,
        kind="action",
        category=action.category or connector_name,
        description=action.description,
        icon=action.icon,
        outputs=tuple(action.outputs),
        config_schema=schema,
        expression_fields=tuple(action.expression_fields),
        connector=connector_name,
    )


def load_catalog(extra_connectors: list[Any] | None = None) -> AppCatalog:
    """Build the catalog from control nodes, entry-point plugins and ``extra_connectors``."""
    catalog = AppCatalog()
    for spec in [*CONTROL_NODE_TYPES, *FLOW_NODE_TYPES]:
        catalog.specs[spec.type] = spec
    found = sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)
    for ep in found:
        try:
            catalog.add_connector(ep.load())
        except Exception as exc:  # a broken plugin must not stop the app
            message = f"connector {ep.name} ({ep.value}) failed to load: {exc!r}"
            log.error(message)
            catalog.errors.append(message)
    for connector in extra_connectors or []:
        catalog.add_connector(connector)
    return catalog
