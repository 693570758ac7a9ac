"""The application catalog: built-in node types from the engine's registry (read live),
connector actions by type and version."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from backend.engine.nodes import BUILTIN_NODES, NodeRegistry
from backend.services.connectors.catalog import AppCatalog
from connectors import sdk
from tests.fakes.node_versions import SET_V2, registered


class Cfg(msgspec.Struct):
    text: str = ""


@sdk.action("demo.echo", label="Echo", config=Cfg)
async def echo_v1(config: Cfg, input: Any) -> Any:
    return config.text


@sdk.action("demo.echo", label="Echo", config=Cfg, version=2)
async def echo_v2(config: Cfg, input: Any) -> Any:
    return {"text": config.text}


def test_connector_actions_are_kept_per_version_and_the_latest_spec_is_shown() -> None:
    catalog = AppCatalog(nodes=NodeRegistry(BUILTIN_NODES))
    catalog.add_connector(sdk.Connector("demo", "Demo", "1.0", actions=[echo_v2, echo_v1]))
    spec = catalog.get("demo.echo")
    assert spec is not None and spec.version == 2
    assert catalog.action("demo.echo", 1) is echo_v1
    assert catalog.action("demo.echo", 2) is echo_v2
    assert catalog.action("demo.echo", 3) is None
    assert catalog.connectors[0].node_types == ["demo.echo"]
    assert [s.type for s in catalog.all()][-1] == "demo.echo"


def test_builtin_node_types_follow_the_registry_and_cannot_be_shadowed() -> None:
    nodes = NodeRegistry(BUILTIN_NODES)
    catalog = AppCatalog(nodes=nodes)
    first = catalog.get("control.set")
    assert first is not None and first.version == 1
    with registered(nodes, SET_V2):
        latest = catalog.get("control.set")
        assert latest is not None and latest.version == 2
        assert sum(s.type == "control.set" for s in catalog.all()) == 1

    @sdk.action("control.set", label="Shadow", config=Cfg)
    async def shadow(config: Cfg, input: Any) -> Any:
        return None

    with pytest.raises(ValueError, match=r"declares control\.set, which belongs to Railyard's"):
        catalog.add_connector(sdk.Connector("shadow", "Shadow", "1", actions=[shadow]))
