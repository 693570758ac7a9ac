"""Node types are registered by type and version; a compiled graph pins the version.

A new version of a built-in node with changed behaviour changes only graphs compiled
after it was registered; graphs published before keep running the old behaviour.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import msgspec
import pytest

from backend.engine.nodes import BUILTIN_NODES, control_join, control_set
from backend.engine.nodes.base import NodeType, TimerBehaviour
from backend.engine.nodes.control_set import Set
from backend.engine.nodes.registry import NodeRegistry
from backend.engine.states import RunStatus
from designer_schema.catalog import StaticCatalog
from designer_schema.graph import (
    GRAPH_SCHEMA_VERSION,
    JoinSpec,
    WorkflowGraph,
    canonical_hash,
    graph_from_json,
    graph_to_json,
)
from tests.diagrams import diagram, edge, node
from tests.fakes.node_versions import SET_V2
from tests.unit.engine.driver import ACTION, compile_dict, run_graph

ROOT = Path(__file__).resolve().parents[3]


def _set_workflow() -> dict[str, Any]:
    return diagram(
        [
            node("start", "trigger.manual"),
            node("set", "control.set", mapping={"total": "=qty * 2"}),
        ],
        [edge("start", "set")],
    )


def _catalog(nodes: NodeRegistry) -> StaticCatalog:
    return StaticCatalog([*nodes.latest_specs(), ACTION])


def test_new_version_of_a_builtin_node_changes_only_graphs_compiled_after_it() -> None:
    nodes = NodeRegistry(BUILTIN_NODES)
    published_before = compile_dict(_set_workflow(), _catalog(nodes))
    assert published_before.step("set").type_version == 1

    nodes.register(SET_V2)
    published_after = compile_dict(_set_workflow(), _catalog(nodes))
    assert published_after.step("set").type_version == 2
    assert published_after.content_hash != published_before.content_hash

    run_input = {"qty": 3, "name": "widget"}
    # the version published before, as stored (JSON) and loaded again by a worker
    stored = graph_from_json(graph_to_json(published_before), verify_hash=True)
    old, _ = run_graph(stored, run_input, nodes=nodes)
    new, _ = run_graph(published_after, run_input, nodes=nodes)

    assert old.status == RunStatus.SUCCEEDED
    assert old.output == {"total": 6}  # version 1: only the mapped fields
    assert new.status == RunStatus.SUCCEEDED
    assert new.output == {"qty": 3, "name": "widget", "total": 6}  # version 2 keeps input


def test_catalog_hands_out_the_latest_version_and_keeps_the_old_one_runnable() -> None:
    nodes = NodeRegistry(BUILTIN_NODES)
    nodes.register(SET_V2)
    assert nodes.versions("control.set") == [1, 2]
    latest = nodes.get("control.set")
    assert latest is not None and latest.spec.version == 2
    # every version is built in (trigger.webhook has two); the palette lists each type once
    palette = list(dict.fromkeys(n.spec.type for n in BUILTIN_NODES))
    assert [s.type for s in nodes.latest_specs()] == palette
    first = nodes.get("control.set", 1)
    assert first is not None and first.behaviour is control_set.NODE.behaviour

    nodes.unregister("control.set", 2)
    again = nodes.get("control.set")
    assert again is not None and again.spec.version == 1


def test_graph_stored_before_versions_existed_loads_every_step_as_version_1() -> None:
    graph = compile_dict(_set_workflow())
    raw = msgspec.json.decode(graph_to_json(graph))
    for step in raw["steps"]:
        del step["type_version"]
    raw["schema_version"] = 1
    loaded = graph_from_json(msgspec.json.encode(raw))
    assert [s.type_version for s in loaded.steps] == [1, 1]
    state, _ = run_graph(loaded, {"qty": 1})
    assert state.output == {"total": 2}


def test_step_pinning_a_version_that_is_not_installed_fails_with_unknown_node_type() -> None:
    graph = compile_dict(_set_workflow())
    pinned = msgspec.structs.replace(graph.step("set"), type_version=7)
    graph = msgspec.structs.replace(graph, steps=[graph.step("start"), pinned])
    state, _ = run_graph(graph, {"qty": 1})
    assert state.status == RunStatus.FAILED
    assert state.error is not None
    assert state.error["kind"] == "unknown_node_type"
    assert "control.set version 7 is not installed" in state.error["message"]


def test_registry_refuses_a_second_registration_and_a_behaviour_of_the_wrong_kind() -> None:
    nodes = NodeRegistry(BUILTIN_NODES)
    with pytest.raises(ValueError, match="already registered"):
        nodes.register(control_set.NODE)
    timer_if = NodeType(
        msgspec.structs.replace(control_set.SPEC, kind="action", version=3), TimerBehaviour()
    )
    with pytest.raises(ValueError, match="cannot have a timer behaviour"):
        nodes.register(timer_if)
    with pytest.raises(ValueError, match="version must be >= 1"):
        nodes.register(NodeType(msgspec.structs.replace(control_set.SPEC, version=0), Set()))


def _join_workflow(**join_config: Any) -> dict[str, Any]:
    return diagram(
        [
            node("start", "trigger.manual"),
            node("a", "test.action"),
            node("b", "test.action"),
            node("join", "control.join", **join_config),
        ],
        [edge("start", "a"), edge("start", "b"), edge("a", "join"), edge("b", "join")],
    )


def test_join_mode_and_count_are_compiled_into_the_graph_not_read_at_run_time() -> None:
    assert control_join.SPEC.config_join
    graph = compile_dict(_join_workflow(mode="first"))
    assert graph.step("join").join == JoinSpec(mode="first", count=1)
    assert compile_dict(_join_workflow(mode="n_of_m", count=2)).step("join").join == JoinSpec(
        mode="n_of_m", count=2
    )
    assert compile_dict(_join_workflow()).step("join").join == JoinSpec(mode="all", count=1)

    # the engine follows the compiled join: editing the config of a compiled step (which
    # nothing does) changes nothing, so the join still fires at the first arrival
    step = graph.step("join")
    edited = msgspec.structs.replace(step, config={**step.config, "mode": "all"})
    graph = msgspec.structs.replace(
        graph, steps=[edited if s.id == "join" else s for s in graph.steps]
    )
    state, finished = run_graph(graph, {}, durations={"a": 1, "b": 5})
    assert finished.index("join") < finished.index("b")
    assert state.steps["join"].input == {"a": {"echo": {}}}


def test_engine_modules_never_branch_on_node_type_names() -> None:
    for path in ("backend/engine/orchestrator.py", "backend/engine/planner.py"):
        source = (ROOT / path).read_text()
        assert not re.search(r"[\"'](control|trigger)\.", source), path  # no type literals
        assert not re.search(r"\.type (==|!=|in|not in) ", source), path


def _migration() -> Any:
    path = ROOT / "backend/db/migrations/versions/0012_graph_v2.py"
    spec = importlib.util.spec_from_file_location("graph_v2_migration", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _as_schema_1(graph: WorkflowGraph) -> dict[str, Any]:
    """``graph`` as the code before graph schema 2 stored it: no pinned versions, a Join
    step's join left at the default (the engine read its config), the hash of that form."""
    raw: dict[str, Any] = msgspec.to_builtins(graph)
    for step in raw["steps"]:
        del step["type_version"]
        if step["type"] == "control.join":
            step["join"] = {"mode": "all", "count": 0}
    raw["schema_version"] = 1
    return raw


@pytest.mark.parametrize("join", [{"mode": "first"}, {"mode": "n_of_m", "count": 2}, {}])
def test_migration_0012_upgrades_stored_graphs_to_what_the_compiler_now_makes(
    join: dict[str, Any],
) -> None:
    compiled = compile_dict(_join_workflow(**join))
    assert compiled.schema_version == GRAPH_SCHEMA_VERSION == 2
    migration = _migration()
    upgraded = migration._upgrade(_as_schema_1(compiled))
    loaded = graph_from_json(msgspec.json.encode(upgraded), verify_hash=True)
    assert loaded == compiled
    assert upgraded["content_hash"] == canonical_hash(compiled) == compiled.content_hash

    downgraded = migration._downgrade(upgraded)
    assert downgraded["schema_version"] == 1
    assert all("type_version" not in s for s in downgraded["steps"])
