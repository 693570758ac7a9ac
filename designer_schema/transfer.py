"""The workflow export format (``railyard/workflow``, format version 1): one JSON document
holding a workflow's name, description, run settings and diagram, with every credential and
called workflow named instead of pointed at.

Pure (msgspec and stdlib only). An installation's ids mean nothing in another one, and a
credential's secret never leaves the installation, so the exporter takes each reference out
of the node config and lists it next to the diagram::

    {"format": "railyard/workflow", "format_version": 1,
     "exported_at": "2026-12-01T10:00:00+00:00",
     "source": {"base_url": "https://railyard.example.com", "workflow_id": "...", "version": 3},
     "workflow": {"name": "Orders", "description": "", "settings": {"run_timeout_seconds": 600}},
     "diagram": {"nodes": [...], "edges": [...], "viewport": {...}, "schema_version": 1},
     "credentials": [{"node": "slack_1", "field": "credential", "name": "Slack prod",
                      "type": "slack.bot_token", "id": "..."}],
     "workflows": [{"node": "sub_1", "field": "workflow_id", "name": "Billing", "id": "..."}]}

The config fields listed in ``credentials`` and ``workflows`` are absent from ``diagram``;
the importer binds each reference again (by ``id`` when it names the same object in the
importing installation, else by name) or reports it. A workflow reference with ``node``
``null`` is a workflow setting (``field`` ``settings.error_workflow_id``). The ids are hints
only: an importer never binds an id it was not allowed to use.
"""

from __future__ import annotations

from typing import Any

import msgspec

from designer_schema.diagram import DIAGRAM_SCHEMA_VERSION, Diagram, Node
from designer_schema.errors import SchemaDecodeError

EXPORT_FORMAT = "railyard/workflow"
EXPORT_FORMAT_VERSION = 1
"""The format version this module writes and the highest it reads."""

SETTINGS_WORKFLOW_FIELD = "settings.error_workflow_id"
"""``field`` of the workflow reference held by the workflow's settings (``node`` null)."""


class CredentialRef(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A credential a node config field used: its ``name`` and ``type`` (the credential
    type, e.g. ``smtp``) in the exporting installation; ``id`` there, as a hint; ``name`` is
    ``None`` when the credential no longer existed at export."""

    node: str
    field: str
    type: str
    name: str | None = None
    id: str | None = None


class WorkflowRef(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A workflow called by a Sub-workflow or For-each node (``node``, ``field``) or named
    by a setting (``node`` null, ``field`` :data:`SETTINGS_WORKFLOW_FIELD`)."""

    field: str
    node: str | None = None
    name: str | None = None
    id: str | None = None


class ExportSource(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Where the document came from: the installation's URL, the workflow id there and the
    version exported (``None``: the draft)."""

    base_url: str = ""
    workflow_id: str | None = None
    version: int | None = None


class ExportedWorkflow(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Name, description and run-control settings (without the error workflow, which is a
    :class:`WorkflowRef`)."""

    name: str
    description: str = ""
    settings: dict[str, Any] = msgspec.field(default_factory=dict)


class WorkflowExport(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The whole export document (see the module docstring)."""

    format: str
    format_version: int
    workflow: ExportedWorkflow
    diagram: Diagram
    credentials: list[CredentialRef] = msgspec.field(default_factory=list)
    workflows: list[WorkflowRef] = msgspec.field(default_factory=list)
    exported_at: str | None = None
    source: ExportSource | None = None


class TransferError(SchemaDecodeError):
    """An import document that cannot be read: ``message`` says why, ``path`` where
    (``$.credentials[2].node``)."""


def decode_export(data: bytes | str | dict[str, Any]) -> WorkflowExport:
    """Read an export document (JSON text, bytes, or an already parsed object).

    Checks, in order: JSON syntax and shape (unknown fields are refused), ``format``,
    ``format_version`` (at most :data:`EXPORT_FORMAT_VERSION`), the diagram's
    ``schema_version``, and that every reference names a node of the diagram and a
    (node, field) slot only once. Raises :class:`TransferError`.
    """
    try:
        if isinstance(data, dict):
            doc = msgspec.convert(data, WorkflowExport)
        else:
            doc = msgspec.json.decode(data, type=WorkflowExport)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise TransferError.from_msgspec(exc) from exc
    check_export(doc)
    return doc


def check_export(doc: WorkflowExport) -> None:
    """The checks of :func:`decode_export` past the JSON shape, for a document decoded
    elsewhere (e.g. by the web framework). Raises :class:`TransferError`."""
    if doc.format != EXPORT_FORMAT:
        raise TransferError(
            f"not a Railyard workflow export: format is {doc.format!r}, expected {EXPORT_FORMAT!r}",
            "$.format",
        )
    if not 1 <= doc.format_version <= EXPORT_FORMAT_VERSION:
        raise TransferError(
            f"unsupported format_version {doc.format_version}: this Railyard reads "
            f"versions 1 to {EXPORT_FORMAT_VERSION}",
            "$.format_version",
        )
    if doc.diagram.schema_version != DIAGRAM_SCHEMA_VERSION:
        raise TransferError(
            f"unsupported diagram schema_version {doc.diagram.schema_version}, "
            f"expected {DIAGRAM_SCHEMA_VERSION}",
            "$.diagram.schema_version",
        )
    node_ids = {n.id for n in doc.diagram.nodes}
    slots: set[tuple[str | None, str]] = set()
    refs: list[tuple[str, str | None, str]] = [
        ("credentials", r.node, r.field) for r in doc.credentials
    ] + [("workflows", r.node, r.field) for r in doc.workflows]
    index = {"credentials": 0, "workflows": 0}
    for kind, node, field in refs:
        where = f"$.{kind}[{index[kind]}]"
        index[kind] += 1
        if node is None and (kind == "credentials" or field != SETTINGS_WORKFLOW_FIELD):
            raise TransferError(
                f"a reference without a node must be the setting {SETTINGS_WORKFLOW_FIELD}",
                f"{where}.node",
            )
        if node is not None and node not in node_ids:
            raise TransferError(f"no node {node!r} in the diagram", f"{where}.node")
        if (node, field) in slots:
            raise TransferError(f"{node or 'settings'}.{field} is referenced twice", where)
        slots.add((node, field))


def encode_export(doc: WorkflowExport) -> bytes:
    """The document as indented JSON (2 spaces), for files people may read and diff."""
    return msgspec.json.format(msgspec.json.encode(doc), indent=2)


def without_fields(diagram: Diagram, slots: set[tuple[str, str]]) -> Diagram:
    """``diagram`` with the config fields ``(node id, field)`` of ``slots`` removed."""
    return _rewrite(diagram, {slot: None for slot in slots})


def with_fields(diagram: Diagram, values: dict[tuple[str, str], Any]) -> Diagram:
    """``diagram`` with reference fields bound (``{(node id, field): value}``): a value sets
    the field and takes it out of the node's ``unbound``; ``None`` removes the field and
    names it in the node's ``unbound``, so that compiling reports it
    (``unbound_reference``) until the field holds a value."""
    return _rewrite(diagram, values, mark=True)


def _rewrite(
    diagram: Diagram, values: dict[tuple[str, str], Any], *, mark: bool = False
) -> Diagram:
    by_node: dict[str, dict[str, Any]] = {}
    for (node_id, field), value in values.items():
        by_node.setdefault(node_id, {})[field] = value
    nodes: list[Node] = []
    for node in diagram.nodes:
        changes = by_node.get(node.id)
        if not changes:
            nodes.append(node)
            continue
        config = {k: v for k, v in node.config.items() if k not in changes}
        config.update({k: v for k, v in changes.items() if v is not None})
        if not mark:
            nodes.append(msgspec.structs.replace(node, config=config))
            continue
        unbound = [f for f in node.unbound or () if f not in changes]
        unbound += sorted(f for f, v in changes.items() if v is None)
        nodes.append(
            msgspec.structs.replace(
                node, config=config, unbound=unbound if unbound else msgspec.UNSET
            )
        )
    return msgspec.structs.replace(diagram, nodes=nodes)
