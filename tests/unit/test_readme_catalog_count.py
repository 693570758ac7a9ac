"""The README's catalog count is the built-in catalog's."""

from __future__ import annotations

import collections
import re
from pathlib import Path

from backend.services.connectors.node_reference import builtin_catalog

README = Path(__file__).resolve().parents[2] / "README.md"
COUNT = re.compile(
    r"\*\*(\d+) built-in node types\*\*: (\d+) triggers, (\d+) flow nodes and (\d+) actions"
)


def test_readme_states_the_catalog_count() -> None:
    match = COUNT.search(" ".join(README.read_text().split()))
    assert match, (
        "README.md lacks '**N built-in node types**: T triggers, F flow nodes and A actions'"
    )
    kinds = collections.Counter(spec.kind for spec in builtin_catalog().all())
    stated = tuple(int(n) for n in match.groups())
    actual = (sum(kinds.values()), kinds["trigger"], kinds["control"], kinds["action"])
    assert stated == actual, f"README.md states {stated}, the built-in catalog has {actual}"
