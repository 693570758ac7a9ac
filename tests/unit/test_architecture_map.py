"""docs/architecture.md opens with a map from each concept to the files that hold it;
every file or directory the page names must exist."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
ROOTS = (
    "backend/",
    "frontend/",
    "designer_schema/",
    "connectors/",
    "tests/",
    "e2e/",
    "bench/",
    "deploy/",
    "docs/",
)


def _expand(path: str) -> list[str]:
    """``backend/services/identity/{grants,groups}.py`` -> both paths (shell brace expansion)."""
    parts = re.split(r"\{([^{}]*)\}", path)
    choices = [[p] if i % 2 == 0 else p.split(",") for i, p in enumerate(parts)]
    return ["".join(c) for c in itertools.product(*choices)]


def named_paths(text: str) -> list[str]:
    """Repository paths a Markdown text names: backticked, in parentheses or bare, under
    one of the product's top-level directories; trailing punctuation dropped."""
    roots = "|".join(re.escape(r) for r in ROOTS)
    pattern = re.compile(r"(?<![\w/.-])((?:" + roots + r")[\w./{},-]*)")
    found: list[str] = []
    for match in pattern.finditer(text):
        raw = match.group(1).rstrip(".,")
        for path in _expand(raw):
            if path not in found:
                found.append(path)
    return found


def map_section(text: str) -> str:
    """The page's first section; it must be the concept map."""
    sections = re.split(r"^## ", text, flags=re.M)
    assert len(sections) > 1 and sections[1].startswith("Map: concept -> files"), (
        "docs/architecture.md must open with '## Map: concept -> files'"
    )
    return sections[1]


def test_the_page_opens_with_a_map_naming_the_concepts() -> None:
    section = map_section(PAGE.read_text(encoding="utf-8"))
    rows = [line for line in section.splitlines() if line.startswith("| ")][1:]
    concepts = " ".join(row.split("|")[1] for row in rows)
    for concept in (
        "run start",
        "webhook",
        "schedule",
        "node type",
        "connector",
        "credential",
        "permission",
        "audit",
        "expression",
        "large values",
        "recovery",
    ):
        assert concept in concepts, concept
    assert len(named_paths(section)) >= 50


def test_every_path_the_page_names_exists() -> None:
    missing = [p for p in named_paths(PAGE.read_text(encoding="utf-8")) if not (ROOT / p).exists()]
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_named_paths_reads_backticks_braces_and_prose() -> None:
    text = (
        "see `backend/api/runs.py`, (backend/services/identity/{grants,groups}.py) and "
        "backend/engine/nodes/. Not www.example.com/backend/x nor `railyard dev`."
    )
    assert named_paths(text) == [
        "backend/api/runs.py",
        "backend/services/identity/grants.py",
        "backend/services/identity/groups.py",
        "backend/engine/nodes/",
    ]


def test_the_page_has_one_map() -> None:
    """One table to read: concepts of every area are rows of the same map."""
    headings = re.findall(r"^## Map\b.*$", PAGE.read_text(encoding="utf-8"), flags=re.M)
    assert headings == ["## Map: concept -> files"]


def test_the_map_names_every_module_of_the_execution_package() -> None:
    """A newcomer finds every part of execution from the map (its internals are private
    to the package: the `protected` contract in pyproject.toml)."""
    section = map_section(PAGE.read_text(encoding="utf-8"))
    named = set(named_paths(section))
    package = ROOT / "backend" / "services" / "runs" / "execution"
    modules = sorted(p.relative_to(ROOT).as_posix() for p in package.glob("*.py"))
    unnamed = [m for m in modules if m not in named]
    assert not unnamed, f"the map of docs/architecture.md does not name {unnamed}"
