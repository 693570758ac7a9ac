"""The settings table of docs/operations.md is generated from backend/settings.py."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import msgspec
import pytest

from backend.cli import main
from backend.settings import SETTING_VARIABLES, Settings, about
from backend.settings_table import (
    BEGIN,
    END,
    NOT_SETTINGS,
    UndocumentedSetting,
    default_words,
    documented_table,
    markdown_table,
    setting_rows,
    type_words,
    update_document,
)

OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def test_operations_md_lists_every_setting_as_generated() -> None:
    documented = documented_table(OPERATIONS.read_text())
    assert documented is not None, f"docs/operations.md lacks the {BEGIN!r} ... {END!r} table"
    assert documented == markdown_table(), (
        "docs/operations.md's settings table differs from backend/settings.py; regenerate it"
        " with `.venv/bin/railyard settings --update docs/operations.md`"
    )


def test_every_setting_has_a_meaning_a_variable_and_a_row() -> None:
    rows = setting_rows()
    fields = [f for f in Settings.__struct_fields__ if f not in NOT_SETTINGS]
    assert [row.name for row in rows] == fields
    assert all(row.meaning and row.type and row.default for row in rows)
    assert {row.variable for row in rows} == set(SETTING_VARIABLES.values())


def test_a_setting_without_a_meaning_or_a_variable_is_refused() -> None:
    class Undescribed(Settings, kw_only=True):
        surprise: int = 3

    with pytest.raises(UndocumentedSetting, match=r"Settings.surprise has no description"):
        setting_rows(Undescribed)

    class Unreachable(Settings, kw_only=True):
        hidden: Annotated[int, about("a setting no variable sets")] = 3

    with pytest.raises(UndocumentedSetting, match=r"Settings.hidden has no environment variable"):
        setting_rows(Unreachable)


def test_types_and_defaults_in_words() -> None:
    assert type_words(Annotated[int, msgspec.Meta(ge=1, le=9)]) == "integer >= 1, <= 9"
    assert type_words(float) == "number"
    assert type_words(tuple[str, ...]) == "comma-separated list"
    assert type_words(bool) == "flag (`1` / `0`)"
    assert default_words(3600.0) == "`3600`" and default_words(0.5) == "`0.5`"
    assert default_words(()) == "empty" and default_words(False) == "`0`"
    rows = {row.variable: row for row in setting_rows()}
    assert rows["RAILYARD_SECRET_KEY"].default == "random per process"
    assert rows["RAILYARD_SEARCH_BACKEND"].type == "`postgres` or `elasticsearch`"


def test_the_command_prints_and_updates_the_table(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["settings", "--markdown"]) == 0
    assert capsys.readouterr().out.strip() == markdown_table()
    doc = tmp_path / "ops.md"
    doc.write_text(f"# Ops\n\n{BEGIN}\n| stale |\n{END}\n\nafter\n")
    assert main(["settings", "--update", str(doc)]) == 0
    assert doc.read_text() == f"# Ops\n\n{markdown_table()}\n\nafter\n"
    assert update_document(doc) is False
    (tmp_path / "plain.md").write_text("no table here\n")
    assert main(["settings", "--update", str(tmp_path / "plain.md")]) == 2
    assert "has no part between" in capsys.readouterr().err
