"""Flow metrics and cost of a board over a range: the last hour, today, 7 or 30 days (read
only).

Arrivals into each status come from two places. For the day ranges, from the board's flow
days, which the unit of work counts from the events it records (every status change an
event records carries ``data.fields.status.to``; migration 0011 counted the log that came
before). For the last hour and today, from the events themselves: the window's first
event is found by a binary search over ``seq`` (which rises with time), a few one-row
index lookups, so reading them costs what the day holds, never the whole history.
Distributions read the durations kept when each task completed and each attempt ended;
per-agent figures group the attempts and usage reports.

Durations are seconds, written for people in the unit that reads (``duration``); money is
US dollars, written "$0.76" (``money``). The page and the JSON API read their query
through one form (``MetricsQuery``, via ``metrics_query``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from statistics import median
from typing import Any

from django import forms
from django.db.models import Count, Sum
from django.utils import timezone

from boards.core import numbers
from boards.core.activity import status_to
from boards.core.errors import InvalidInput
from boards.core.states import EventKind
from boards.models import Attempt, AttemptOutcome, Board, Event, FlowDay, Label, Status, Task, Usage

PERCENTILES = (50, 85, 95)
# The ranges a person (or a token) may ask for, smallest first.
RANGES = {"1h": "Last hour", "today": "Today", "7d": "Last 7 days", "30d": "Last 30 days"}
RANGE_KEYS = tuple(RANGES)
MINUTE, HOUR, DAY = timedelta(minutes=1), timedelta(hours=1), timedelta(days=1)
# Histogram bin widths, in seconds: the first that fits the data in HISTOGRAM_BINS bins.
BIN_WIDTHS = (
    *(1, 2, 5, 10, 15, 30),
    *(60, 120, 300, 600, 900, 1800),
    *(3600, 7200, 4 * 3600, 6 * 3600, 12 * 3600),
    *(86_400, 2 * 86_400, 7 * 86_400, 14 * 86_400, 30 * 86_400, 90 * 86_400, 365 * 86_400),
)
HISTOGRAM_BINS = 8


def percentile(values: list[float], p: int, *, ordered: bool = False) -> float | None:
    """The nearest-rank percentile (a value that occurred), or None for no values."""
    if not values:
        return None
    ranked = values if ordered else sorted(values)
    rank = max(1, -(-p * len(ranked) // 100))  # ceil(p/100 × n)
    return ranked[rank - 1]


# -- people's words -------------------------------------------------------------------------


def _figure(value: float) -> str:
    """One decimal below ten ("2.5"), whole numbers above ("45"); never "2.0"."""
    text = f"{value:.1f}" if value < 9.95 else f"{value:.0f}"
    return text.removesuffix(".0")


def duration(seconds: float | None) -> str:
    """A duration in the unit that reads: "45 s", "2.5 min", "3 h", "1.5 d"; "—" for none."""
    if seconds is None:
        return "—"
    for unit, size in (("d", 86_400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{_figure(seconds / size)} {unit}"
    if 0 < seconds < 1:
        return f"{seconds:.2f} s".replace(".00 s", " s")
    return f"{_figure(seconds)} s"


def money(usd: float | Decimal | None) -> str:
    """US dollars as people write them: "$0.76", "$1,204.50"; "< $0.01" for a part of a cent."""
    if usd is None:
        return "—"
    value = float(usd)
    if 0 < value < 0.005:
        return "< $0.01"
    return f"${value:,.2f}"


# -- the query ------------------------------------------------------------------------------


class MetricsQuery(forms.Form):
    """``?range=1h|today|7d|30d&today=YYYY-MM-DD`` for the page and the JSON API alike: a
    missing range is the one that holds the board's recent activity (``range_default``);
    ``today`` pins the last day (reproducible figures; tests)."""

    range = forms.ChoiceField(
        choices=[("", "recent activity"), *RANGES.items()], required=False, label="Range"
    )
    today = forms.CharField(required=False, max_length=32, strip=False)

    def clean_range(self) -> str | None:
        return self.cleaned_data["range"] or None

    def clean_today(self) -> date | None:
        raw = self.cleaned_data["today"]
        if not raw:
            return None
        try:
            return numbers.day(raw, field="today")
        except InvalidInput as exc:
            raise forms.ValidationError(exc.message.removeprefix("today: ")) from exc


def metrics_query(params: Any) -> tuple[str | None, date | None]:
    """The range and pinned day a query asks for, or InvalidInput naming the first wrong
    parameter ("range: choose one of 1h, today, 7d, 30d")."""
    form = MetricsQuery(params)
    if not form.is_valid():
        name, errors = next(iter(form.errors.items()))
        message = errors[0]
        if name == "range":
            message = f"choose one of {', '.join(RANGE_KEYS)}"
        raise InvalidInput(f"{name}: {message}", field=name)
    return form.cleaned_data["range"], form.cleaned_data["today"]


# -- the window -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """The measured stretch of time, ``[start, end)``, cut into buckets of ``step``."""

    key: str
    start: datetime
    end: datetime
    step: timedelta

    @property
    def daily(self) -> bool:
        return self.step == DAY

    @property
    def unit(self) -> str:
        return {MINUTE: "minute", HOUR: "hour"}.get(self.step, "day")

    @property
    def buckets(self) -> list[datetime]:
        count = int((self.end - self.start) / self.step)
        return [self.start + n * self.step for n in range(count)]

    def index(self, moment: datetime) -> int | None:
        """The bucket ``moment`` falls in, or None outside the window."""
        if not self.start <= moment < self.end:
            return None
        return int((moment - self.start) / self.step)

    def label(self, moment: datetime) -> str:
        if self.step == DAY:
            return moment.date().isoformat()
        return moment.strftime("%H:%M")


def window_of(answer: dict[str, Any]) -> Window:
    """The window a ``metrics`` answer measured."""
    step = {"minute": MINUTE, "hour": HOUR}.get(answer["bucket"], DAY)
    start, end = (datetime.fromisoformat(answer[k].replace("Z", "+00:00")) for k in ("from", "to"))
    return Window(answer["range"], start, end, step)


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time.min, tzinfo=UTC)


def window(key: str, now: datetime) -> Window:
    """The window of range ``key`` up to ``now`` (UTC): the last hour in minutes, today so
    far in hours, the last 7 or 30 days (today included) in days."""
    now = now.astimezone(UTC)
    if key == "1h":
        end = now.replace(second=0, microsecond=0) + MINUTE
        return Window(key, end - 60 * MINUTE, end, MINUTE)
    if key == "today":
        end = now.replace(minute=0, second=0, microsecond=0) + HOUR
        return Window(key, _midnight(now.date()), end, HOUR)
    days = 7 if key == "7d" else 30
    end = _midnight(now.date()) + DAY
    return Window(key, end - days * DAY, end, DAY)


def _now(today: date | None) -> datetime:
    """Now, or the end of a pinned day that has passed."""
    now = timezone.now()
    if today is not None and today < now.date():
        return _midnight(today) + DAY - timedelta(microseconds=1)
    return now


def first_seq_since(board: Board, moment: datetime) -> int:
    """The ``seq`` from which the board's events happened at or after ``moment`` (one
    past the last when none did): a binary search, each probe one index lookup, as an
    event's seq rises with its time."""
    events = Event.objects.filter(board=board).order_by("seq")
    last = events.reverse().values_list("seq", flat=True).first() or 0
    low, high = 1, last + 1
    while low < high:
        middle = (low + high) // 2
        at = events.filter(seq__gte=middle).values_list("created_at", flat=True).first()
        if at is None or at >= moment:
            high = middle
        else:
            low = middle + 1
    return low


def range_default(board: Board, now: datetime | None = None) -> str:
    """The smallest range that holds the board's activity of the last 30 days (a session
    of a few minutes opens on the last hour; a month's work on 30 days)."""
    now = now or timezone.now()
    month = window("30d", now)
    seq = first_seq_since(board, month.start)
    first = (
        Event.objects.filter(board=board, seq__gte=seq)
        .order_by("seq")
        .values_list("created_at", flat=True)
        .first()
    )
    if first is None:
        return "30d"
    for key in RANGE_KEYS:
        if window(key, now).start <= first:
            return key
    return "30d"


# -- the figures ----------------------------------------------------------------------------


def histogram(seconds: list[float]) -> list[dict[str, Any]]:
    """Bins from the data's own spread: the narrowest width of ``BIN_WIDTHS`` that covers
    the values (from a multiple of it below the least) in at most ``HISTOGRAM_BINS`` bins."""
    if not seconds:
        return []
    low, high = min(seconds), max(seconds)
    width = BIN_WIDTHS[-1]
    for candidate in BIN_WIDTHS:
        if math.floor(high / candidate) - math.floor(low / candidate) < HISTOGRAM_BINS:
            width = candidate
            break
    first = math.floor(low / width)
    counts = [0] * (math.floor(high / width) - first + 1)
    for value in seconds:
        counts[min(len(counts) - 1, math.floor(value / width) - first)] += 1
    bins = []
    for n, count in enumerate(counts):
        lower, upper = (first + n) * width, (first + n + 1) * width
        bins.append(
            {
                "fromSeconds": lower,
                "toSeconds": upper,
                "label": f"{duration(lower) if lower else '0'}–{duration(upper)}",
                "count": count,
            }
        )
    return bins


def distribution(seconds: list[float]) -> dict[str, Any]:
    """A duration distribution in seconds: count, percentiles, and a histogram."""
    ordered = sorted(seconds)
    return {
        "count": len(ordered),
        **{f"p{p}": _round(percentile(ordered, p, ordered=True)) for p in PERCENTILES},
        "histogram": histogram(ordered),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def metrics(
    board: Board, *, range_key: str | None = None, today: date | None = None
) -> dict[str, Any]:
    """Throughput, lead and cycle time, a cumulative flow, per-agent figures and cost over
    a range (``RANGES``; None: ``range_default``), up to now or the end of ``today``."""
    now = _now(today)
    key = range_key or range_default(board, now)
    win = window(key, now)
    arrivals, before = _arrivals(board, win)
    completed = [counts.get(Status.COMPLETED, 0) for counts in arrivals]
    # Durations were kept when each task completed and each attempt ended: one number a row.
    lead = [
        seconds
        for seconds in Task.objects.filter(
            board=board,
            status=Status.COMPLETED,
            completed_at__gte=win.start,
            completed_at__lt=win.end,
        )
        .order_by()  # (the model's ordering would sort every row for nothing)
        .values_list("lead_seconds", flat=True)
        if seconds is not None
    ]
    completed_attempts = [
        (agent, seconds)
        for agent, seconds in Attempt.objects.filter(
            task__board=board,
            outcome=AttemptOutcome.COMPLETED,
            ended_at__gte=win.start,
            ended_at__lt=win.end,
        )
        .order_by()
        .values_list("agent", "seconds")
        if seconds is not None
    ]
    cycle = [seconds for _, seconds in completed_attempts]
    return {
        "board": board.slug,
        "range": key,
        "bucket": win.unit,
        "from": _iso(win.start),
        "to": _iso(win.end),
        "throughput": [
            {"at": _iso(at), "completed": n} for at, n in zip(win.buckets, completed, strict=True)
        ],
        "leadTimeSeconds": distribution(lead),
        "cycleTimeSeconds": distribution(cycle),
        "cumulativeFlow": _cumulative_flow(win, arrivals, before),
        "agents": _agents(board, win, completed_attempts),
        "labels": _labels(board, win),
        "cost": _cost(board, win),
    }


Tally = dict[str, int]


def _arrivals(board: Board, win: Window) -> tuple[list[Tally], Tally]:
    """Arrivals into each status (and creations) per bucket, and all of them before the
    window: from the flow days for days, from the day's events for minutes and hours."""
    days = FlowDay.objects.filter(board=board)
    arrivals: list[Tally] = [{} for _ in win.buckets]
    start_day = win.start.date()
    before = {
        row["status"]: row["n"]
        for row in days.filter(day__lt=start_day)
        .values("status")
        .order_by()
        .annotate(n=Sum("count"))
    }
    if win.daily:
        for day, status, count in days.filter(
            day__gte=start_day, day__lt=win.end.date()
        ).values_list("day", "status", "count"):
            n = win.index(_midnight(day))
            if n is not None:
                arrivals[n][status] = arrivals[n].get(status, 0) + count
        return arrivals, before
    # The window's day from its midnight: what came before the window that day is "before".
    first, after = first_seq_since(board, _midnight(start_day)), first_seq_since(board, win.end)
    rows = (
        Event.objects.filter(board=board, seq__gte=first, seq__lt=after)
        .order_by()
        .values_list("kind", "data", "created_at")
    )
    for kind, data, at in rows.iterator(chunk_size=2000):
        arrived = "created" if kind == EventKind.CREATED else status_to(data or {})
        if not arrived:
            continue
        n = win.index(at)
        tally = before if n is None else arrivals[n]
        tally[arrived] = tally.get(arrived, 0) + 1
    return arrivals, before


FLOW_KEYS = {"created": "created", "started": Status.IN_PROGRESS, "completed": Status.COMPLETED}


def _cumulative_flow(win: Window, arrivals: list[Tally], before: Tally) -> list[dict[str, Any]]:
    """Cumulative arrivals into created, in progress and completed by the end of each bucket
    (a cumulative flow diagram: the bands between the lines are the work in each state)."""
    totals = {name: before.get(key, 0) for name, key in FLOW_KEYS.items()}
    flow = []
    for at, counts in zip(win.buckets, arrivals, strict=True):
        for name, key in FLOW_KEYS.items():
            totals[name] += counts.get(key, 0)
        flow.append(
            {
                "at": _iso(at),
                **totals,
                "waiting": totals["created"] - totals["started"],
                "inProgress": totals["started"] - totals["completed"],
            }
        )
    return flow


def _agents(board: Board, win: Window, completed: list[tuple[str, float]]) -> list[dict[str, Any]]:
    """Per agent: completed, failed, timed out, median cycle time, success rate, cost."""
    outcomes: dict[str, dict[str, int]] = {}
    rows = (
        Attempt.objects.filter(task__board=board, ended_at__gte=win.start, ended_at__lt=win.end)
        .exclude(agent="")
        .values("agent", "outcome")
        .order_by()
        .annotate(n=Count("id"))
    )
    for row in rows:
        outcomes.setdefault(row["agent"], {})[row["outcome"]] = row["n"]
    cycles: dict[str, list[float]] = {}
    for agent, seconds in completed:
        cycles.setdefault(agent, []).append(seconds)
    spent = {
        row["agent"]: row
        for row in Usage.objects.filter(
            board=board, created_at__gte=win.start, created_at__lt=win.end
        )
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
                "medianCycleSeconds": _round(median(cycles[agent])) if cycles.get(agent) else None,
                "successRate": round(done / finished, 4) if finished else None,
                "costUsd": float(usage.get("cost") or Decimal(0)),
                "inputTokens": usage.get("tokens_in") or 0,
                "outputTokens": usage.get("tokens_out") or 0,
            }
        )
    return result


def _labels(board: Board, win: Window) -> list[dict[str, Any]]:
    """Per label: attempts completed and failed (or timed out) in the window, their median
    cycle time, and what the labelled tasks' reports cost in it."""
    attempts = (
        Attempt.objects.filter(
            task__board=board,
            ended_at__gte=win.start,
            ended_at__lt=win.end,
            task__label_rows__isnull=False,
        )
        .order_by()
        .values_list("task__label_rows__name", "outcome", "seconds")
    )
    rows: dict[str, dict[str, Any]] = {}
    for name, outcome, seconds in attempts:
        row = rows.setdefault(name, {"completed": 0, "failed": 0, "cycles": []})
        if outcome == AttemptOutcome.COMPLETED:
            row["completed"] += 1
            if seconds is not None:
                row["cycles"].append(seconds)
        elif outcome in (AttemptOutcome.FAILED, AttemptOutcome.TIMED_OUT):
            row["failed"] += 1
    labelled: dict[int, list[str]] = {}
    for number, name in Label.objects.filter(board=board, name__in=list(rows)).values_list(
        "task__number", "name"
    ):
        labelled.setdefault(number, []).append(name)
    spent: dict[str, Decimal] = {}
    for number, cost in (
        Usage.objects.filter(
            board=board,
            created_at__gte=win.start,
            created_at__lt=win.end,
            task_number__in=list(labelled),
        )
        .order_by()
        .values_list("task_number", "cost_usd")
    ):
        for name in labelled[number]:
            spent[name] = spent.get(name, Decimal(0)) + cost
    return [
        {
            "label": name,
            "completed": row["completed"],
            "failed": row["failed"],
            "medianCycleSeconds": _round(median(row["cycles"])) if row["cycles"] else None,
            "costUsd": float(spent.get(name, Decimal(0))),
        }
        for name, row in sorted(rows.items())
    ]


def _cost(board: Board, win: Window) -> dict[str, Any]:
    """Cost per bucket and per parent task in the window, and the board's total and budget."""
    usage = Usage.objects.filter(board=board, created_at__gte=win.start, created_at__lt=win.end)
    per_bucket = [Decimal(0) for _ in win.buckets]
    # Grouped here: the window's reports, read through the (board, created_at) index.
    for at, cost in usage.order_by().values_list("created_at", "cost_usd").iterator(2000):
        n = win.index(at)
        if n is not None:
            per_bucket[n] += cost
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
        "perBucket": [
            {"at": _iso(at), "costUsd": float(cost)}
            for at, cost in zip(win.buckets, per_bucket, strict=True)
        ],
        "perParent": [
            {"taskId": str(row["parent_number"]), "costUsd": float(row["cost"])} for row in parents
        ],
    }
