"""A task's panel and the actions on it (``TASK_ACTIONS``, roles in ``permissions.ACTIONS``), and held tool calls."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import HttpResponseClientRedirect

from boards.clients import calls
from boards.core import limits, numbers, permissions, selectors, services
from boards.core.errors import InvalidInput, ServiceError
from boards.core.fields import PANEL
from boards.core.rules import awaits_person
from boards.models import (
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
from boards.needs import decisions
from boards.web.filters import board_filter
from boards.web.rendering import DROP_STATUS, header_context, label_filter_part
from boards.web.views.common import (
    HtmxHttpRequest,
    TaskAction,
    _person,
    board_access,
    tell_asked,
)


def _first_actions(view: selectors.TaskView, role: Role) -> list[dict[str, Any]]:
    """What the task's state asks of a person, most likely first: the panel's first
    controls (an approval asked has its own form, with the note and version)."""
    task = view.task
    actions: list[dict[str, Any]] = []

    def add(
        action: str,
        label: str,
        *,
        blocker: int | None = None,
        danger: bool = False,
        chain: list[int] | None = None,
    ) -> None:
        if permissions.may(role, action):
            actions.append(
                {
                    "action": action,
                    "label": label,
                    "blocker": blocker,
                    "danger": danger,
                    "chain": chain,
                }
            )

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
    if waited_on and permissions.may(role, "cancel-chain"):
        # The person sees what it cancels; the form posts that list back (cancel_chain).
        chain = decisions.chain_to_cancel(task)
        add("cancel-chain", "Cancel it and what waits on it", danger=True, chain=chain)
    if view.stuck:
        for n in view.stuck_on:
            add("unblock", f"Go on without #{n}", blocker=n)
    if task.needs == Reason.NOT_STARTED:
        add("release", "Release to anyone")
    return actions


def _moves(task: Task) -> list[dict[str, str]]:
    """The status moves the panel offers; finishing failed or gated work is confirmed."""
    gated = awaits_person(task)
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
        "text_fields": [
            {"label": f.label, "value": getattr(view.task, f.model), "pre": f.panel == "pre"}
            for f in PANEL
        ],
        # Pairs, not the dict: a key like "items" would shadow the dict's own method.
        "metadata": sorted(view.task.metadata.items()),
        "history": selectors.task_history(board, number),
        "agents": list(Agent.objects.filter(board=board).values_list("name", flat=True)),
        "attempts": selectors.attempts(view.task),
        "readiness": selectors.readiness(board, view.task),
        "priorities": Priority.choices,
        "can": permissions.capabilities(role),
        "labels_text_max": LABELS_TEXT_MAX,
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
        tell_asked(request, response)
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


# What the labels box may hold: ``LABELS_MAX`` labels of ``LABEL_MAX`` characters and
# their separators; anything longer is refused before it is split.
LABELS_TEXT_MAX = limits.LABELS_MAX * (limits.LABEL_MAX + 2)


def _posted_labels(request: HtmxHttpRequest) -> list[str]:
    """The labels a person typed: separated by commas, or by spaces when there is no comma
    (a label may hold a space: "needs review, db"). Empty sets none. Each is checked, and
    their number bounded, by the service (``services.labels``)."""
    typed = request.POST.get("labels", "")
    if len(typed) > LABELS_TEXT_MAX:
        raise InvalidInput(
            f"labels: at most {LABELS_TEXT_MAX} characters (got {len(typed)})", field="labels"
        )
    parts = typed.split(",") if "," in typed else typed.split()
    return [part.strip() for part in parts if part.strip()]


def _posted_chain(request: HtmxHttpRequest) -> list[int]:
    """The tasks the panel showed "cancel the chain" would cancel, as it posts them back."""
    numbers_shown = []
    for part in request.POST.get("chain", "").replace(",", " ").split():
        number = numbers.digits(part, field="chain")
        if number is None:
            raise InvalidInput("chain: task numbers, as the panel lists them", field="chain")
        numbers_shown.append(number)
    return numbers_shown


def _cancel_chain(request: HtmxHttpRequest, board: Board, role: Role, number: int) -> None:
    decisions.cancel_chain(
        board=board,
        person=_person(request),
        task_id=number,
        note=request.POST.get("note", ""),
        approver=permissions.may(role, "approve"),
        shown=_posted_chain(request),
    )


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
    "retry": _decision(decisions.reopen),
    "reopen": _decision(decisions.reopen),
    "skip": _decision(decisions.go_on_without),
    "cancel-chain": _cancel_chain,
    "release": lambda request, board, role, number: decisions.release(
        board=board, person=_person(request), task_id=number, note=request.POST.get("note", "")
    ),
    "priority": _plain(priority=lambda request: request.POST.get("priority")),
    "labels": _plain(labels=_posted_labels),
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
    if action == "cancel-chain" and "chain" not in request.POST:
        # Asked from elsewhere (the inbox, the needs list): the task's panel shows what
        # it would cancel first, and confirms from there.
        page = reverse("task", args=[board.slug, number])
        return HttpResponseClientRedirect(page) if request.htmx else redirect(page)
    TASK_ACTIONS[action](request, board, role, number)
    if action == "delete" or not Task.objects.filter(board=board, number=number).exists():
        if request.htmx:
            done = render(request, "boards/notice.html#muted", {"message": "Task deleted."})
            return tell_asked(request, done)
        return redirect("board", slug=board.slug)
    if request.htmx:
        response = _detail_response(request, board, role, number)
        if action == "labels":
            _add_label_filter(request, board, response)
        return response
    return redirect(reverse("task", args=[board.slug, number]))


def _add_label_filter(request: HtmxHttpRequest, board: Board, response: HttpResponse) -> None:
    """Labels set from the board page: its label filter offers them at once, keeping the
    label it is filtered by (read from the page's address); other open pages get them
    with the card's push (``rendering.header_parts``)."""
    page = urlsplit(request.htmx.current_url or "")
    if page.path != reverse("board", args=[board.slug]):
        return
    chosen = board_filter(QueryDict(page.query))
    response.content += label_filter_part(board, chosen).encode()


# A held call's actions that approve it and allow the same call from now on, by scope.
CALL_FROM_NOW = {"approve-session": "session", "approve-board": "board"}
# A call that ran without the board's verdict: cleared (an approver), or its token revoked
# (an admin's: the tokens page's role).
CALL_CLEARS = {"clear": False, "revoke-token": True}


@require_POST
@board_access("approve", back="board")
def call_decide(
    request: HtmxHttpRequest, board: Board, role: Role, call_id: int, action: str
) -> HttpResponse:
    """Approve or deny a coding client's held tool call; the waiting client hears it at
    once (``calls.tool_call_decide``), with the note as the reason its model reads.
    ``approve-session`` and ``approve-board`` also allow the same call from now on, a
    change to the gate rules (the rules page's role). ``clear`` and ``revoke-token`` end
    the item of a call that ran without the board's verdict (``calls.tool_call_clear``)."""
    from_now = CALL_FROM_NOW.get(action)
    revoke = CALL_CLEARS.get(action)
    if action not in ("approve", "deny") and from_now is None and revoke is None:
        raise Http404("Unknown action")
    if from_now:
        permissions.check(request.user, board, "settings")
    if revoke:
        permissions.check(request.user, board, "tokens")
    if revoke is not None:
        calls.tool_call_clear(
            board=board,
            person=_person(request),
            call_id=call_id,
            revoke=revoke,
            note=request.POST.get("note", ""),
        )
    else:
        calls.tool_call_decide(
            board=board,
            person=_person(request),
            call_id=call_id,
            approve=action != "deny",
            note=request.POST.get("note", ""),
            from_now=from_now or "",
        )
    if request.htmx:
        context = {**header_context(board), "oob": False}
        return render(request, "boards/board.html#needs", context)
    return redirect("board", slug=board.slug)
