"""Seeing the work: the activity feed and notifications, the graph and the metrics."""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils.cache import add_never_cache_headers
from django.views.decorators.http import require_GET, require_POST

from boards.core import metrics, numbers, permissions, selectors
from boards.core.errors import InvalidInput
from boards.models import Board, Role
from boards.web import charts
from boards.web.filters import activity_filters
from boards.web.views.common import HtmxHttpRequest, board_access
from boards.webhooks import subscriptions


@require_GET
@board_access("activity")
def activity(request: HtmxHttpRequest, board: Board, role: Role) -> HttpResponse:
    """The board's event log, newest first, filtered and paged; live on the page.

    ``?after=<seq>`` (htmx) answers only the rows newer than that, oldest first: what the
    page's socket pushes (``consumers.ActivityConsumer``), for a client without one.
    """
    filters = activity_filters(request.GET)
    after, before = (
        numbers.digits(request.GET.get(name, ""), field=name, max_digits=numbers.SEQ_DIGITS)
        for name in ("after", "before")
    )
    if after is not None:
        rows = selectors.activity_page(board, after=after, **filters)
        rows.reverse()
        return render(request, "boards/activity.html#rows", {"board": board, "events": rows})
    rows = selectors.activity_page(board, before=before, **filters)
    top = rows[0].seq if rows and before is None else board.last_seq
    # The page's socket (``consumers.ActivityConsumer``) pushes the rows after ``top``
    # that these filters keep.
    live = request.GET.copy()
    for name in ("after", "before"):
        live.pop(name, None)
    live["after"] = str(top)
    context = {
        "board": board,
        "events": rows,
        "filters": filters,
        "query": request.GET.urlencode(),
        "more": rows[-1].seq if len(rows) == selectors.ACTIVITY_PAGE else None,
        "live_query": live.urlencode(),
        "actors": selectors.activity_actors(board),
        "kinds": selectors.ACTIVITY_KINDS,
    }
    if request.htmx and before is not None:
        return render(request, "boards/activity.html#page", context)
    return render(request, "boards/activity.html", context)


@require_POST
@board_access("notify")
def notify_post(request: HtmxHttpRequest, board: Board, role: Role) -> HttpResponse:
    """Which kinds of change notify this person on this board (stored for them)."""
    kinds = subscriptions.subscription_set(
        board=board, user=request.user, kinds=request.POST.getlist("kinds")
    )
    if request.htmx:
        response = HttpResponse(
            '<span role="status">Saved.</span>', headers={"X-Notify-Kinds": ",".join(kinds)}
        )
        return response
    return redirect("board", slug=board.slug)


def _graph_scope(request: HtmxHttpRequest) -> tuple[str, int | None]:
    task = request.GET.get("task", "")
    if task.strip():
        number = numbers.id_number(task, field="task")
        if number is None:
            raise InvalidInput("task: a task number", field="task")
        return "task", number
    return request.GET.get("scope", "open"), None


@require_GET
@board_access("view")
def graph_page(request: HtmxHttpRequest, board: Board, role: Role) -> HttpResponse:
    """The dependency graph, laid out in the browser (static/graph.js) from graph.json."""
    scope, around = _graph_scope(request)
    context = {
        "board": board,
        "scope": scope,
        "around": around,
        "seq": board.last_seq,
        "can": permissions.capabilities(role),
    }
    return render(request, "boards/graph.html", context)


@require_GET
@board_access("view", as_json=True)
def graph_json(request: HtmxHttpRequest, board: Board, role: Role) -> HttpResponse:
    """``?scope=open|all`` or ``?task=<n>``: nodes, edges and the critical path as JSON."""
    scope, around = _graph_scope(request)
    data = selectors.graph(board, scope, around)
    response = JsonResponse(data, json_dumps_params={"ensure_ascii": False})
    add_never_cache_headers(response)
    return response


def _metrics_context(board: Board) -> dict[str, Any]:
    return {"board": board, "ranges": metrics.RANGES}


@require_GET
@board_access("view", page="boards/metrics.html", page_context=_metrics_context)
def metrics_page(request: HtmxHttpRequest, board: Board, role: Role) -> HttpResponse:
    """Flow metrics and cost over a range, as charts with their numbers in tables
    (boards.core.metrics); the query is read by the same form as the JSON API's (a
    query it refuses is the page again, saying why, with the ranges to choose from)."""
    context = _metrics_context(board)
    range_key, today = metrics.metrics_query(request.GET)
    data = metrics.metrics(board, range_key=range_key, today=today)
    win = metrics.window_of(data)
    labels = [win.label(at) for at in win.buckets]
    flow = data["cumulativeFlow"]
    context |= {
        "m": data,
        "range": data["range"],
        "range_name": metrics.RANGES[data["range"]],
        "bucket_label": {"minute": "minute", "hour": "hour", "day": "day"}[data["bucket"]],
        "period": f"{win.label(win.start)} to {win.label(win.end - win.step if win.daily else win.end)}"
        + ("" if win.daily else f" on {win.start.date().isoformat()}"),
        "rows": [
            {
                "label": label,
                "completed": t["completed"],
                "cost": metrics.money(c["costUsd"]),
                **f,
            }
            for label, t, c, f in zip(
                labels, data["throughput"], data["cost"]["perBucket"], flow, strict=True
            )
        ],
        "lead": _times(data["leadTimeSeconds"]),
        "cycle": _times(data["cycleTimeSeconds"]),
        "agents": [
            {
                **a,
                "median": metrics.duration(a["medianCycleSeconds"]),
                "cost": metrics.money(a["costUsd"]),
            }
            for a in data["agents"]
        ],
        "labels": [
            {
                **row,
                "median": metrics.duration(row["medianCycleSeconds"]),
                "cost": metrics.money(row["costUsd"]),
            }
            for row in data["labels"]
        ],
        "total": metrics.money(data["cost"]["totalUsd"]),
        "budget": metrics.money(data["cost"]["budgetUsd"])
        if data["cost"]["budgetUsd"] is not None
        else None,
        "parents": [
            {"taskId": p["taskId"], "cost": metrics.money(p["costUsd"])}
            for p in data["cost"]["perParent"]
        ],
        "throughput_chart": charts.bars(labels, [t["completed"] for t in data["throughput"]]),
        "cost_chart": charts.bars(
            labels, [c["costUsd"] for c in data["cost"]["perBucket"]], metrics.money
        ),
        "lead_chart": _histogram_chart(data["leadTimeSeconds"]),
        "cycle_chart": _histogram_chart(data["cycleTimeSeconds"]),
        "flow_chart": charts.bands(
            labels,
            {
                "waiting": [f["created"] for f in flow],
                "in-progress": [f["started"] for f in flow],
                "completed": [f["completed"] for f in flow],
            },
        ),
    }
    return render(request, "boards/metrics.html", context)


def _times(dist: dict[str, Any]) -> dict[str, Any]:
    """A duration distribution's percentiles in words."""
    return {"count": dist["count"], **{p: metrics.duration(dist[p]) for p in ("p50", "p85", "p95")}}


def _histogram_chart(dist: dict[str, Any]) -> dict[str, Any]:
    bins = dist["histogram"]
    return charts.bars([b["label"] for b in bins], [b["count"] for b in bins])
