"""The part of the node catalog a page that only draws diagrams needs.

The run page and the version diff draw a workflow's diagram; their scripts read each
node's label, icon, ports and schema from the catalog embedded in the page. With the
OpenAPI-made connectors the whole catalog is over a megabyte of JSON (their config and
output schemas), so these pages embed only the node types their diagrams use (every
version of each). The designer, whose palette offers every type, still embeds all of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from backend.services.connectors.catalog import AppCatalog
from designer_schema.catalog import NodeTypeSpec
from designer_schema.diagram import Diagram

__all__ = ["catalog_for", "catalog_json_for"]


def _types(diagram: Diagram | Mapping[str, Any]) -> set[str]:
    """The node types of a diagram, decoded or as its stored JSON object."""
    if isinstance(diagram, Diagram):
        return {node.type for node in diagram.nodes}
    return {str(node.get("type")) for node in diagram.get("nodes") or ()}


def catalog_for(catalog: AppCatalog, *diagrams: Diagram | Mapping[str, Any]) -> list[NodeTypeSpec]:
    """The specs of the node types drawn in ``diagrams``, in the catalog's order."""
    used = set().union(*(_types(diagram) for diagram in diagrams))
    return [spec for spec in catalog.all() if spec.type in used]


def catalog_json_for(catalog: AppCatalog, *diagrams: Diagram | Mapping[str, Any]) -> str:
    """:func:`catalog_for` as the JSON text a template puts in ``data-catalog``."""
    return msgspec.json.encode(catalog_for(catalog, *diagrams)).decode()
