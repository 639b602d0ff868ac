"""Server-side SVG chart geometry for the metrics page: no charting script, and every
chart's numbers are also in a table beside it.

The SVG scales with the page, so its words would shrink with it on a phone: the axis
labels are HTML beside the drawing (``ticks``, ``top``), at the page's own size."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

WIDTH, HEIGHT, PAD = 600, 160, 4


def _ticks(labels: list[str]) -> list[str]:
    """First, middle and last labels (fewer when there are fewer)."""
    if len(labels) <= 3:
        return labels
    return [labels[0], labels[len(labels) // 2], labels[-1]]


def bars(
    labels: list[str], values: list[float], text: Callable[[float], str] = str
) -> dict[str, Any]:
    """Bars of ``values``; each with its label and its value in words (for its <title>)."""
    n = max(len(values), 1)
    step = (WIDTH - 2 * PAD) / n
    top = max(values, default=0)
    k = (HEIGHT - 2 * PAD) / (top or 1)
    items = []
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        h = max(value * k, 1.5 if value else 0)  # a small value still shows
        items.append(
            {
                "x": round(PAD + i * step + step * 0.1, 1),
                "y": round(HEIGHT - PAD - h, 1),
                "w": round(max(step * 0.8, 1), 1),
                "h": round(h, 1),
                "label": label,
                "value": text(value),
            }
        )
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "bars": items,
        "top": text(top),
        "ticks": _ticks(labels),
        "baseline": HEIGHT - PAD,
        "filled": sum(1 for v in values if v),
    }


def bands(labels: list[str], series: dict[str, list[int]]) -> dict[str, Any]:
    """A cumulative flow as stacked bands: ``series`` holds the cumulative lines from the
    top one down (created, started, completed); each band fills between its line and the
    next. The drawing starts one bucket before the first change (a two-minute session in
    an hour fills the chart) and its scale starts at the lowest line's least value (a
    month-old board's changes are not a sliver on top of its history)."""
    lines = list(series.values())
    count = len(labels)
    first = 0
    for i in range(1, count):
        if any(line[i] != line[i - 1] for line in lines):
            first = i - 1
            break
    else:
        first = max(0, count - 2)
    labels = labels[first:]
    lines = [line[first:] for line in lines]
    low = min(lines[-1], default=0)
    high = max(lines[0], default=0)
    k = (HEIGHT - 2 * PAD) / ((high - low) or 1)
    step = (WIDTH - 2 * PAD) / max(len(labels) - 1, 1)

    def points(line: list[int]) -> list[str]:
        return [
            f"{round(PAD + i * step, 1)},{round(HEIGHT - PAD - (v - low) * k, 1)}"
            for i, v in enumerate(line)
        ]

    floor = [low] * len(labels)
    drawn = []
    for name, upper, lower in zip(series, lines, [*lines[1:], floor], strict=True):
        outline = points(upper) + points(lower)[::-1]
        drawn.append({"name": name, "points": " ".join(outline), "last": upper[-1] if upper else 0})
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "series": drawn,
        "ticks": _ticks(labels),
        "low": low,
        "top": high,
    }
