"""The board as HTML: the page's context, its header, and the fragments pushed to open boards.

The same partials (``boards/board.html#card`` …) render the full page, the htmx
answers and the WebSocket pushes, so a card looks the same whichever way it
arrives.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.template.loader import render_to_string

from . import clients, selectors
from .filters import BoardFilter
from .models import Board, Event, Label, Status, Task

COLUMN_TITLES = {
    "pending": "Pending",
    "in_progress": "In progress",
    "blocked": "Blocked",
    "completed": "Completed",
}
# Where a card dropped on a column goes (Blocked is derived, so it is no drop target).
DROP_STATUS = {
    "pending": Status.PENDING,
    "in_progress": Status.IN_PROGRESS,
    "completed": Status.COMPLETED,
}


def stale_agents(roster: list[dict[str, Any]]) -> dict[str, str]:
    """Agents holding in-progress work while silent or gone, and which: their cards say so."""
    return {row["name"]: row["state"] for row in roster if row["stale"]}


def board_context(board: Board, chosen: BoardFilter | None = None) -> dict[str, Any]:
    """Everything the full board page shows: each column's first cards, exact counts.

    The cost does not grow with the board's history: columns are pages
    (``selectors.COLUMN_PAGE``) with a "show more", counts come from the header's
    grouped queries. With filters ``chosen`` (the search box and the filters), each
    column holds only the cards they keep and its count says how many of how many.
    """
    filters = chosen.filter if chosen else None
    # The sequence is read before the tasks, so the page is at least as new as it says.
    seq = Board.objects.filter(pk=board.pk).values_list("last_seq", flat=True).get()
    header = header_context(board)
    shown = filtered_counts(board, filters) if filters else {}
    columns = []
    shown_owners: set[str] = set()
    for col in header["columns"]:
        views, more = selectors.column_page(board, col["key"], filters=filters)
        shown_owners.update(v.task.owner for v in views if v.task.owner)
        columns.append(
            {
                **col,
                "views": views,
                "more": more,
                "shown": shown.get(col["key"], 0),
                "filtered": bool(filters),
            }
        )
    roster = header["roster"]
    return {
        **header,
        "oob": False,
        "seq": seq,
        "columns": columns,
        "stale": stale_agents(roster),
        "owners": sorted(shown_owners | {r["name"] for r in roster}),
        "labels": list(
            Label.objects.filter(board=board)
            .order_by("name")
            .values_list("name", flat=True)
            .distinct()
        ),
        "filter": chosen,
    }


def filtered_counts(board: Board, filters: selectors.TaskFilter) -> dict[str, int]:
    """Each column's cards that ``filters`` keep."""
    return selectors.filtered_column_counts(filters.apply(Task.objects.filter(board=board)))


def filtered_count_parts(board: Board, filters: selectors.TaskFilter) -> dict[str, str]:
    """The columns' counts as a filtered board shows them ("12 of 2,001"), by element id:
    a socket with filters sends these instead of the board's own."""
    shown = filtered_counts(board, filters)
    columns = header_columns(selectors.board_counts(board))
    return {
        f"count-{col['key']}": render_to_string(
            "boards/board.html#count",
            {"oob": True, "col": {**col, "shown": shown[col["key"]], "filtered": True}},
        )
        for col in columns
    }


def _holds(key: str, counts: dict[str, int]) -> str:
    """What a column's count is made of, when it mixes kinds ("17 done, 1 failed")."""
    if key == "completed":
        parts = [f"{counts['completed']} done"]
        parts += [f"{counts[k]} {k}" for k in ("failed", "cancelled") if counts[k]]
        return ", ".join(parts) if len(parts) > 1 else ""
    if key == "blocked" and counts["stuck"]:
        return f"{counts['stuck']} stuck"
    return ""


def header_context(board: Board) -> dict[str, Any]:
    """The header's parts (summary, counts, approvals, roster) without loading the tasks."""
    counts = selectors.board_counts(board)
    total = sum(
        counts[k] for k in ("pending", "blocked", "in_progress", "completed", "failed", "cancelled")
    )
    roster = selectors.roster(board)
    sessions = {row["name"]: row["session"] for row in roster if row["session"] is not None}
    return {
        "board": board,
        "counts": counts,
        "total": total,
        "done": counts["completed"],
        "columns": header_columns(counts),
        "needs": selectors.needs_you([board]),
        "sent": selectors.sent_messages(board),
        "roster": roster,
        "doing": clients.doing_by_agent(sessions),
        "oob": True,
    }


def header_columns(counts: dict[str, int]) -> list[dict[str, Any]]:
    column_counts = {
        "pending": counts["pending"],
        "in_progress": counts["in_progress"],
        "blocked": counts["blocked"],
        "completed": counts["completed"] + counts["failed"] + counts["cancelled"],
    }
    return [
        {
            "key": key,
            "title": title,
            "count": column_counts[key],
            "holds": _holds(key, counts),
            # A column a person should look at first (a phone opens on it).
            "problem": (key == "completed" and counts["failed"] > 0)
            or (key == "blocked" and counts["stuck"] > 0),
        }
        for key, title in COLUMN_TITLES.items()
    ]


def header_parts(context: dict[str, Any]) -> dict[str, str]:
    """The board's header pieces by element id, each pushed only when it changed."""
    parts: dict[str, str] = {
        "board-summary": render_to_string("boards/board.html#summary", context),
        "needs": render_to_string("boards/board.html#needs", context),
        "sent-messages": render_to_string("boards/board.html#sent-messages", context),
        "roster": render_to_string("boards/roster.html", context),
    }
    for col in context["columns"]:
        parts[f"count-{col['key']}"] = render_to_string(
            "boards/board.html#count", {**context, "col": col}
        )
    return parts


def board_fragments(
    board_id: int,
    numbers: Iterable[int],
    *,
    full: bool = False,
    header: bool = True,
    chosen: BoardFilter | None = None,
) -> dict[str, Any]:
    """Fragments that bring an open board up to date for the given task numbers.

    Each card fragment deletes the card wherever it is and appends the new
    rendering to the column it belongs in now (the page keeps each column in
    number order), so applying it twice or out of place is harmless.
    """
    board = Board.objects.get(pk=board_id)
    if full:
        page = board_context(board, chosen)
        page["oob"] = True
        body = render_to_string("boards/board.html#board-body", page)
        return {"seq": page["seq"], "full": body, "cards": {}, "header": {}}
    seq = board.last_seq
    numbers = sorted(set(numbers))
    views = selectors.task_views(board, numbers, with_children=False)
    # Without a header re-render, cards carry no stale mark: the page sets it from the roster.
    context = header_context(board) if header else None
    stale = stale_agents(context["roster"]) if context else {}
    running = any(v.task.status == Status.IN_PROGRESS for v in views.values())
    doing = (
        context["doing"]
        if context
        else clients.doing_by_agent(clients.live_sessions(board))
        if running
        else {}
    )
    cards: dict[str, str] = {}
    for number in numbers:
        html = f'<div id="task-{number}" hx-swap-oob="delete"></div>'
        view = views.get(number)
        if view is not None:
            card = render_to_string(
                "boards/board.html#card",
                {"board": board, "view": view, "stale": stale, "doing": doing},
            )
            html += f'<template hx-swap-oob="beforeend:#cards-{view.column}">{card}</template>'
        cards[str(number)] = html
    return {
        "seq": seq,
        "cards": cards,
        "header": header_parts(context) if context else {},
        "full": None,
    }


def inbox_context(items: list[selectors.Item]) -> dict[str, Any]:
    """The inbox page's list (``permissions.inbox``), grouped by board: oldest first
    within each, boards by their oldest item."""
    groups: dict[Board, list[Any]] = {}
    for item in items:
        groups.setdefault(item.board, []).append(item)
    return {"count": len(items), "inbox_count": len(items), "groups": list(groups.items())}


def inbox_parts(items: list[selectors.Item], user: Any, *, count_only: bool = False) -> str:
    """What a push of the person's inbox replaces: every page's count and the items to
    notify about (``notify.js``: those of the kinds they chose on each board), and unless
    ``count_only`` the inbox page's list."""
    notify = selectors.to_notify(items, selectors.notify_choices(user))
    context = {**inbox_context(items), "notify": notify, "oob": True}
    parts = ["inbox-count", "inbox-notify"] if count_only else ["inbox-list", "inbox-count"]
    if not count_only:
        parts.append("inbox-notify")
    return "".join(render_to_string(f"boards/inbox.html#{part}", context) for part in parts)


def activity_push(board: Board, rows: list[Event], resume: str) -> str:
    """A push of the activity page's socket: ``rows`` (newest first) on top of the feed,
    with the page's own row partial, and ``resume``, the socket address after them."""
    context = {"board": board, "events": rows, "resume": resume}
    return render_to_string("boards/activity.html#push", context)
