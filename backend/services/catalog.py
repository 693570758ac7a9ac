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

from backend.engine.nodes import NODE_TYPES, NodeRegistry
from backend.services.events.subscriptions import INCLUDE_EXISTING, POLL_INTERVAL
from designer_schema.catalog import NodeTypeSpec

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "railyard.connectors"


@dataclass
class ConnectorInfo:
    """A loaded connector: name, label, version, the node types and credential types it
    provides, and where it came from (``source``: the distribution name and version, or
    ``"built-in"`` / ``"extra"``)."""

    name: str
    label: str
    version: str
    node_types: list[str]
    description: str = ""
    icon: str = ""
    docs_url: str = ""
    credential_types: list[str] = field(default_factory=list)
    source: str = ""


@dataclass
class AppCatalog:
    """Implements ``designer_schema.catalog.Catalog`` and the engine's ``ConnectorRegistry``.

    Built-in node types come from ``nodes`` (the engine's registry, read live: the latest
    version of each type); ``specs`` holds the connectors' node types (the latest version
    of each), ``actions`` every version of every action by ``(type, version)``.
    """

    specs: dict[str, NodeTypeSpec] = field(default_factory=dict)
    actions: dict[tuple[str, int], Any] = field(default_factory=dict)
    connectors: list[ConnectorInfo] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    credential_types: dict[str, Any] = field(default_factory=dict)
    triggers: dict[str, Any] = field(default_factory=dict)
    nodes: NodeRegistry = field(default_factory=lambda: NODE_TYPES)

    def get(self, node_type: str) -> NodeTypeSpec | None:
        builtin = self.nodes.get(node_type)
        return builtin.spec if builtin is not None else self.specs.get(node_type)

    def all(self) -> list[NodeTypeSpec]:
        return [*self.nodes.latest_specs(), *self.specs.values()]

    def action(self, node_type: str, version: int = 1) -> Any | None:
        """The SDK ``ActionDefinition`` of ``node_type`` at ``version``, or ``None``."""
        return self.actions.get((node_type, version))

    def credential_type(self, name: str) -> Any | None:
        """The SDK ``CredentialType`` called ``name`` or ``None``."""
        return self.credential_types.get(name)

    def add_connector(self, connector: Any, source: str = "") -> None:
        """Register the actions, triggers and credential types of an SDK ``Connector``.

        Raises ``ValueError`` when a node type or credential type is already provided (the
        catalog is left unchanged) or ``TypeError`` when ``connector`` is not a Connector.
        """
        if not all(hasattr(connector, a) for a in ("name", "label", "version", "actions")):
            raise TypeError(f"{connector!r} is not a connectors.sdk.Connector")
        actions = list(connector.actions)
        triggers = list(getattr(connector, "triggers", ()))
        credential_types = list(getattr(connector, "credential_types", ()))
        for node_type in {a.type for a in actions} | {t.type for t in triggers}:
            if node_type in self.specs or self.nodes.get(node_type) is not None:
                raise ValueError(f"node type {node_type} is already provided")
        for ctype in credential_types:
            if ctype.name in self.credential_types:
                raise ValueError(f"credential type {ctype.name} is already provided")
        names = []
        for action in sorted(actions, key=lambda a: a.version):  # the latest spec wins
            self.specs[action.type] = spec_for_action(action, connector.name)
            self.actions[(action.type, action.version)] = action
            if action.type not in names:
                names.append(action.type)
        for trig in triggers:
            self.specs[trig.type] = spec_for_trigger(trig, connector.name)
            self.triggers[trig.type] = trig
            names.append(trig.type)
        for ctype in credential_types:
            self.credential_types[ctype.name] = ctype
        self.connectors.append(
            ConnectorInfo(
                connector.name,
                connector.label,
                connector.version,
                names,
                description=getattr(connector, "description", ""),
                icon=getattr(connector, "icon", ""),
                docs_url=getattr(connector, "docs_url", ""),
                credential_types=[c.name for c in credential_types],
                source=source,
            )
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
            "x-enum-labels": {
                "fail": "Fail the run",
                "error_port": "Continue on the error port",
                "continue": "Continue",
            },
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
        version=action.version,
        output_schema=action.output_json_schema(),
    )


def spec_for_trigger(trig: Any, connector_name: str) -> NodeTypeSpec:
    """Build the :class:`NodeTypeSpec` (kind ``trigger``, no input) of an SDK trigger.

    A polling trigger's config gains the product's two settings
    (:mod:`backend.services.events.subscriptions`): ``poll_interval`` (seconds, at least
    the trigger's ``min_interval``) and ``include_existing``."""
    schema = trig.config_json_schema()
    if getattr(trig, "kind", None) == "polling":
        props = dict(schema.get("properties", {}))
        props.setdefault(
            POLL_INTERVAL,
            {
                "type": "number",
                "minimum": trig.min_interval,
                "default": trig.interval,
                "title": "Poll every (seconds)",
                "description": f"At least {trig.min_interval:g} s.",
            },
        )
        props.setdefault(
            INCLUDE_EXISTING,
            {
                "type": "boolean",
                "default": False,
                "title": "Include existing items",
                "description": "Start runs for the items already there when the workflow "
                "is published (otherwise only new ones, from now).",
            },
        )
        schema = {**schema, "properties": props}
    return NodeTypeSpec(
        type=trig.type,
        label=trig.label,
        kind="trigger",
        category=trig.category or connector_name,
        description=trig.description,
        icon=trig.icon,
        inputs=(),
        outputs=("out",),
        config_schema=schema,
        connector=connector_name,
        output_schema=trig.output_json_schema(),
    )


def _source(ep: Any) -> str:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return ""
    return f"{dist.name} {dist.version}"


def load_catalog(extra_connectors: list[Any] | None = None) -> AppCatalog:
    """Build the catalog from the built-in node types (the latest version of each, from
    :data:`backend.engine.nodes.NODE_TYPES`), entry-point plugins and ``extra_connectors``."""
    catalog = AppCatalog()
    found = sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name)
    for ep in found:
        try:
            catalog.add_connector(ep.load(), source=_source(ep))
        except Exception as exc:  # a broken plugin must not stop the app
            message = f"connector {ep.name} ({ep.value}) failed to load: {exc!r}"
            log.error(message)
            catalog.errors.append(message)
    for connector in extra_connectors or []:
        catalog.add_connector(connector, source="extra")
    return catalog
