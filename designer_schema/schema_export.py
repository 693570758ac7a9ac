"""Write the JSON Schemas of the diagram and the workflow graph.

Usage::

    python -m designer_schema.schema_export            # both schemas to stdout
    python -m designer_schema.schema_export DIR        # writes DIR/diagram.schema.json and
                                                       # DIR/graph.schema.json
    python -m designer_schema.schema_export --check    # exit 1 if the committed files drifted

The committed copies live next to this module (``designer_schema/diagram.schema.json`` and
``designer_schema/graph.schema.json``); regenerate them with
``python -m designer_schema.schema_export designer_schema``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from designer_schema.diagram import diagram_json_schema
from designer_schema.graph import graph_json_schema

DIAGRAM_SCHEMA_FILE = "diagram.schema.json"
GRAPH_SCHEMA_FILE = "graph.schema.json"
PACKAGE_DIR = Path(__file__).resolve().parent


def render_schema(schema: dict[str, Any]) -> str:
    """Render a schema as stable JSON text: sorted keys, 2-space indent, final newline."""
    return json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def generated_schemas() -> dict[str, str]:
    """Map each schema file name to its freshly generated text."""
    return {
        DIAGRAM_SCHEMA_FILE: render_schema(diagram_json_schema()),
        GRAPH_SCHEMA_FILE: render_schema(graph_json_schema()),
    }


def write_schemas(directory: Path) -> list[Path]:
    """Write every schema file into ``directory`` (created if needed); return the paths.

    Raises ``OSError`` when the directory or a file cannot be written.
    """
    directory.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, text in generated_schemas().items():
        path = directory / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def drifted_schemas(directory: Path = PACKAGE_DIR) -> list[str]:
    """Names of the schema files in ``directory`` that are missing or differ from the
    generated text."""
    drifted: list[str] = []
    for name, text in generated_schemas().items():
        path = directory / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            drifted.append(name)
    return drifted


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point; returns the process exit code."""
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    if args and args[0] == "--check":
        drifted = drifted_schemas(Path(args[1]) if len(args) > 1 else PACKAGE_DIR)
        for name in drifted:
            print(
                f"{name} is out of date; run python -m designer_schema.schema_export "
                "designer_schema",
                file=sys.stderr,
            )
        return 1 if drifted else 0
    if args:
        for path in write_schemas(Path(args[0])):
            print(path)
        return 0
    combined = {"diagram": diagram_json_schema(), "graph": graph_json_schema()}
    sys.stdout.write(render_schema(combined))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
