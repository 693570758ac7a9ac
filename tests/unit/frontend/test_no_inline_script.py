"""The Content-Security-Policy allows no inline script or style: templates must not rely on
them (an inline handler would silently stop working in the browser)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

TEMPLATES = Path(__file__).resolve().parents[3] / "frontend" / "templates"
INLINE = [
    (re.compile(r"<script(?![^>]*\bsrc=)[^>]*>", re.I), "inline <script> without src"),
    (re.compile(r"\son[a-z]+\s*=", re.I), "inline event handler attribute"),
    (re.compile(r"\sstyle\s*=", re.I), "style attribute"),
    (re.compile(r"<style[\s>]", re.I), "<style> element"),
    (re.compile(r"javascript:", re.I), "javascript: URL"),
]


@pytest.mark.parametrize(
    "template", sorted(TEMPLATES.rglob("*.html")), ids=lambda p: str(p.relative_to(TEMPLATES))
)
def test_template_has_no_inline_script_or_style(template: Path) -> None:
    text = template.read_text()
    found = [f"{what}: {m.group(0)!r}" for rx, what in INLINE for m in rx.finditer(text)]
    assert found == []
