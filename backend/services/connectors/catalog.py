"""The node-type catalog: the engine's control nodes plus every installed connector.

Connectors are discovered through the ``railyard.connectors`` entry-point group; each entry
point names a ``connectors.sdk.Connector``. The built-in connectors (entry points of the
``railyard`` distribution into ``connectors.builtin``) load first, then the plugins (by
distribution and entry-point name), so no plugin can take a built-in name.

Isolation, checked when a connector is added (:meth:`AppCatalog.add_connector`); a
connector that breaks a rule is refused whole (:class:`ConnectorRefused`, the message
naming both connectors and their distributions):

- its name is lower-case letters, digits and underscores, not a core prefix
  (``control``, ``trigger``, ...) and not the name of a connector loaded before;
- each node type's name starts with the connector's name and a dot, and belongs to
  nobody else (no replacing or shadowing a built-in or another plugin's type);
- each credential type it declares is new, and its node types ask only for the credential
  types it declares itself (so a plugin never receives the credentials users saved for
  another connector); the built-in connectors, one distribution, share theirs;
- each icon is a name of the Lucide set shipped with Railyard or one of the connector's
  own SVG icons, and every own icon is safe (:mod:`backend.services.connectors.icons`).

A plugin that fails to import, is malformed or is refused is recorded in
:attr:`AppCatalog.errors` (shown to admins on the catalog page and the dashboard, and
logged) and skipped: it never stops the app.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from backend.engine.nodes import NODE_TYPES, NodeRegistry
from backend.services.connectors import icons
from backend.services.connectors.discovery import connector_sources
from connectors.sdk.credentials import credential_types_of_schema
from designer_schema.catalog import NodeTypeSpec

log = logging.getLogger(__name__)

POLL_INTERVAL = "poll_interval"
"""Config key of a polling trigger's interval in seconds (the product's, not the connector's;
the event service's poller honours it)."""

INCLUDE_EXISTING = "include_existing"
"""Config key: True starts runs for the items already there at the first poll."""

CONNECTOR_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
"""A connector's name: it prefixes its node types (``acme`` -> ``acme.new_order``)."""

RESERVED_NAMES = frozenset({"core", "ui", "test"})
"""Prefixes of Railyard's own node types besides those of the engine's registry
(``control``, ``trigger``): no connector may take them."""

DEFAULT_ICON = "puzzle"
"""The icon of a connector (and of its node types) that names none."""

CORE_OWNER = "Railyard's core node types"


class ConnectorRefused(ValueError):
    """A connector breaks an isolation or icon rule; the message names the connector, its
    distribution, and the connector that owns what it asked for."""


@dataclass
class ConnectorInfo:
    """A loaded connector: name, label, version, the node types and credential types it
    provides, and where it came from (``source``: the distribution name and version, or
    ``"built-in"`` / ``"extra"``; ``builtin``: shipped with Railyard). ``icon`` is the
    resolved icon (a Lucide name or ``"<connector>/<icon>"``, see :meth:`AppCatalog.icon_svg`)."""

    name: str
    label: str
    version: str
    node_types: list[str]
    description: str = ""
    icon: str = ""
    docs_url: str = ""
    credential_types: list[str] = field(default_factory=list)
    source: str = ""
    builtin: bool = False

    def who(self) -> str:
        """``connector acme (railyard-acme 1.0)``, or ``the built-in connector http (...)``."""
        return describe_connector(self.name, self.source, builtin=self.builtin)


def describe_connector(name: str, source: str, *, builtin: bool = False) -> str:
    """How messages name a connector: ``connector acme (railyard-acme 1.0)``."""
    kind = "the built-in connector" if builtin else "connector"
    return f"{kind} {name} ({source or 'no distribution'})"


@dataclass
class AppCatalog:
    """Implements ``designer_schema.catalog.Catalog`` and the engine's ``ConnectorRegistry``.

    Built-in node types come from ``nodes`` (the engine's registry, read live: the latest
    version of each type); ``specs`` holds the connectors' node types (the latest version
    of each), ``actions`` every version of every action by ``(type, version)``;
    ``icons`` the sanitised SVG of every plugin icon by ``(connector, icon name)``.
    """

    specs: dict[str, NodeTypeSpec] = field(default_factory=dict)
    actions: dict[tuple[str, int], Any] = field(default_factory=dict)
    connectors: list[ConnectorInfo] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    credential_types: dict[str, Any] = field(default_factory=dict)
    triggers: dict[str, Any] = field(default_factory=dict)
    nodes: NodeRegistry = field(default_factory=lambda: NODE_TYPES)
    icons: dict[tuple[str, str], bytes] = field(default_factory=dict)
    credential_owners: dict[str, str] = field(default_factory=dict)
    refreshers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    async def refresh(self) -> None:
        """Bring in connectors stored since this catalog was built (imported OpenAPI
        connectors: :mod:`backend.services.connectors.openapi_catalog`)."""
        for refresh in self.refreshers:
            await refresh()

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

    def connector(self, name: str) -> ConnectorInfo | None:
        """The loaded connector called ``name`` or ``None``."""
        return next((c for c in self.connectors if c.name == name), None)

    def icon_svg(self, connector: str, name: str) -> bytes | None:
        """The sanitised SVG of the plugin icon ``name`` of ``connector``, or ``None``."""
        return self.icons.get((connector, name))

    def core_icon_errors(self) -> list[str]:
        """One message per core node type whose icon is not a shipped Lucide icon."""
        known = icons.lucide_names()
        return [
            f"core node type {spec.type}: unknown icon {spec.icon!r} (not a Lucide icon "
            "shipped with Railyard)"
            for spec in self.nodes.latest_specs()
            if spec.icon not in known
        ]

    def _type_owner(self, node_type: str) -> str | None:
        if self.nodes.get(node_type) is not None:
            return CORE_OWNER
        spec = self.specs.get(node_type)
        if spec is None:
            return None
        info = self.connector(spec.connector)
        return info.who() if info is not None else f"connector {spec.connector}"

    def reserved_names(self) -> frozenset[str]:
        """Prefixes no connector may take: the core node types' and :data:`RESERVED_NAMES`."""
        core = {spec.type.split(".")[0] for spec in self.nodes.latest_specs()}
        return RESERVED_NAMES | core

    def add_connector(self, connector: Any, source: str = "", *, builtin: bool = False) -> None:
        """Register the actions, triggers, credential types and icons of an SDK
        ``Connector`` that ``source`` (``"<distribution> <version>"``) provides.

        Raises :class:`ConnectorRefused` (the catalog left unchanged) when the connector
        breaks a rule of the module docstring: a bad or taken name, a node type outside
        its name or already provided, a credential type already declared or one of
        another connector's asked for, an unknown icon name or an unsafe or unreadable
        icon file. Raises ``TypeError`` when ``connector`` is not a Connector.
        """
        if not all(hasattr(connector, a) for a in ("name", "label", "version", "actions")):
            raise TypeError(f"{connector!r} is not a connectors.sdk.Connector")
        name = connector.name
        who = describe_connector(str(name), source, builtin=builtin)
        actions = list(connector.actions)
        triggers = list(getattr(connector, "triggers", ()))
        credential_types = list(getattr(connector, "credential_types", ()))
        self._check_name(name, who)
        self._check_node_types(name, who, [*actions, *triggers])
        self._check_credentials(name, who, credential_types, [*actions, *triggers], builtin)
        own_icons = _own_icons(connector, who)
        group_icon = _resolve_icon(
            getattr(connector, "icon", ""), name, own_icons, DEFAULT_ICON, f"{who}: its icon"
        )
        node_icons = {
            d.type: _resolve_icon(d.icon, name, own_icons, group_icon, f"{who}: {d.type}")
            for d in [*actions, *triggers]
        }
        names = []
        for action in sorted(actions, key=lambda a: a.version):  # the latest spec wins
            self.specs[action.type] = spec_for_action(action, name, icon=node_icons[action.type])
            self.actions[(action.type, action.version)] = action
            if action.type not in names:
                names.append(action.type)
        for trig in triggers:
            self.specs[trig.type] = spec_for_trigger(trig, name, icon=node_icons[trig.type])
            self.triggers[trig.type] = trig
            names.append(trig.type)
        for ctype in credential_types:
            self.credential_types[ctype.name] = ctype
            self.credential_owners[ctype.name] = name
        for icon_name, svg in own_icons.items():
            self.icons[(name, icon_name)] = svg
        self.connectors.append(
            ConnectorInfo(
                name,
                connector.label,
                connector.version,
                names,
                description=getattr(connector, "description", ""),
                icon=group_icon,
                docs_url=getattr(connector, "docs_url", ""),
                credential_types=[c.name for c in credential_types],
                source=source,
                builtin=builtin,
            )
        )

    def _check_name(self, name: Any, who: str) -> None:
        if not isinstance(name, str) or not CONNECTOR_NAME.match(name):
            raise ConnectorRefused(
                f"{who}: a connector's name must be 1 to 40 lower-case letters, digits or "
                "underscores, starting with a letter (it prefixes the connector's node types)"
            )
        if name in self.reserved_names():
            raise ConnectorRefused(f"{who}: the name {name} belongs to {CORE_OWNER}")
        other = self.connector(name)
        if other is not None:
            raise ConnectorRefused(f"{who}: the name {name} is taken by {other.who()}")

    def _check_node_types(self, name: str, who: str, definitions: Iterable[Any]) -> None:
        for node_type in sorted({d.type for d in definitions}):
            owner = self._type_owner(node_type)
            if owner is not None:
                raise ConnectorRefused(f"{who} declares {node_type}, which belongs to {owner}")
            prefix, dot, rest = node_type.partition(".")
            if prefix == name and dot and rest:
                continue
            other = self.connector(prefix) if dot else None
            whose = f", the prefix of {other.who()}" if other is not None else ""
            if prefix in self.reserved_names():
                whose = f", the prefix of {CORE_OWNER}"
            raise ConnectorRefused(
                f"{who} declares {node_type}{whose}: a connector's node types must be named "
                f"{name}.<name>"
            )

    def _check_credentials(
        self, name: str, who: str, declared: list[Any], definitions: Iterable[Any], builtin: bool
    ) -> None:
        own = {c.name for c in declared}
        if builtin:  # built-in connectors share theirs (rss reads feeds with http's basic)
            own |= {
                ctype
                for ctype, owner in self.credential_owners.items()
                if (info := self.connector(owner)) is not None and info.builtin
            }
        for ctype in declared:
            owner = self.credential_owners.get(ctype.name)
            if owner is not None:
                raise ConnectorRefused(
                    f"{who} declares credential type {ctype.name}, which belongs to "
                    f"{self._who(owner)}"
                )
        for definition in definitions:
            schema = definition.config_json_schema()
            for config_field, accepted in credential_types_of_schema(schema).items():
                for ctype_name in accepted:
                    if ctype_name in own:
                        continue
                    owner = self.credential_owners.get(ctype_name)
                    where = f"{definition.type} (config field {config_field})"
                    if owner is None and builtin:
                        continue  # declared by a built-in connector loaded later
                    if owner is None:
                        raise ConnectorRefused(
                            f"{who}: {where} asks for credential type {ctype_name}, which "
                            f"{name} does not declare"
                        )
                    raise ConnectorRefused(
                        f"{who}: {where} asks for credential type {ctype_name}, which belongs "
                        f"to {self._who(owner)}; a connector's node types may only use the "
                        "credential types it declares"
                    )

    def _who(self, connector_name: str) -> str:
        info = self.connector(connector_name)
        return info.who() if info is not None else f"connector {connector_name}"


def _own_icons(connector: Any, who: str) -> dict[str, bytes]:
    """The connector's own icons, read and sanitised (``{name: svg}``)."""
    declared = dict(getattr(connector, "icons", None) or {})
    found: dict[str, bytes] = {}
    for icon_name, path in sorted(declared.items()):
        try:
            data = connector.read_icon(icon_name)
        except (OSError, ImportError, KeyError, TypeError, ValueError) as exc:
            package = getattr(connector, "package", "")
            raise ConnectorRefused(
                f"{who}: icon {icon_name}: cannot read {path} from package {package}: {exc}"
            ) from None
        try:
            found[icon_name] = icons.sanitize_svg(data)
        except icons.UnsafeIcon as exc:
            raise ConnectorRefused(f"{who}: icon {icon_name} ({path}) is refused: {exc}") from None
    return found


def _resolve_icon(
    declared: Any, connector: str, own: dict[str, bytes], default: str, what: str
) -> str:
    """What the designer draws for a declared icon name: the connector's own icon
    (``"<connector>/<name>"``) or a Lucide name; ``default`` for none.

    Raises :class:`ConnectorRefused` for any other name."""
    if not declared:
        return default
    if isinstance(declared, str):
        if declared in own:
            return f"{connector}/{declared}"
        if declared in icons.lucide_names():
            return declared
    own_names = ", ".join(sorted(own)) or "none"
    raise ConnectorRefused(
        f"{what}: unknown icon {declared!r}: an icon is a Lucide icon shipped with Railyard "
        f"(frontend/static/vendor/lucide/icons) or one of the connector's own icons "
        f"({own_names})"
    )


def spec_for_action(action: Any, connector_name: str, *, icon: str | None = None) -> NodeTypeSpec:
    """Build the designer's :class:`NodeTypeSpec` from an SDK ``ActionDefinition``
    (``icon``: the resolved icon; ``None`` keeps the declared one)."""
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
        icon=action.icon if icon is None else icon,
        outputs=tuple(action.outputs),
        config_schema=schema,
        expression_fields=tuple(action.expression_fields),
        connector=connector_name,
        version=action.version,
        output_schema=action.output_json_schema(),
    )


def spec_for_trigger(trig: Any, connector_name: str, *, icon: str | None = None) -> NodeTypeSpec:
    """Build the :class:`NodeTypeSpec` (kind ``trigger``, no input) of an SDK trigger
    (``icon`` as for :func:`spec_for_action`).

    A polling trigger's config gains the product's two settings, :data:`POLL_INTERVAL`
    (seconds, at least the trigger's ``min_interval``) and :data:`INCLUDE_EXISTING`, which
    the event service reads (:mod:`backend.services.triggers.events.subscriptions`)."""
    schema = trig.config_json_schema()
    if getattr(trig, "kind", None) == "polling":
        props = dict(schema.get("properties", {}))
        props.setdefault(
            POLL_INTERVAL,
            {
                "type": "number",
                "minimum": trig.min_interval,
                "default": trig.interval,
                "x-duration": True,
                "title": "Poll every",
                "description": f"At least {trig.min_interval:g} s (e.g. 30s, 5m, 1h).",
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
        icon=trig.icon if icon is None else icon,
        inputs=(),
        outputs=("out",),
        config_schema=schema,
        connector=connector_name,
        output_schema=trig.output_json_schema(),
    )


def load_catalog(extra_connectors: list[Any] | None = None, *, plugins: bool = True) -> AppCatalog:
    """Build the catalog from the built-in node types (the latest version of each, from
    :data:`backend.engine.nodes.NODE_TYPES`), the built-in connectors, the entry-point
    plugins (``plugins=False`` leaves them out) and ``extra_connectors`` (whose errors
    are raised, not recorded).

    A connector that fails to import or is refused is logged and listed in
    :attr:`AppCatalog.errors`, and the rest still loads."""
    catalog = AppCatalog()
    for message in catalog.core_icon_errors():
        log.error(message)
        catalog.errors.append(message)
    for described in connector_sources():
        ep, builtin = described.entry_point, described.builtin
        if not (builtin or plugins):
            continue
        try:
            catalog.add_connector(ep.load(), source=described.source, builtin=builtin)
        except ConnectorRefused as exc:
            message = str(exc)
        except Exception as exc:  # a broken plugin must not stop the app
            message = f"connector {ep.name} ({ep.value}) failed to load: {exc!r}"
        else:
            continue
        log.error(message)
        catalog.errors.append(message)
    for connector in extra_connectors or []:
        catalog.add_connector(connector, source="extra")
    return catalog
