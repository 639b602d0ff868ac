"""Flow metrics and cost of a board, computed in SQL (read only).

Arrivals into each status per day come from the board's flow days, which the unit of
work counts from the events it records (every status change an event records
carries ``data.fields.status.to``); migration 0011 counted the log that came before.
Distributions read the durations kept when each task completed and each attempt
ended; per-agent figures group the attempts and usage reports. None of it reads the
event log, so it costs the same on any length of history.
"""

from __future__ import annotations

from bisect import bisect_right
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from statistics import median
from typing import Any

from django.db.models import Count, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from .models import Attempt, AttemptOutcome, Board, FlowDay, Status, Task, Usage

DAYS_DEFAULT = 30
DAYS_MAX = 366
PERCENTILES = (50, 85, 95)


def percentile(values: list[float], p: int, *, ordered: bool = False) -> float | None:
    """The nearest-rank percentile (a value that occurred), or None for no values."""
    if not values:
        return None
    ranked = values if ordered else sorted(values)
    rank = max(1, -(-p * len(ranked) // 100))  # ceil(p/100 × n)
    return ranked[rank - 1]


BUCKETS = [1, 4, 24, 72, 168]  # upper bounds in hours; the last bucket is open
BUCKET_LABELS = ["≤ 1 h", "1–4 h", "4–24 h", "1–3 d", "3–7 d", "> 7 d"]


def distribution(hours: list[float]) -> dict[str, Any]:
    """A duration distribution in hours: count, percentiles, and a histogram."""
    ordered = sorted(hours)
    counts = []
    below = 0
    for bound in BUCKETS:
        upto = bisect_right(ordered, bound)
        counts.append(upto - below)
        below = upto
    counts.append(len(ordered) - below)
    labels = BUCKET_LABELS
    return {
        "count": len(hours),
        **{f"p{p}": _round(percentile(ordered, p, ordered=True)) for p in PERCENTILES},
        "histogram": [
            {"bucket": label, "count": n} for label, n in zip(labels, counts, strict=True)
        ],
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def metrics(board: Board, *, days: int = DAYS_DEFAULT, today: date | None = None) -> dict[str, Any]:
    """Throughput per day, lead and cycle time, a cumulative flow, per-agent figures and cost,
    over the last ``days`` days (UTC) up to ``today``."""
    today = today or timezone.now().date()
    first = today - timedelta(days=days - 1)
    start = datetime.combine(first, datetime.min.time(), tzinfo=UTC)
    day_list = [first + timedelta(days=n) for n in range(days)]

    arrivals = _arrivals(board, first)
    throughput = [
        {"day": d.isoformat(), "completed": arrivals["daily"].get((d, Status.COMPLETED), 0)}
        for d in day_list
    ]
    # Durations were kept when each task completed and each attempt ended: one number a row.
    lead = [
        seconds / 3600
        for seconds in Task.objects.filter(
            board=board, status=Status.COMPLETED, completed_at__gte=start
        )
        .order_by()  # (the model's ordering would sort every row for nothing)
        .values_list("lead_seconds", flat=True)
        if seconds is not None
    ]
    completed_attempts = [
        (agent, seconds / 3600)
        for agent, seconds in Attempt.objects.filter(
            task__board=board, outcome=AttemptOutcome.COMPLETED, ended_at__gte=start
        )
        .order_by()
        .values_list("agent", "seconds")
        if seconds is not None
    ]
    cycle = [hours for _, hours in completed_attempts]
    return {
        "board": board.slug,
        "from": first.isoformat(),
        "to": today.isoformat(),
        "days": days,
        "throughput": throughput,
        "leadTimeHours": distribution(lead),
        "cycleTimeHours": distribution(cycle),
        "cumulativeFlow": _cumulative_flow(arrivals, day_list),
        "agents": _agents(board, start, completed_attempts),
        "cost": _cost(board, start, day_list),
    }


def _arrivals(board: Board, start_day: date) -> dict[str, Any]:
    """Arrivals into each status (and creations), per day in the window and in all before
    it: from the board's flow days (kept by the unit of work), a row per day and status."""
    days = FlowDay.objects.filter(board=board)
    daily = {
        (day, status): count
        for day, status, count in days.filter(day__gte=start_day).values_list(
            "day", "status", "count"
        )
    }
    before = {
        row["status"]: row["n"]
        for row in days.filter(day__lt=start_day)
        .values("status")
        .order_by()
        .annotate(n=Sum("count"))
    }
    return {"daily": daily, "before": before}


def _cumulative_flow(arrivals: dict[str, Any], day_list: list[date]) -> list[dict[str, Any]]:
    """Cumulative arrivals into created, in progress and completed by the end of each day
    (a cumulative flow diagram: the bands between the lines are the work in each state)."""
    daily, before = arrivals["daily"], arrivals["before"]
    totals = {
        "created": before.get("created", 0),
        "started": before.get(Status.IN_PROGRESS, 0),
        "completed": before.get(Status.COMPLETED, 0),
    }
    keys = {"created": "created", "started": Status.IN_PROGRESS, "completed": Status.COMPLETED}
    flow = []
    for d in day_list:
        for name, key in keys.items():
            totals[name] += daily.get((d, key), 0)
        flow.append(
            {
                "day": d.isoformat(),
                **totals,
                "waiting": totals["created"] - totals["started"],
                "inProgress": totals["started"] - totals["completed"],
            }
        )
    return flow


def _agents(
    board: Board, start: datetime, completed: list[tuple[str, float]]
) -> list[dict[str, Any]]:
    """Per agent: completed, failed, timed out, median cycle time, success rate, cost."""
    outcomes: dict[str, dict[str, int]] = {}
    rows = (
        Attempt.objects.filter(task__board=board, ended_at__gte=start)
        .exclude(agent="")
        .values("agent", "outcome")
        .order_by()
        .annotate(n=Count("id"))
    )
    for row in rows:
        outcomes.setdefault(row["agent"], {})[row["outcome"]] = row["n"]
    cycles: dict[str, list[float]] = {}
    for agent, hours in completed:
        cycles.setdefault(agent, []).append(hours)
    spent = {
        row["agent"]: row
        for row in Usage.objects.filter(board=board, created_at__gte=start)
        .values("agent")
        .order_by()
        .annotate(
            cost=Sum("cost_usd"), tokens_in=Sum("input_tokens"), tokens_out=Sum("output_tokens")
        )
    }
    result = []
    for agent in sorted(set(outcomes) | set(spent)):
        counts = outcomes.get(agent, {})
        done = counts.get(AttemptOutcome.COMPLETED, 0)
        failed = counts.get(AttemptOutcome.FAILED, 0)
        timed_out = counts.get(AttemptOutcome.TIMED_OUT, 0)
        finished = done + failed + timed_out
        usage = spent.get(agent, {})
        result.append(
            {
                "agent": agent,
                "completed": done,
                "failed": failed,
                "timedOut": timed_out,
                "medianCycleHours": _round(median(cycles[agent])) if cycles.get(agent) else None,
                "successRate": round(done / finished, 4) if finished else None,
                "costUsd": float(usage.get("cost") or Decimal(0)),
                "inputTokens": usage.get("tokens_in") or 0,
                "outputTokens": usage.get("tokens_out") or 0,
            }
        )
    return result


def _cost(board: Board, start: datetime, day_list: list[date]) -> dict[str, Any]:
    """Cost per day and per parent task in the window, and the board's total and budget."""
    usage = Usage.objects.filter(board=board, created_at__gte=start)
    per_day = {
        row["day"]: row["cost"]
        for row in usage.annotate(day=TruncDate("created_at"))
        .values("day")
        .order_by()
        .annotate(cost=Sum("cost_usd"))
    }
    parents = (
        usage.exclude(parent_number=None)
        .values("parent_number")
        .order_by()
        .annotate(cost=Sum("cost_usd"))
        .order_by("-cost", "parent_number")[:20]
    )
    spent, budget = Board.objects.values_list("spent_usd", "budget_usd").get(pk=board.pk)
    return {
        "totalUsd": float(spent),
        "budgetUsd": float(budget) if budget is not None else None,
        "perDay": [{"day": d.isoformat(), "costUsd": float(per_day.get(d) or 0)} for d in day_list],
        "perParent": [
            {"taskId": str(row["parent_number"]), "costUsd": float(row["cost"])} for row in parents
        ],
    }
