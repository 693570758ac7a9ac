"""Server-side SVG charts for the dashboard (no script, no inline style: they render
under the strict CSP; colours come from CSS classes in app.css).

Each function returns ``Markup`` holding one ``<svg>`` scaled by its ``viewBox`` to the
width of its container. Text is escaped; every mark carries a ``<title>`` (the browser's
tooltip and what screen readers say), and marks that lead somewhere are links.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta

from markupsafe import Markup, escape

from backend.services.operations.dashboard import Bucket

WIDTH, HEIGHT = 600, 160
PAD_LEFT, PAD_BOTTOM, PAD_TOP = 34, 18, 6


def _fmt_time(at: datetime, minutes: int) -> str:
    return at.strftime("%H:%M" if minutes < 1440 else "%d %b %H:%M")


def runs_chart(buckets: Sequence[Bucket], bucket_minutes: int, link: Callable[..., str]) -> Markup:
    """Stacked bars of runs ended per bucket (succeeded, failed, other), newest right.

    ``link(status, start=, end=)`` gives the search URL of a bar segment: ``status``
    ``"succeeded"``, ``"failed"`` or ``"other"``, ``start``/``end`` the bucket's times.
    """
    if not buckets:
        return Markup("")
    top = max(max(b.total for b in buckets), 1)
    plot_w, plot_h = WIDTH - PAD_LEFT, HEIGHT - PAD_BOTTOM - PAD_TOP
    step = plot_w / len(buckets)
    bar = max(step * 0.8, 1.0)
    parts = [
        # a group, not an image: its bars are links (an image may hold no controls)
        f'<svg class="chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="group" '
        f'aria-label="Runs ended per {bucket_minutes} minute(s)">',
        f'<line class="axis" x1="{PAD_LEFT}" y1="{PAD_TOP + plot_h}" x2="{WIDTH}" '
        f'y2="{PAD_TOP + plot_h}"/>',
        f'<text class="tick" x="{PAD_LEFT - 4}" y="{PAD_TOP + 8}" text-anchor="end">{top}</text>',
        f'<text class="tick" x="{PAD_LEFT - 4}" y="{PAD_TOP + plot_h}" text-anchor="end">0</text>',
    ]
    for i, b in enumerate(buckets):
        x = PAD_LEFT + i * step + (step - bar) / 2
        y = float(PAD_TOP + plot_h)
        when = _fmt_time(b.start, bucket_minutes * 60)
        end = b.start + timedelta(minutes=bucket_minutes)
        for status, count, css in (
            ("succeeded", b.succeeded, "ok"),
            ("failed", b.failed, "bad"),
            ("other", b.other, "other"),
        ):
            if not count:
                continue
            h = plot_h * count / top
            y -= h
            label = f"{when}: {count} {'cancelled' if status == 'other' else status}"
            href = escape(link(status, start=b.start, end=end))
            parts.append(
                f'<a href="{href}" aria-label="{escape(label)}">'
                f'<rect class="bar {css}" x="{x:.1f}" '
                f'y="{y:.1f}" width="{bar:.1f}" height="{h:.1f}"><title>{escape(label)}'
                "</title></rect></a>"
            )
    for i in (0, len(buckets) - 1):
        anchor = "start" if i == 0 else "end"
        x = PAD_LEFT if i == 0 else WIDTH
        parts.append(
            f'<text class="tick" x="{x}" y="{HEIGHT - 4}" text-anchor="{anchor}">'
            f"{escape(_fmt_time(buckets[i].start, bucket_minutes * 60))}</text>"
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def ring(rate: float | None, label: str) -> Markup:
    """A ring filled to ``rate`` (0..1) with the percentage in its middle ("n/a" for None)."""
    r = 40
    circumference = 2 * 3.14159265 * r
    filled = circumference * (rate or 0.0)
    text = "n/a" if rate is None else f"{rate * 100:.1f}%"
    css = "ok" if rate is None or rate >= 0.95 else ("warn" if rate >= 0.8 else "bad")
    return Markup(
        f'<svg class="ring" viewBox="0 0 100 100" role="img" aria-label="{escape(label)}: {text}">'
        f'<circle class="ring-track" cx="50" cy="50" r="{r}"/>'
        f'<circle class="ring-fill {css}" cx="50" cy="50" r="{r}" '
        f'stroke-dasharray="{filled:.1f} {circumference:.1f}" transform="rotate(-90 50 50)"/>'
        f'<text class="ring-text" x="50" y="55" text-anchor="middle">{text}</text></svg>'
    )


def hbars(values: Sequence[tuple[str, float | None]]) -> Markup:
    """Horizontal bars, one per ``(label, seconds)``, scaled to the largest value."""
    top = max((v for _, v in values if v is not None), default=0.0) or 1.0
    width, row, label_w, value_w = 300, 30, 36, 70
    height = row * len(values)
    summary = ", ".join(f"{label} {duration(value)}" for label, value in values)
    parts = [
        f'<svg class="chart hbars" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="{escape(summary)}">'
    ]
    for i, (label, value) in enumerate(values):
        y = i * row
        w = max((width - label_w - value_w) * (value or 0.0) / top, 1.0)
        shown = duration(value)
        parts.append(
            f'<text class="tick big" x="0" y="{y + 19}">{escape(label)}</text>'
            f'<rect class="bar ok" x="{label_w}" y="{y + 6}" width="{w:.1f}" height="{row - 12}">'
            f"<title>{escape(label)}: {escape(shown)}</title></rect>"
            f'<text class="tick big" x="{label_w + w + 6:.1f}" y="{y + 19}">{escape(shown)}</text>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def meter(fraction: float, css: str = "ok") -> Markup:
    """A small inline bar filled to ``fraction`` (0..1), for table cells."""
    w = max(0.0, min(1.0, fraction)) * 100
    return Markup(
        '<svg class="meter" viewBox="0 0 100 8" aria-hidden="true">'
        '<rect class="meter-track" width="100" height="8"/>'
        f'<rect class="bar {css}" width="{w:.1f}" height="8"/></svg>'
    )


def duration(seconds: float | None) -> str:
    """``0.0004`` -> ``"0.40 ms"``, ``0.042`` -> ``"42 ms"``, ``75`` -> ``"1.2 min"``;
    ``None`` -> ``"n/a"``."""
    if seconds is None:
        return "n/a"
    if seconds < 0.01:
        return f"{seconds * 1000:.2f} ms"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.2f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
