"""Incident trends drawn as inline SVG bar charts, server-side (no script): a small sparkline for
each row of the incident list and a bigger chart for an incident's page. Each chart is an image
whose title and label give every number (domain/trend.py chart_label); the bigger one's bars
carry their bucket's start and count too."""

from __future__ import annotations

from html import escape

from markupsafe import Markup

from redrive.dashboard.rendering import absolute_time
from redrive.domain.trend import Trend, chart_label

SMALL = (96, 20)  # width, height in px
LARGE = (600, 120)
FLOOR = 1.0  # the height of an empty bucket's bar (a baseline, so a gap still reads as zero)


def _number(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


def chart(trend: Trend, size: tuple[int, int] = SMALL, detailed: bool = False) -> Markup:
    """The trend's buckets as bars, oldest on the left, scaled to the busiest bucket; with
    `detailed`, each bar titled with its bucket's start and count."""
    width, height = size
    label = escape(chart_label(trend))
    peak = max(trend.counts, default=0)
    slot = width / max(len(trend.buckets), 1)
    gap = 1.0 if slot >= 3 else 0.0
    bars = []
    for index, bucket in enumerate(trend.buckets):
        tall = FLOOR if peak == 0 else max(FLOOR, bucket.count / peak * (height - FLOOR))
        kind = "bar" if bucket.count else "bar empty"
        tip = ""
        if detailed:
            tip = f"<title>{escape(absolute_time(bucket.start))}: {bucket.count}</title>"
        bars.append(
            f'<rect class="{kind}" x="{_number(index * slot)}" y="{_number(height - tall)}" '
            f'width="{_number(slot - gap)}" height="{_number(tall)}" '
            f'data-count="{bucket.count}">{tip}</rect>'
        )
    ground = f'<rect class="ground" width="{width}" height="{height}"></rect>' if detailed else ""
    return Markup(
        f'<svg class="sparkline" role="img" aria-label="{label}" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" '
        f'data-counts="{",".join(str(count) for count in trend.counts)}">'
        f"<title>{label}</title>{ground}{''.join(bars)}</svg>"
    )
