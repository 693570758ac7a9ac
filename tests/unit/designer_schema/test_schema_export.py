"""The committed JSON Schema files must match what the code generates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from designer_schema import diagram_json_schema, graph_json_schema
from designer_schema.schema_export import (
    DIAGRAM_SCHEMA_FILE,
    GRAPH_SCHEMA_FILE,
    PACKAGE_DIR,
    drifted_schemas,
    generated_schemas,
    main,
)


def as_json(value: object) -> object:
    """The value as it reads back from JSON (tuples become lists)."""
    return json.loads(json.dumps(value))


def test_committed_schema_files_match_generated() -> None:
    assert drifted_schemas() == [], (
        "designer_schema/*.schema.json drifted from the code; regenerate with "
        "`python -m designer_schema.schema_export designer_schema`"
    )


def test_committed_diagram_schema_is_the_diagram_schema() -> None:
    committed = json.loads((PACKAGE_DIR / DIAGRAM_SCHEMA_FILE).read_text(encoding="utf-8"))
    assert committed == as_json(diagram_json_schema())
    committed_graph = json.loads((PACKAGE_DIR / GRAPH_SCHEMA_FILE).read_text(encoding="utf-8"))
    assert committed_graph == as_json(graph_json_schema())


def test_generated_text_is_stable() -> None:
    assert generated_schemas() == generated_schemas()


def test_main_prints_both_schemas(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == as_json({"diagram": diagram_json_schema(), "graph": graph_json_schema()})


def test_main_check_passes_on_package(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--check"]) == 0


def test_main_check_fails_on_empty_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--check", str(tmp_path)]) == 1
    assert DIAGRAM_SCHEMA_FILE in capsys.readouterr().err
