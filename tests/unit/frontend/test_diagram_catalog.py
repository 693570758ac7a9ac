"""Pages that only draw a diagram embed the catalog entries of its node types, not the
whole catalog (frontend/diagram_catalog.py)."""

from __future__ import annotations

import msgspec

from backend.services.connectors.catalog import load_catalog
from designer_schema.diagram import Diagram
from frontend.diagram_catalog import catalog_for, catalog_json_for
from tests.diagrams import diagram, edge, node

CATALOG = load_catalog(plugins=False)
DRAWN = diagram(
    [node("hook", "trigger.webhook"), node("call", "http.request"), node("n", "control.set")],
    [edge("hook", "call"), edge("call", "n")],
)


def test_the_stored_and_the_decoded_diagram_give_the_same_types() -> None:
    decoded = msgspec.convert(DRAWN, Diagram)
    stored = catalog_for(CATALOG, DRAWN)
    assert {spec.type for spec in stored} == {"trigger.webhook", "http.request", "control.set"}
    assert catalog_for(CATALOG, decoded) == stored


def test_every_version_of_a_drawn_type_and_nothing_else() -> None:
    versions = [spec for spec in CATALOG.all() if spec.type == "trigger.webhook"]
    picked = catalog_for(CATALOG, DRAWN, diagram([node("x", "control.if")], []))
    assert [spec for spec in picked if spec.type == "trigger.webhook"] == versions
    assert {spec.type for spec in picked} == {
        "trigger.webhook",
        "http.request",
        "control.set",
        "control.if",
    }
    assert len(catalog_json_for(CATALOG, DRAWN)) * 10 < len(msgspec.json.encode(CATALOG.all()))
