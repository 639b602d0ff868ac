"""The board as HTML: the page's context, its header, and the fragments pushed to open boards.

The same partials (``boards/board.html#card`` …) render the full page, the htmx
answers and the WebSocket pushes, so a card looks the same whichever way it
arrives.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.template.loader import render_to_string

from boards.core import selectors
from boards.models import Board, Event, Label, Status, Task
from boards.needs import reads
from boards.runs import selectors as runs
from boards.web.filters import BoardFilter

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


def origin(session: Any) -> str:
    """Which client on which machine a session is ("codex on build-box")."""
    client = getattr(session, "client", "") or ""
    host = getattr(session, "host", "") or ""
    return f"{client} on {host}" if client and host else client or host


def doing_by_agent(sessions: dict[str, Any]) -> dict[str, str]:
    """What each agent's live session is doing, after the client and machine doing it,
    for its cards ("codex on build-box · rm -rf dist")."""
    doing = selectors.doing_by_agent(sessions)
    return {
        name: " · ".join(part for part in (origin(sessions[name]), now) if part)
        for name, now in doing.items()
    }


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
                "numbers": [v.number for v in views],
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
        "labels": board_labels(board),
        "filter": chosen,
    }


def board_labels(board: Board) -> list[str]:
    """The labels the board's tasks carry, by name (the label filter's choices)."""
    return list(
        Label.objects.filter(board=board).order_by("name").values_list("name", flat=True).distinct()
    )


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
        "needs": reads.needs_you([board]),
        "sent": selectors.sent_messages(board),
        "roster": roster,
        "runners": runs.runner_list(board),
        "doing": doing_by_agent(sessions),
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
    # Labels set by anyone reach every open page's filter (a socket sends it only when
    # it changed; a filtered one renders it with its own choice: ``label_filter_part``).
    parts["label-filter"] = label_filter_part(context["board"], None)
    return parts


def label_filter_part(board: Board, chosen: BoardFilter | None) -> str:
    """The label filter's choices as a push replaces them, keeping the page's choice."""
    context = {"labels": board_labels(board), "filter": chosen, "oob": True}
    return render_to_string("boards/board.html#label-filter", context)


def board_fragments(
    board_id: int,
    numbers: Iterable[int],
    *,
    full: bool = False,
    header: bool = True,
    chosen: BoardFilter | None = None,
) -> dict[str, Any]:
    """Fragments that bring an open board up to date for the given task numbers.

    Each card fragment deletes the card wherever it is and places the new rendering
    in the column it belongs in now, in the column's order, so applying it twice or out
    of place is harmless. With them go each column's first page (``column_pages``): the
    cards that joined it, and its numbers, past which the page trims what it holds.
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
        else doing_by_agent(selectors.live_sessions(board))
        if running
        else {}
    )
    # A push with no card (the roster, a lease renewal) moves no card between columns:
    # its pages would only name cards whose own pushes may still be on their way.
    pages, edge = column_pages(board, numbers) if numbers else ({}, set())
    if edge:
        views.update(selectors.task_views(board, sorted(edge), with_children=False))
    cards: dict[str, str] = {}
    for number in [*numbers, *sorted(edge)]:
        view = views.get(number)
        if view is None:
            cards[str(number)] = card_gone(number)
        else:
            cards[str(number)] = render_to_string(
                "boards/push.html#card",
                {"board": board, "view": view, "stale": stale, "doing": doing, "number": number},
            )
    return {
        "seq": seq,
        "cards": cards,
        "header": {**(header_parts(context) if context else {}), **page_parts(board, pages)},
        "full": None,
    }


def column_pages(
    board: Board, changed: list[int]
) -> tuple[dict[str, tuple[list[int], str | None]], set[int]]:
    """Each column's first page (its numbers and the cursor for more), as a reload shows
    it, and the cards that may have joined one because ``changed`` cards left it.

    Cards other than ``changed`` keep their order, so those that joined a page are at its
    end, and no more of them than changed cards that left it, at most those not on it now:
    that many of each page's last unchanged cards are sent again (placing a card already
    shown changes nothing)."""
    pages = {key: selectors.column_numbers(board, key) for key in COLUMN_TITLES}
    moved = set(changed)
    edge: set[int] = set()
    for page, _ in pages.values():
        left = len(moved - set(page))
        kept = [n for n in page if n not in moved]
        edge.update(kept[-left:] if left else [])
    return pages, edge


def page_parts(board: Board, pages: dict[str, tuple[list[int], str | None]]) -> dict[str, str]:
    """What an open page keeps of each column (``app.js`` trims the rest) and its "Show
    more", by element id."""
    parts: dict[str, str] = {}
    for key, (page, more) in pages.items():
        col = {"key": key, "numbers": page, "more": more}
        context = {"board": board, "col": col, "oob": True, "filter": None}
        parts[f"page-{key}"] = render_to_string("boards/board.html#page", context)
        parts[f"more-{key}"] = render_to_string("boards/board.html#more", context)
    return parts


def card_gone(number: int | str) -> str:
    """A push taking card ``number`` off the page."""
    return render_to_string("boards/push.html#gone", {"number": number})


def push_marker(seq: int, events: list[dict]) -> str:
    """What opens every push of the board's socket: the sequence the page shows now and
    exactly this push's events (for the page's announcer and notifications)."""
    return render_to_string("boards/push.html#marker", {"seq": seq, "events": events})


def inbox_context(items: list[reads.Item], count: int | None = None) -> dict[str, Any]:
    """The inbox page's list (``inbox_items``), grouped by board: oldest first
    within each, boards by their oldest item; ``count`` is how many wait in all (each
    board's list is limited, the count is exact)."""
    groups: dict[Board, list[Any]] = {}
    for item in items:
        groups.setdefault(item.board, []).append(item)
    count = len(items) if count is None else count
    return {"count": count, "inbox_count": count, "groups": list(groups.items())}


def inbox_parts(
    items: list[reads.Item], user: Any, *, count_only: bool = False, count: int | None = None
) -> str:
    """What a push of the person's inbox replaces: every page's count and the items to
    notify about (``notify.js``: those of the kinds they chose on each board), and unless
    ``count_only`` the inbox page's list."""
    notify = reads.to_notify(items, selectors.notify_choices(user))
    context = {**inbox_context(items, count), "notify": notify, "oob": True}
    parts = ["inbox-count", "inbox-notify"] if count_only else ["inbox-list", "inbox-count"]
    if not count_only:
        parts.append("inbox-notify")
    return "".join(render_to_string(f"boards/inbox.html#{part}", context) for part in parts)


def activity_push(board: Board, rows: list[Event], resume: str) -> str:
    """A push of the activity page's socket: ``rows`` (newest first) on top of the feed,
    with the page's own row partial, and ``resume``, the socket address after them."""
    context = {"board": board, "events": rows, "resume": resume}
    return render_to_string("boards/activity.html#push", context)


def render_update(
    board_id: int,
    numbers: Iterable[int],
    *,
    full: bool = False,
    header: bool = True,
    chosen: BoardFilter | None = None,
) -> dict:
    """Render the fragments that bring a browser's board up to date for ``numbers`` (a
    full re-render keeps to the filters ``chosen``)."""
    fragments = board_fragments(board_id, numbers, full=full, header=header, chosen=chosen)
    return {"type": "board.update", **fragments}
