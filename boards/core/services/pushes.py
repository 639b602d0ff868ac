"""Pushes in the event log (SPEC §14): what was pushed to people's devices, withdrawn from
them, and decided through a push's one-time link.

Sending is ``boards.push``'s (above the core); it records here what it did, one event
per item however many devices were told, in one unit of work on the board. An item is
named as pushes name it: ``task-3@7`` (a task's number and version), ``call-12`` (a held
tool call), ``session-4`` (a client session).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from boards.core.services.work import Work, shown, unit_of_work
from boards.core.states import EventKind
from boards.models import Board, ClientSession, ToolCall


@dataclass(frozen=True)
class Sent:
    """How one item's pushes went: to how many devices the push services took it, how
    many refused it."""

    devices: int = 0
    failed: int = 0


def item_facts(board: Board, key: str) -> tuple[int | None, dict[str, Any]]:
    """The task number an item's event is filed under, and what names the item in it."""
    kind, _, rest = key.partition("-")
    ident = rest.partition("@")[0]
    facts: dict[str, Any] = {"item": key}
    if not ident.isdigit():
        return None, facts
    if kind == "task":
        return int(ident), facts
    if kind == "call":
        call = (
            ToolCall.objects.filter(board=board, pk=int(ident))
            .only("agent", "tool_name", "summary")
            .first()
        )
        if call is not None:
            facts.update(agent=call.agent, tool=call.tool_name, summary=shown(call.summary))
    elif kind == "session":
        agent = (
            ClientSession.objects.filter(board=board, pk=int(ident))
            .values_list("agent", flat=True)
            .first()
        )
        if agent:
            facts["agent"] = agent
    return None, facts


def record_item(work: Work, kind: str, key: str, **data: Any) -> None:
    """Record ``kind`` about the item ``key`` (filed under its task, if it is one)."""
    number, facts = item_facts(work.board, key)
    work.record(kind, number, **facts, **data)
    if number is not None:
        # A push changes no card: nothing to re-render or recount.
        work.touched.discard(number)


def _sent(sent: Sent) -> dict[str, int]:
    return {"devices": sent.devices, **({"failed": sent.failed} if sent.failed else {})}


def pushes_record(
    *,
    board: Board,
    pushed: Mapping[str, Sent],
    again: Mapping[str, Sent],
    withdrawn: Mapping[str, Sent],
) -> None:
    """Record one ``pushed`` event per item pushed (``again``: pushed once more, its links
    lapsed) and one ``push_withdrawn`` per item taken back, each with its devices' count.
    Nothing when nothing was sent."""
    if not (pushed or again or withdrawn):
        return
    with unit_of_work(board, "") as work:
        for key, sent in pushed.items():
            record_item(work, EventKind.PUSHED, key, **_sent(sent))
        for key, sent in again.items():
            record_item(work, EventKind.PUSHED, key, again=True, **_sent(sent))
        for key, sent in withdrawn.items():
            record_item(work, EventKind.PUSH_WITHDRAWN, key, **_sent(sent))


def push_acted_record(*, board: Board, person: str, key: str, action: str) -> None:
    """Record that ``person`` decided an item (``approve`` or ``deny``) through a push's
    link: the decision's own event says what was decided, this one how."""
    with unit_of_work(board, person, person=True) as work:
        record_item(work, EventKind.PUSH_ACTED, key, action=action)
