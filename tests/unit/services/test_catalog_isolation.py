"""Plugin isolation at catalog load: names, node types, credential types and icons.

Every refusal names the refused connector with its distribution and, where something
belongs to another connector, that connector with its distribution too.
"""

from __future__ import annotations

import re
from importlib.metadata import EntryPoint
from types import SimpleNamespace
from typing import Annotated, Any

import msgspec
import pytest

from backend.services.connectors import discovery
from backend.services.connectors.catalog import AppCatalog, ConnectorRefused, load_catalog
from connectors import sdk
from connectors.builtin import http, slack
from connectors.sdk.credentials import credential_types_of_schema

HTTP_OWNER = "the built-in connector http (railyard 0.1.0)"


class Empty(msgspec.Struct):
    pass


def _action(node_type: str, config: type[Any] = Empty, icon: str = "") -> sdk.ActionDefinition:
    async def fn(config: Any, input: Any) -> Any:
        return input

    return sdk.action(node_type, label=node_type, config=config, icon=icon)(fn)


def _plugin(name: str, *types: str, **kwargs: Any) -> sdk.Connector:
    return sdk.Connector(name, name.title(), "1.0", actions=[_action(t) for t in types], **kwargs)


def with_builtins() -> AppCatalog:
    catalog = AppCatalog()
    catalog.add_connector(http.connector, source="railyard 0.1.0", builtin=True)
    catalog.add_connector(slack.connector, source="railyard 0.1.0", builtin=True)
    return catalog


def refused(catalog: AppCatalog, connector: sdk.Connector, source: str) -> str:
    before = (dict(catalog.specs), dict(catalog.credential_types), len(catalog.connectors))
    with pytest.raises(ConnectorRefused) as info:
        catalog.add_connector(connector, source=source)
    after = (dict(catalog.specs), dict(catalog.credential_types), len(catalog.connectors))
    assert after == before  # nothing of a refused connector is kept
    return str(info.value)


def test_a_plugin_cannot_take_a_builtin_node_type() -> None:
    message = refused(with_builtins(), _plugin("evil", "http.request"), "railyard-evil 1.0")
    assert message == (
        f"connector evil (railyard-evil 1.0) declares http.request, which belongs to {HTTP_OWNER}"
    )


def test_a_plugin_cannot_take_a_builtin_name_or_another_plugins() -> None:
    catalog = with_builtins()
    message = refused(catalog, _plugin("http", "http.other"), "railyard-evil 1.0")
    assert message == f"connector http (railyard-evil 1.0): the name http is taken by {HTTP_OWNER}"
    catalog.add_connector(_plugin("acme", "acme.get"), source="railyard-acme 2.0")
    message = refused(catalog, _plugin("acme", "acme.put"), "acme-fork 0.1")
    assert "connector acme (acme-fork 0.1)" in message
    assert "taken by connector acme (railyard-acme 2.0)" in message


def test_a_plugin_cannot_replace_or_shadow_another_plugins_node_type() -> None:
    catalog = with_builtins()
    catalog.add_connector(_plugin("acme", "acme.get"), source="railyard-acme 2.0")
    message = refused(catalog, _plugin("evil", "acme.get"), "railyard-evil 1.0")
    assert message == (
        "connector evil (railyard-evil 1.0) declares acme.get, which belongs to "
        "connector acme (railyard-acme 2.0)"
    )
    message = refused(catalog, _plugin("evil", "acme.put"), "railyard-evil 1.0")
    assert message == (
        "connector evil (railyard-evil 1.0) declares acme.put, the prefix of connector acme "
        "(railyard-acme 2.0): a connector's node types must be named evil.<name>"
    )


def test_node_types_start_with_the_connector_name() -> None:
    catalog = AppCatalog()
    for bad in ("other.thing", "evilish.thing", "evil", "evil."):
        message = refused(catalog, _plugin("evil", bad), "railyard-evil 1.0")
        assert f"declares {bad}" in message and "must be named evil.<name>" in message
    catalog.add_connector(_plugin("evil", "evil.thing"), source="railyard-evil 1.0")


def test_core_prefixes_and_malformed_names_are_refused() -> None:
    catalog = AppCatalog()
    message = refused(catalog, _plugin("trigger", "trigger.app"), "railyard-t 1.0")
    assert message == (
        "connector trigger (railyard-t 1.0): the name trigger belongs to Railyard's core node types"
    )
    message = refused(catalog, _plugin("evil", "control.if"), "railyard-evil 1.0")
    assert "declares control.if, which belongs to Railyard's core node types" in message
    message = refused(catalog, _plugin("evil", "control.mine"), "railyard-evil 1.0")
    assert "the prefix of Railyard's core node types" in message
    for name in ("Evil", "my-crm", "9lives", ""):
        assert "a connector's name must be" in refused(catalog, _plugin(name), "x 1")


def test_a_plugin_cannot_redeclare_a_builtin_credential_type() -> None:
    bearer = sdk.credential_type("bearer", label="Bearer", kind="bearer", fields=sdk.BearerFields)
    message = refused(
        with_builtins(), _plugin("evil", credential_types=[bearer]), "railyard-evil 1.0"
    )
    assert message == (
        f"connector evil (railyard-evil 1.0) declares credential type bearer, which belongs "
        f"to {HTTP_OWNER}"
    )


class StealsSlack(msgspec.Struct):
    credential: Annotated[str, sdk.credential_meta("slack.bot_token")]


class UsesBearer(msgspec.Struct):
    credential: Annotated[str, sdk.credential_meta("evil.key", "bearer")]


class Undeclared(msgspec.Struct):
    credential: Annotated[str, sdk.credential_meta("evil.key")]


def test_a_plugins_node_types_may_only_ask_for_its_own_credential_types() -> None:
    catalog = with_builtins()
    evil = sdk.Connector("evil", "Evil", "1.0", actions=[_action("evil.post", StealsSlack)])
    message = refused(catalog, evil, "railyard-evil 1.0")
    assert message == (
        "connector evil (railyard-evil 1.0): evil.post (config field credential) asks for "
        "credential type slack.bot_token, which belongs to the built-in connector slack "
        "(railyard 0.1.0); a connector's node types may only use the credential types it "
        "declares"
    )
    key = sdk.credential_type("evil.key", label="Key", kind="api_key", fields=sdk.ApiKeyFields)
    mixed = sdk.Connector(
        "evil", "Evil", "1.0", actions=[_action("evil.post", UsesBearer)], credential_types=[key]
    )
    assert "credential type bearer, which belongs to the built-in connector http" in refused(
        catalog, mixed, "railyard-evil 1.0"
    )
    missing = sdk.Connector("evil", "Evil", "1.0", actions=[_action("evil.post", Undeclared)])
    assert refused(catalog, missing, "railyard-evil 1.0").endswith(
        "asks for credential type evil.key, which evil does not declare"
    )
    polling = sdk.polling_trigger("evil.poll", label="Poll", config=StealsSlack)(_poll)
    by_trigger = sdk.Connector("evil", "Evil", "1.0", triggers=[polling])
    assert "evil.poll (config field credential) asks for credential type slack.bot_token" in (
        refused(catalog, by_trigger, "railyard-evil 1.0")
    )
    own = sdk.Connector(
        "evil", "Evil", "1.0", actions=[_action("evil.post", Undeclared)], credential_types=[key]
    )
    catalog.add_connector(own, source="railyard-evil 1.0")
    assert catalog.credential_owners["evil.key"] == "evil"


async def _poll(config: Any, cursor: Any) -> sdk.PollResult:
    return sdk.PollResult()


def test_icons_are_lucide_names_or_the_connectors_own() -> None:
    catalog = AppCatalog()
    message = refused(
        catalog,
        sdk.Connector("acme", "Acme", "1", actions=[_action("acme.x", icon="sparkle-unicorn")]),
        "railyard-acme 1.0",
    )
    assert message.startswith(
        "connector acme (railyard-acme 1.0): acme.x: unknown icon 'sparkle-unicorn'"
    )
    assert "Lucide" in message
    message = refused(catalog, _plugin("acme", "acme.x", icon="nope"), "railyard-acme 1.0")
    assert "its icon: unknown icon 'nope'" in message

    catalog.add_connector(
        sdk.Connector(
            "acme",
            "Acme",
            "1",
            actions=[_action("acme.x", icon="globe"), _action("acme.y"), _action("acme.z")],
            icon="acme-logo",
            icons={"acme-logo": "icons/acme.svg"},
            package="tests.unit.services.plugin_icons",
        ),
        source="railyard-acme 1.0",
    )
    assert [catalog.specs[t].icon for t in ("acme.x", "acme.y")] == ["globe", "acme/acme-logo"]
    assert catalog.connectors[0].icon == "acme/acme-logo"
    svg = catalog.icon_svg("acme", "acme-logo")
    assert svg is not None and svg.startswith(b'<svg xmlns="http://www.w3.org/2000/svg"')
    assert catalog.icon_svg("acme", "other") is None
    plain = AppCatalog()
    plain.add_connector(_plugin("plain", "plain.x"), source="p 1")
    assert plain.specs["plain.x"].icon == plain.connectors[0].icon == "puzzle"


def test_an_unsafe_or_missing_plugin_icon_refuses_the_connector() -> None:
    catalog = AppCatalog()
    unsafe = _plugin(
        "acme",
        "acme.x",
        icons={"bad": "icons/unsafe.svg"},
        package="tests.unit.services.plugin_icons",
    )
    message = refused(catalog, unsafe, "railyard-acme 1.0")
    assert message == (
        "connector acme (railyard-acme 1.0): icon bad (icons/unsafe.svg) is refused: "
        "event handler attribute onload on <svg> is not allowed"
    )
    package = "tests.unit.services.plugin_icons"
    missing = _plugin("acme", "acme.x", icons={"gone": "icons/gone.svg"}, package=package)
    message = refused(catalog, missing, "railyard-acme 1.0")
    assert f"icon gone: cannot read icons/gone.svg from package {package}" in message


def test_icon_declarations_are_checked_by_the_sdk() -> None:
    with pytest.raises(ValueError, match="icon name 'Acme Logo'"):
        _plugin("acme", icons={"Acme Logo": "icons/a.svg"})
    for path in ("../a.svg", "/etc/a.svg", "icons/a.png", "icons//a.svg", "a\\b.svg"):
        with pytest.raises(ValueError, match=re.escape(repr(path))):
            _plugin("acme", icons={"a": path})
    # the package defaults to the one of the module creating the connector
    assert _plugin("acme", icons={"a": "a.svg"}).package == "tests.unit.services"


# ---------------------------------------------------------------- load order, entry points

evil_http = _plugin("aaa", "http.request")
"""A plugin whose distribution sorts before ``railyard``: it still loads after the built-ins."""


def _entry_point(name: str, value: str, dist: str, version: str) -> EntryPoint:
    ep = EntryPoint(name=name, value=value, group=discovery.ENTRY_POINT_GROUP)
    return ep._for(SimpleNamespace(name=dist, version=version))  # type: ignore[attr-defined]


class _CountedDistribution:
    """A distribution whose ``name`` and ``version`` count their reads (a real one parses
    its whole METADATA file on each)."""

    def __init__(self, name: str, version: str) -> None:
        self._name, self._version, self.reads = name, version, 0

    @property
    def name(self) -> str:
        self.reads += 1
        return self._name

    @property
    def version(self) -> str:
        self.reads += 1
        return self._version


def test_discovery_reads_each_distribution_once(monkeypatch: pytest.MonkeyPatch) -> None:
    builtin, plugin = _CountedDistribution("railyard", "1"), _CountedDistribution("acme", "2")
    values = ("connectors.builtin.http:connector", "connectors.builtin.slack:connector")
    found = [
        *(
            EntryPoint(name=f"b{i}", value=value, group=discovery.ENTRY_POINT_GROUP)._for(builtin)  # type: ignore[attr-defined]
            for i, value in enumerate(values)
        ),
        *(
            EntryPoint(
                name=f"p{i}", value=f"{__name__}:evil_http", group=discovery.ENTRY_POINT_GROUP
            )._for(plugin)  # type: ignore[attr-defined]
            for i in range(3)
        ),
    ]
    monkeypatch.setattr(discovery, "entry_points", lambda group: found)
    described = discovery.connector_sources()
    assert [(d.entry_point.name, d.source, d.builtin) for d in described] == [
        ("b0", "railyard 1", True),
        ("b1", "railyard 1", True),
        ("p0", "acme 2", False),
        ("p1", "acme 2", False),
        ("p2", "acme 2", False),
    ]
    assert (builtin.reads, plugin.reads) == (2, 2)  # name and version, once per distribution


def test_builtin_connectors_load_first_so_no_plugin_takes_their_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    found = [
        _entry_point("aaa", f"{__name__}:evil_http", "aaa-railyard-evil", "1.0"),
        _entry_point("http", "connectors.builtin.http:connector", "railyard", "0.1.0"),
        _entry_point("fake", "connectors.builtin.http:connector", "not-railyard", "9"),
    ]
    monkeypatch.setattr(discovery, "entry_points", lambda group: found)
    assert [ep.name for ep in discovery.connector_entry_points()] == ["http", "aaa", "fake"]
    assert [discovery.is_builtin(ep) for ep in found] == [False, True, False]
    catalog = load_catalog()
    assert [(c.name, c.builtin) for c in catalog.connectors] == [("http", True)]
    assert catalog.errors[0] == (
        f"connector aaa (aaa-railyard-evil 1.0) declares http.request, which belongs to "
        f"{HTTP_OWNER}"
    )
    # the same module under another distribution is a plugin: refused, naming both
    assert catalog.errors[1].startswith(
        f"connector http (not-railyard 9): the name http is taken by {HTTP_OWNER}"
    )
    assert load_catalog(plugins=False).errors == []


def test_every_builtin_node_type_has_a_shipped_icon_and_declared_credential_types() -> None:
    catalog = load_catalog(plugins=False)
    assert catalog.errors == []
    assert catalog.core_icon_errors() == []
    for spec in catalog.all():
        assert spec.icon, spec.type
        assert "/" not in spec.icon, spec.type  # built-ins use the Lucide set only
        for accepted in credential_types_of_schema(spec.config_schema).values():
            assert set(accepted) <= set(catalog.credential_types), spec.type


def test_builtin_connectors_share_their_credential_types() -> None:
    """Built-in connectors are one distribution: one may ask for another's credential
    types (RSS feeds behind http's basic auth), whatever the load order; a plugin may not."""

    class Basic(msgspec.Struct):
        credential: Annotated[str, sdk.credential_meta("basic")]

    feed = sdk.Connector("feed", "Feed", "1", actions=[_action("feed.read", Basic)])
    catalog = AppCatalog()
    catalog.add_connector(feed, source="railyard 0.1.0", builtin=True)  # before http
    catalog.add_connector(http.connector, source="railyard 0.1.0", builtin=True)
    later = sdk.Connector("feed2", "Feed", "1", actions=[_action("feed2.read", Basic)])
    catalog.add_connector(later, source="railyard 0.1.0", builtin=True)
    plugin = sdk.Connector("feed3", "Feed", "1", actions=[_action("feed3.read", Basic)])
    assert f"which belongs to {HTTP_OWNER}" in refused(catalog, plugin, "railyard-feed 1.0")
