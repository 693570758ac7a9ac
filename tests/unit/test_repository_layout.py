"""Rules of the repository's layout that no linter checks for us.

- Test helpers live in conftest and helper modules: no test module imports another test
  module (``test_*.py``), so running, moving or deleting one test file never breaks another.
- No product module is longer than :data:`MAX_MODULE_LINES` lines: a module holds one job,
  and one that grows past the limit is split into modules named for what they hold.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEST_TREES = ("tests", "e2e", "bench")
PRODUCT_TREES = ("backend", "frontend", "designer_schema", "connectors")
MAX_MODULE_LINES = 500
_TEST_MODULE = re.compile(r"(^|\.)test_[A-Za-z0-9_]*$")


def _python_files(*trees: str) -> list[Path]:
    return sorted(p for tree in trees for p in (ROOT / tree).rglob("*.py"))


def imported_test_modules(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every import in ``path`` that names a test module
    (``from tests.integration.test_runs import x``, ``import e2e.test_login``,
    ``from tests.integration import test_runs``)."""
    found: list[tuple[int, str]] = []
    for item in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(item, ast.ImportFrom) and item.module and item.level == 0:
            if _TEST_MODULE.search(item.module):
                found.append((item.lineno, item.module))
            else:
                found.extend(
                    (item.lineno, f"{item.module}.{alias.name}")
                    for alias in item.names
                    if _TEST_MODULE.search(alias.name)
                )
        elif isinstance(item, ast.ImportFrom) and item.level > 0:
            names = [item.module or ""] + [alias.name for alias in item.names]
            found.extend((item.lineno, name) for name in names if _TEST_MODULE.search(name))
        elif isinstance(item, ast.Import):
            found.extend(
                (item.lineno, alias.name) for alias in item.names if _TEST_MODULE.search(alias.name)
            )
    return found


def test_no_test_module_imports_another_test_module() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in _python_files(*TEST_TREES)
        for line, module in imported_test_modules(path)
    ]
    assert not offenders, "move shared helpers to conftest.py or a helper module:\n" + "\n".join(
        offenders
    )


def test_the_import_check_sees_every_form(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from tests.integration.test_runs import publish\n"
        "from tests.integration import test_runs, flows\n"
        "import e2e.test_login\n"
        "from .test_local import x\n"
        "from tests.integration.flows import publish\n"
        "import tests.http_sink\n",
        encoding="utf-8",
    )
    assert [line for line, _ in imported_test_modules(sample)] == [1, 2, 3, 4]


def oversized_modules(root: Path, trees: tuple[str, ...], limit: int) -> list[str]:
    """``"<path>: <n> lines"`` of every Python module under ``trees`` longer than ``limit``
    lines, longest first."""
    sizes = [
        (len(path.read_text(encoding="utf-8").splitlines()), path)
        for tree in trees
        for path in (root / tree).rglob("*.py")
    ]
    return [
        f"{path.relative_to(root)}: {n} lines"
        for n, path in sorted(sizes, reverse=True)
        if n > limit
    ]


def test_no_product_module_exceeds_the_size_limit() -> None:
    offenders = oversized_modules(ROOT, PRODUCT_TREES, MAX_MODULE_LINES)
    assert not offenders, (
        f"split these into modules with one job each (limit {MAX_MODULE_LINES} lines):\n"
        + "\n".join(offenders)
    )


def test_the_size_check_counts_lines(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "small.py").write_text("x = 1\n" * 3, encoding="utf-8")
    (tmp_path / "pkg" / "large.py").write_text("x = 1\n" * 4, encoding="utf-8")
    assert oversized_modules(tmp_path, ("pkg",), 3) == ["pkg/large.py: 4 lines"]
