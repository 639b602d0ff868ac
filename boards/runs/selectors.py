"""Reads of runners (SPEC §16): each runner's presence as the API and the roster show it,
and a command's state as its sender reads it. One shape each, built here."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.utils import timezone

from boards.core.errors import NotFound
from boards.core.selectors.present import iso
from boards.models import Board, CommandState, Runner, RunnerCommand
from boards.runs.services import offline_after, stale_why


def runner_online(runner: Runner, now: datetime | None = None) -> bool:
    """Online: said hello or polled within two poll periods, and not found gone since."""
    now = now or timezone.now()
    return runner.connected and runner.last_seen >= now - offline_after()


def runner_to_dict(runner: Runner, now: datetime | None = None) -> dict[str, Any]:
    """A runner as ``GET /api/boards/<slug>/runners`` gives it: its repositories by name
    (their paths stay on its machine)."""
    return {
        "name": runner.name,
        "host": runner.host,
        "version": runner.version,
        "state": "online" if runner_online(runner, now) else "offline",
        "seenAt": iso(runner.last_seen),
        "clients": [
            {
                "client": c.get("client", ""),
                "version": c.get("version", ""),
                "gate": bool(c.get("gate")),
                "why": c.get("why", ""),
            }
            for c in runner.clients
        ],
        "repos": [
            {"name": r.get("name", ""), "id": r.get("id", ""), "branch": r.get("branch", "")}
            for r in runner.repos
        ],
        "sessions": {"running": runner.running, "max": runner.max_sessions},
    }


def runner_list(board: Board) -> list[dict[str, Any]]:
    """Every runner of the board, online first, then by name."""
    now = timezone.now()
    rows = [runner_to_dict(r, now) for r in Runner.objects.filter(board=board).order_by("name")]
    return sorted(rows, key=lambda row: row["state"] != "online")


def command_state(command: RunnerCommand) -> str:
    """A command's state as read now: a queued one past its TTL reads as stale before any
    poll has marked it so."""
    if command.state == CommandState.QUEUED and command.expires_at <= timezone.now():
        return CommandState.STALE
    return str(command.state)


def command_to_dict(command: RunnerCommand) -> dict[str, Any]:
    state = command_state(command)
    answer = command.answer
    if state == CommandState.STALE and not answer:
        answer = {"why": stale_why(command)}
    return {
        "id": command.pk,
        "runner": command.runner.name,
        "kind": command.kind,
        "state": state,
        "sentAt": iso(command.sent_at),
        "deliveredAt": iso(command.delivered_at),
        "answeredAt": iso(command.answered_at),
        "answer": answer,
    }


def command_get(board: Board, runner: str, command_id: int) -> RunnerCommand:
    """A command sent to the board's runner ``runner`` (404 when there is none)."""
    found = (
        RunnerCommand.objects.select_related("runner")
        .filter(runner__board=board, runner__name=runner, pk=command_id)
        .first()
    )
    if found is None:
        raise NotFound(
            f"No command {command_id} for runner {runner[:64]!r}", code="command_not_found"
        )
    return found
