"""Accessibility checks of a page with axe-core (vendored under ``e2e/vendor/axe-core``,
the npm package ``axe-core``, its version in ``VERSION``, MPL-2.0).

axe is put into the page through the DevTools protocol (Playwright's ``evaluate``), which
the page's Content-Security-Policy does not govern, so pages are checked exactly as they
are served. Rules: WCAG 2.0/2.1/2.2 A and AA plus axe's best practices, and the
experimental rules of ``EXTRA_RULES``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

AXE_SOURCE = Path(__file__).parent / "vendor" / "axe-core" / "axe.min.js"
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"]
BLOCKING = ("serious", "critical")

# Experimental rules axe leaves out unless asked, run too: a node drawn on the canvas must
# have its drawn texts (label, run note, problem count) in its accessible name (WCAG 2.5.3).
EXTRA_RULES = ("label-content-name-mismatch",)

RUN = """async ([tags, within, extra]) => {
  const EXTRA = Object.fromEntries(extra.map((id) => [id, { enabled: true }]));
  const context = within ? document.querySelector(within) : document;
  const result = await axe.run(context, { runOnly: { type: "tag", values: tags }, rules: EXTRA });
  return result.violations.map((v) => ({
    id: v.id, impact: v.impact, help: v.help,
    nodes: v.nodes.slice(0, 5).map((n) => ({
      target: n.target.join(" "), summary: n.failureSummary,
    })),
  }));
}"""


def axe_violations(
    page: Any, impacts: tuple[str, ...] = BLOCKING, within: str | None = None
) -> list[dict[str, Any]]:
    """The page's axe-core violations of the given impacts (serious and critical by
    default), each ``{id, impact, help, nodes: [{target, summary}]}``; only those inside
    the element ``within`` (a CSS selector) when given."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.evaluate(AXE_SOURCE.read_text(encoding="utf-8"))
    found = page.evaluate(RUN, [TAGS, within, list(EXTRA_RULES)])
    return [v for v in found if v["impact"] in impacts]


def describe(violations: list[dict[str, Any]]) -> str:
    """The violations as readable lines (rule, impact, help, the first elements)."""
    lines = []
    for v in violations:
        lines.append(f"{v['id']} ({v['impact']}): {v['help']}")
        lines += [f"    {n['target']}: {n['summary']}" for n in v["nodes"]]
    return "\n".join(lines)
