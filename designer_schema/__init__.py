"""Diagram schema and compiler: the designer's document and its executable form.

Pure: imports only msgspec and the standard library. Node types are known only through
the :class:`Catalog` protocol handed to :func:`compile_diagram`.
"""

from designer_schema.catalog import (
    Catalog,
    ExpressionChecker,
    NodeKind,
    NodeTypeSpec,
    StaticCatalog,
)
from designer_schema.compiler import (
    DIAGNOSTIC_CODES,
    ESCAPED_MARKER,
    EXPRESSION_MARKER,
    RESERVED_CONFIG_KEYS,
    compile_diagram,
)
from designer_schema.diagnostics import Diagnostic, Severity
from designer_schema.diagram import (
    DIAGRAM_SCHEMA_VERSION,
    NOTE_TYPE,
    Diagram,
    DiagramDecodeError,
    Edge,
    Node,
    Position,
    Viewport,
    diagram_from_json,
    diagram_json_schema,
    diagram_to_json,
)
from designer_schema.errors import SchemaDecodeError
from designer_schema.graph import (
    ERROR_PORT,
    GRAPH_SCHEMA_VERSION,
    GraphDecodeError,
    JoinMode,
    JoinSpec,
    OnError,
    RetryPolicy,
    Step,
    Transition,
    WorkflowGraph,
    canonical_hash,
    graph_from_json,
    graph_json_schema,
    graph_to_json,
)

__all__ = [
    "DIAGNOSTIC_CODES",
    "DIAGRAM_SCHEMA_VERSION",
    "ERROR_PORT",
    "ESCAPED_MARKER",
    "EXPRESSION_MARKER",
    "GRAPH_SCHEMA_VERSION",
    "NOTE_TYPE",
    "RESERVED_CONFIG_KEYS",
    "Catalog",
    "Diagnostic",
    "Diagram",
    "DiagramDecodeError",
    "Edge",
    "ExpressionChecker",
    "GraphDecodeError",
    "JoinMode",
    "JoinSpec",
    "Node",
    "NodeKind",
    "NodeTypeSpec",
    "OnError",
    "Position",
    "RetryPolicy",
    "SchemaDecodeError",
    "Severity",
    "StaticCatalog",
    "Step",
    "Transition",
    "Viewport",
    "WorkflowGraph",
    "canonical_hash",
    "compile_diagram",
    "diagram_from_json",
    "diagram_json_schema",
    "diagram_to_json",
    "graph_from_json",
    "graph_json_schema",
    "graph_to_json",
]
