"""Server-side SVG chart geometry for the metrics page: no charting script, and every
chart's numbers are also in a table beside it."""

from __future__ import annotations

from typing import Any

WIDTH, HEIGHT, PAD = 600, 180, 28


def _scale(values: list[float]) -> float:
    top = max(values, default=0) or 1
    return (HEIGHT - 2 * PAD) / top


def bars(labels: list[str], values: list[float]) -> dict[str, Any]:
    """Bars of ``values``; each with its label and value (for its <title>)."""
    n = max(len(values), 1)
    step = (WIDTH - 2 * PAD) / n
    k = _scale(values)
    items = []
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        h = value * k
        items.append(
            {
                "x": round(PAD + i * step + step * 0.1, 1),
                "y": round(HEIGHT - PAD - h, 1),
                "w": round(step * 0.8, 1),
                "h": round(h, 1),
                "label": label,
                "value": value,
            }
        )
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "bars": items,
        "top": max(values, default=0),
        "first": labels[0] if labels else "",
        "last": labels[-1] if labels else "",
        "baseline": HEIGHT - PAD,
    }


def lines(labels: list[str], series: dict[str, list[float]]) -> dict[str, Any]:
    """One polyline per series over the same labels (the cumulative flow)."""
    n = max(len(labels) - 1, 1)
    step = (WIDTH - 2 * PAD) / n
    k = _scale([v for values in series.values() for v in values])
    drawn = []
    for name, values in series.items():
        points = " ".join(
            f"{round(PAD + i * step, 1)},{round(HEIGHT - PAD - v * k, 1)}"
            for i, v in enumerate(values)
        )
        drawn.append({"name": name, "points": points, "last": values[-1] if values else 0})
    return {
        "width": WIDTH,
        "height": HEIGHT,
        "series": drawn,
        "first": labels[0] if labels else "",
        "last": labels[-1] if labels else "",
        "baseline": HEIGHT - PAD,
    }
