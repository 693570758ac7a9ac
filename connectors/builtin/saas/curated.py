"""A curated connector: a pinned subset of a vendor's OpenAPI document, read by the
importer (:mod:`connectors.openapi`), its chosen operations relabelled by hand.

The subsets are validated against the OpenAPI schema by the test suite
(``tests/unit/openapi/test_curated.py``), not at every start: loading one is a JSON
parse, a reference check and the conversion (tens of milliseconds).
"""

from __future__ import annotations

import gzip
import importlib.resources
import json
from collections.abc import Mapping
from typing import Any

import msgspec

from connectors import sdk
from connectors.openapi.definition import ConnectorDefinition, OperationSpec
from connectors.openapi.importer import build_definition
from connectors.openapi.loading import check_references, parse_document
from connectors.openapi.runtime import connector_of


def document(file: str) -> dict[str, Any]:
    """The document ``documents/<file>`` of this package, parsed: a gzip-compressed JSON
    subset of a vendor's document, or a YAML document (read with the importer's safe
    loader)."""
    data = importlib.resources.files(__package__).joinpath("documents", file).read_bytes()
    if file.endswith(".gz"):
        result: dict[str, Any] = json.loads(gzip.decompress(data))
        return result
    return parse_document(data)


def curated_definition(
    name: str,
    label: str,
    doc: dict[str, Any],
    operations: Mapping[str, str],
    *,
    credential_labels: Mapping[str, str] | None = None,
    icon: str = "",
) -> ConnectorDefinition:
    """The definition of ``doc`` keeping ``operations`` (``{key: label}``, in that order).

    Raises ``ValueError`` naming an operation key the document does not give."""
    check_references(doc)
    full = build_definition(doc, name=name, label=label, icon=icon)
    found = {op.key: op for op in full.operations}
    missing = [key for key in operations if key not in found]
    if missing:
        raise ValueError(f"{name}: operations not in the pinned document: {missing}")
    labels = dict(credential_labels or {})
    return msgspec.structs.replace(
        full,
        operations=[_labelled(found[k], v) for k, v in operations.items()],
        refused=[],
        credentials=[
            msgspec.structs.replace(c, label=labels.get(c.scheme, c.label))
            for c in full.credentials
        ],
    )


def _labelled(op: OperationSpec, label: str) -> OperationSpec:
    """``op`` with the chosen label, and its output described (``The response of GET
    /path``) when the document says nothing about it."""
    output = op.output_schema
    if output and not output.get("description"):
        output = {**output, "description": f"The response of {op.method} {op.path}"}
    return msgspec.structs.replace(op, label=label, output_schema=output)


def curated_connector(definition: ConnectorDefinition, **extra: Any) -> sdk.Connector:
    """The SDK connector of a curated definition (every operation at version 1);
    ``extra`` (``docs_url``) goes to :class:`sdk.Connector`."""
    built = connector_of([(definition, {})], source_version="1")
    return sdk.Connector(
        name=built.name,
        label=built.label,
        version=built.version,
        description=built.description,
        actions=built.actions,
        credential_types=built.credential_types,
        icon=definition.icon,
        **extra,
    )


def curated(
    name: str,
    label: str,
    doc: dict[str, Any],
    operations: Mapping[str, str],
    *,
    credential_labels: Mapping[str, str],
    icon: str,
    docs_url: str,
) -> tuple[ConnectorDefinition, sdk.Connector]:
    """:func:`curated_definition` and :func:`curated_connector` in one call."""
    definition = curated_definition(
        name, label, doc, operations, credential_labels=credential_labels, icon=icon
    )
    return definition, curated_connector(definition, docs_url=docs_url)
