"""The diagrams the benchmark scripts publish compile without errors.

A benchmark that cannot publish its workflow only fails when someone runs it, often long
after the change that broke it (a node's output schema or the typed data flow moving on).
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from backend.engine.expression_paths import JsonataReader
from backend.engine.expressions import JsonataChecker
from backend.services.connectors.catalog import load_catalog
from bench import api_loop, designer, engine, limits, scale, steps, webhook_answer, webhooks
from bench.peers import railyard_peer
from designer_schema import Diagram, compile_diagram

CATALOG = load_catalog()

DIAGRAMS: dict[str, Any] = {
    "webhooks.pipeline": webhooks.pipeline(),
    "webhooks.schedule_diagram": webhooks.schedule_diagram(),
    "webhook_answer.three_steps": webhook_answer.three_steps(),
    "limits.chain": limits.chain(50),
    "engine.chain": engine.chain(3, "http://127.0.0.1:9/"),
    "scale.action3": engine.chain(scale.ACTION_STEPS, "http://127.0.0.1:9/", "trigger.webhook"),
    "designer.big_diagram": designer.big_diagram(),
    "peers.three_steps": railyard_peer.three_steps(),
    "steps.templates": steps.templates(),
    "api_loop.heavy_diagram": api_loop.heavy_diagram(),
}


@pytest.mark.parametrize("name", sorted(DIAGRAMS))
def test_bench_diagram_compiles(name: str) -> None:
    doc = DIAGRAMS[name]
    diagram = doc if isinstance(doc, Diagram) else msgspec.convert(doc, Diagram)
    graph, diagnostics = compile_diagram(diagram, CATALOG, JsonataChecker(), JsonataReader())
    errors = [d for d in diagnostics if d.severity == "error"]
    assert graph is not None and not errors, errors
