"""A task's panel and the actions on it (``TASK_ACTIONS``, roles in ``permissions.ACTIONS``), and held tool calls."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET, require_POST

from .. import numbers, permissions, selectors, services
from ..errors import InvalidInput, ServiceError
from ..models import (
    TERMINAL_STATUSES,
    Agent,
    ApprovalState,
    Board,
    Priority,
    Reason,
    Role,
    Status,
    Task,
)
from ..rendering import (
    DROP_STATUS,
    header_context,
)
from .common import HtmxHttpRequest, TaskAction, _person, board_access


def _first_actions(view: selectors.TaskView, role: Role) -> list[dict[str, Any]]:
    """What the task's state asks of a person, most likely first: the panel's first
    controls (an approval asked has its own form, with the note and version)."""
    task = view.task
    actions: list[dict[str, Any]] = []

    def add(action: str, label: str, *, blocker: int | None = None, danger: bool = False) -> None:
        if permissions.may(role, action):
            actions.append({"action": action, "label": label, "blocker": blocker, "danger": danger})

    waited_on = (
        task.status in (Status.FAILED, Status.CANCELLED)
        and Task.objects.filter(blocker_links__blocker=task).unfinished().exists()
    )
    if task.status == Status.FAILED or task.needs == Reason.FAILED:
        add("retry", "Retry")
    if waited_on:
        add("skip", "Go on without it")
    if task.status == Status.CANCELLED:
        add("reopen", "Reopen")
    if waited_on:
        add("cancel-chain", "Cancel it and what waits on it", danger=True)
    if view.stuck:
        for n in view.stuck_on:
            add("unblock", f"Go on without #{n}", blocker=n)
    if task.needs == Reason.NOT_STARTED:
        add("release", "Release to anyone")
    return actions


def _moves(task: Task) -> list[dict[str, str]]:
    """The status moves the panel offers; finishing failed or gated work is confirmed."""
    gated = task.approval_required and task.approval_state != ApprovalState.APPROVED
    moves = []
    for status in Status:
        if status == task.status:
            continue
        confirm = ""
        if status in TERMINAL_STATUSES and task.status == Status.FAILED:
            confirm = (
                f"#{task.number} failed. Mark it {status.label.lower()} anyway? "
                "What waits on it goes on as if it had."
                if status == Status.COMPLETED
                else f"#{task.number} failed. Mark it {status.label.lower()}?"
            )
        elif status in TERMINAL_STATUSES and gated:
            confirm = (
                f"#{task.number} waits for a person's approval. Mark it "
                f"{status.label.lower()} without deciding it?"
                if task.approval_state == ApprovalState.REQUESTED
                else f"#{task.number} needs a person's approval and has none. Mark it "
                f"{status.label.lower()} anyway?"
            )
        moves.append({"value": status.value, "label": status.label, "confirm": confirm})
    return moves


def _detail_context(board: Board, number: int, role: Role) -> dict[str, Any]:
    view = selectors.task_view(board, number)  # a missing task: refused, 404
    asked = view.task.approval_state == ApprovalState.REQUESTED and not view.task.is_terminal
    return {
        "board": board,
        "view": view,
        "task": view.task,
        "asked": asked,
        "first_actions": _first_actions(view, role),
        "moves": _moves(view.task),
        # Pairs, not the dict: a key like "items" would shadow the dict's own method.
        "metadata": sorted(view.task.metadata.items()),
        "history": selectors.task_history(board, number),
        "agents": list(Agent.objects.filter(board=board).values_list("name", flat=True)),
        "attempts": selectors.attempts(view.task),
        "readiness": selectors.readiness(board, view.task),
        "priorities": Priority.choices,
        "can": permissions.capabilities(role),
    }


def _detail_response(
    request: HtmxHttpRequest,
    board: Board,
    role: Role,
    number: int,
    *,
    status: int = 200,
    error: str = "",
) -> HttpResponse:
    context = _detail_context(board, number, role)
    context["error"] = error
    if request.htmx:
        response = render(request, "boards/task_detail.html#panel", context, status=status)
    else:
        response = render(request, "boards/task_detail.html", context, status=status)
    patch_vary_headers(response, ["HX-Request"])
    return response


@require_GET
@board_access("view")
def task_detail(request: HtmxHttpRequest, board: Board, role: Role, number: int) -> HttpResponse:
    return _detail_response(request, board, role, number)


def _posted_version(value: str | None) -> int | None:
    """The task version a decision was made on (None: the form did not say)."""
    if value is None or value == "":
        return None
    version = numbers.digits(value, field="version")
    if version is None:
        raise InvalidInput("version: the task's version as a whole number", field="version")
    return version


def _posted_status(request: HtmxHttpRequest) -> str:
    """The status a person moves a task to (a column's name from a drop, or a status)."""
    status = request.POST.get("status", "")
    status = DROP_STATUS.get(status, status)
    if status not in Status.values:
        # Deleting has its own confirmed action; a status post never deletes.
        raise InvalidInput(f"status: unknown status {status[:40]!r}", field="status")
    return status


def _decide(approve: bool) -> TaskAction:
    def act(request: HtmxHttpRequest, board: Board, role: Role, number: int) -> object:
        return services.approval_decide(
            board=board,
            person=_person(request),
            task_id=number,
            approve=approve,
            note=request.POST.get("note", ""),
            version=_posted_version(request.POST.get("version")),
        )

    return act


def _act_message(request: HtmxHttpRequest, board: Board, role: Role, number: int) -> None:
    task = Task.objects.filter(board=board, number=number).first()
    recipient = request.POST.get("recipient", "") or (task.owner if task else "")
    services.message_send(
        board=board,
        sender=_person(request),
        recipient=recipient,
        body=request.POST.get("body", "") or request.POST.get("note", ""),
        task_id=number,
    )


def _decision(service: Callable[..., Any]) -> TaskAction:
    """A decision on what needs a person: the service, with the posted note for the agent
    concerned (SPEC §12) and whether this person may decide approvals."""

    def act(request: HtmxHttpRequest, board: Board, role: Role, number: int) -> None:
        service(
            board=board,
            person=_person(request),
            task_id=number,
            note=request.POST.get("note", ""),
            approver=permissions.may(role, "approve"),
        )

    return act


def _plain(**fields: Callable[[HtmxHttpRequest], Any]) -> TaskAction:
    """A task_update by a person, each field read from the request."""

    def act(request: HtmxHttpRequest, board: Board, role: Role, number: int) -> None:
        values = {name: read(request) for name, read in fields.items()}
        services.task_update(
            board=board,
            actor=_person(request),
            person=True,
            approver=permissions.may(role, "approve"),
            task_id=number,
            **values,
        )

    return act


# Each task action (``permissions.ACTIONS`` says who may take it) and what it does.
TASK_ACTIONS: dict[str, TaskAction] = {
    "status": _plain(status=_posted_status),
    "reassign": lambda request, board, role, number: services.task_reassign(
        board=board,
        actor=_person(request),
        person=True,
        task_id=number,
        owner=request.POST.get("owner", ""),
    ),
    "delete": lambda request, board, role, number: services.task_delete(
        board=board, actor=_person(request), person=True, task_id=number
    ),
    "approve": _decide(True),
    "deny": _decide(False),
    "require-approval": lambda request, board, role, number: services.approval_require(
        board=board,
        person=_person(request),
        task_id=number,
        required=request.POST.get("required", "") in ("1", "true", "on"),
    ),
    # A person's retry or reopen: back to pending with its attempts counted afresh.
    "retry": _decision(services.reopen),
    "reopen": _decision(services.reopen),
    "skip": _decision(services.go_on_without),
    "cancel-chain": _decision(services.cancel_chain),
    "release": lambda request, board, role, number: services.release(
        board=board, person=_person(request), task_id=number, note=request.POST.get("note", "")
    ),
    "priority": _plain(priority=lambda request: request.POST.get("priority")),
    # Going on without a blocker (e.g. one that failed) is a person's decision.
    "unblock": _plain(remove_blocked_by=lambda request: [request.POST.get("blocker", "")]),
    "message": _act_message,
}


def _refused_panel(
    request: HtmxHttpRequest,
    exc: ServiceError,
    board: Board,
    role: Role,
    number: int,
    action: str = "",
) -> HttpResponse | None:
    """A refused action on a task that is still there: to htmx, its panel again, saying
    why (the person stays where they acted); else the plain refusal."""
    if action == "delete" or not Task.objects.filter(board=board, number=number).exists():
        return None
    return _detail_response(request, board, role, number, status=exc.status, error=exc.message)


@require_POST
@board_access("view", back="board", fragment=_refused_panel)
def task_action(
    request: HtmxHttpRequest, board: Board, role: Role, number: int, action: str
) -> HttpResponse:
    if action not in TASK_ACTIONS:
        raise Http404("Unknown action")
    if not permissions.may(role, action):
        raise permissions.refusal(role, action)
    TASK_ACTIONS[action](request, board, role, number)
    if action == "delete" or not Task.objects.filter(board=board, number=number).exists():
        if request.htmx:
            return HttpResponse('<p class="muted">Task deleted.</p>')
        return redirect("board", slug=board.slug)
    if request.htmx:
        return _detail_response(request, board, role, number)
    return redirect(reverse("task", args=[board.slug, number]))


@require_POST
@board_access("approve", back="board")
def call_decide(
    request: HtmxHttpRequest, board: Board, role: Role, call_id: int, action: str
) -> HttpResponse:
    """Approve or deny a coding client's held tool call; the waiting client hears it at
    once (``services.tool_call_decide``), with the note as the reason its model reads."""
    if action not in ("approve", "deny"):
        raise Http404("Unknown action")
    services.tool_call_decide(
        board=board,
        person=_person(request),
        call_id=call_id,
        approve=action == "approve",
        note=request.POST.get("note", ""),
    )
    if request.htmx:
        context = {**header_context(board), "oob": False}
        return render(request, "boards/board.html#needs", context)
    return redirect("board", slug=board.slug)
