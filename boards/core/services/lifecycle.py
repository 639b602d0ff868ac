"""The task life as one state machine: every status change from every door comes here.

TaskUpdate, TaskClaim and claim-next, TaskBatch, the seed dialects, MCP, the
board's buttons and drag and drop, admin actions, approval decisions and deletes
all move a task through the functions below, so each rule is written once:

- ``TRANSITIONS`` lists the status changes that exist at all;
- ``check_status`` holds every precondition of a change (terminal, blocked, the
  approval gate), ``set_status`` applies one;
- ``claim``, ``request_approval`` and ``decide`` are the claim and approval
  paths of SPEC §3.4–3.5, ``check_delete`` and ``check_reassign`` the rest.

Agents and people differ in what binds them: the approval gate binds agents. A
gated task that is not approved cannot be completed, failed or deleted by an
agent, and a denial is final for agents (SPEC §8). Nor can an agent finish a task
that is still blocked (that would release its dependents past an unfinished, perhaps
unapproved, blocker), or change the status of another agent's live work; it may
delete a blocked task, whose dependents then inherit its open blockers
(``tasks._delete``), so nothing is released. Every refusal is a 409 ``Conflict`` whose code names the rule
and whose message names the task.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, NoReturn

from django.conf import settings

from boards.core.errors import Conflict, InvalidInput, PermissionDenied, ServiceError, refuse
from boards.core.rules import awaits_person
from boards.core.selectors import iso
from boards.core.services import costs
from boards.core.services.graph import open_blockers
from boards.core.services.work import Outcome, Work, shown
from boards.core.states import EventKind
from boards.models import (
    TERMINAL_STATUSES,
    Agent,
    ApprovalState,
    Attempt,
    AttemptOutcome,
    Status,
    Task,
)

# Status changes that exist at all; a finished task must be reopened (pending) to start again.
TRANSITIONS: dict[str, frozenset[str]] = {
    Status.PENDING: frozenset(
        {Status.IN_PROGRESS, Status.COMPLETED, Status.FAILED, Status.CANCELLED}
    ),
    Status.IN_PROGRESS: frozenset(
        {Status.PENDING, Status.COMPLETED, Status.FAILED, Status.CANCELLED}
    ),
    Status.COMPLETED: frozenset({Status.PENDING, Status.FAILED, Status.CANCELLED}),
    Status.FAILED: frozenset({Status.PENDING, Status.COMPLETED, Status.CANCELLED}),
    Status.CANCELLED: frozenset({Status.PENDING, Status.COMPLETED, Status.FAILED}),
}
# What an agent may not do to a gated task that no person has approved.
GATED_FOR_AGENTS = frozenset({Status.COMPLETED, Status.FAILED})
# Changing these re-asks an approval: it was given for the task as it was.
APPROVED_CONTENT = frozenset({"subject", "description", "prompt", "metadata"})
# How an attempt ends when its task leaves in progress for this status.
ATTEMPT_ENDS: dict[str, str] = {
    Status.PENDING: AttemptOutcome.RELEASED,
    Status.COMPLETED: AttemptOutcome.COMPLETED,
    Status.FAILED: AttemptOutcome.FAILED,
    Status.CANCELLED: AttemptOutcome.CANCELLED,
}
# A blocker entering or leaving these changes how its dependents look (blocked, stuck).
DEPENDENTS_SEE = frozenset({Status.COMPLETED, Status.FAILED, Status.CANCELLED})
# Outcomes that count against the board's maxAttempts.
FAILED_OUTCOMES = frozenset({AttemptOutcome.FAILED, AttemptOutcome.TIMED_OUT})


def _check_not_blocked(task: Task) -> None:
    blockers = open_blockers(task)
    if blockers:
        raise refuse("blocked", number=task.number, blockedBy=[str(n) for n in blockers])


def _check_agent_may(work: Work, task: Task, action: str) -> None:
    """What binds agents beyond the gate, for a status change or ``"deleted"``: another
    agent's live work is not theirs to move, and a blocked task is finished only once its
    blockers are: completing it would release its dependents while a blocker, maybe one
    waiting for a person's approval, is still open. Deleting it is allowed: its
    dependents inherit its open blockers (``tasks._delete``)."""
    if work.person:
        return
    holder = _live_holder(work, task)
    if holder:
        raise refuse("held_by_another", number=task.number, owner=holder)
    if action not in TERMINAL_STATUSES:
        return
    blockers = open_blockers(task)
    if not blockers:
        return
    # A blocker waiting for a person is named as such: the agent then knows who to wait for.
    gated = (
        Task.objects.filter(board=work.board, number__in=blockers, approval_required=True)
        .exclude(approval_state=ApprovalState.APPROVED)
        .exclude(status__in=TERMINAL_STATUSES)
        .order_by("number")
        .first()
    )
    if gated is not None:
        raise _approval_required(task, gated)
    raise refuse("blocked", number=task.number, blockedBy=[str(n) for n in blockers])


def _live_holder(work: Work, task: Task) -> str:
    """The agent whose live work ``task`` is, when it is not the caller's to touch (empty
    otherwise): in progress under another agent with its lease running, for a caller that
    is not a person, not an orchestrator's token, and not the token that agent belongs to."""
    holder = task.owner
    if work.person or work.grant.orchestrator:
        return ""
    if task.status != Status.IN_PROGRESS or not holder or holder == work.actor:
        return ""
    if task.lease_expires_at is not None and task.lease_expires_at <= work.now:
        return ""  # its lease lapsed: nobody is working on it any more
    holder_token = (
        Agent.objects.filter(board=work.board, name=holder).values_list("token_id", flat=True)
    ).first()
    if work.grant.token_id is not None and holder_token == work.grant.token_id:
        return ""
    return holder


def _check_gate(work: Work, task: Task, action: str) -> None:
    """The approval gate: it binds agents; and finishing a gated task that no one has
    approved is a decision on it, for people who may decide (approvers).
    ``action`` is a status or ``"deleted"``."""
    if work.person:
        if action in TERMINAL_STATUSES and awaits_person(task) and not work.approver:
            raise _approval_required(task, task)
        return
    if task.approval_state == ApprovalState.DENIED:
        raise refuse(
            "approval_denied",
            number=task.number,
            decidedBy=task.approval_decided_by,
            note=f": {task.approval_note}" if task.approval_note else "",
        )
    if awaits_person(task) and (action in GATED_FOR_AGENTS or action == "deleted"):
        _check_approved(task)


def check_unlink(work: Work, task: Task, blocker: Task) -> None:
    """Going on without ``blocker`` releases ``task``: not an agent's call while the
    blocker waits for a person's approval (the gate would be walked around), nor a
    person's who may not decide approvals."""
    if work.approver or blocker.status in TERMINAL_STATUSES or not awaits_person(blocker):
        return
    raise _approval_required(task, blocker)


def _approval_required(task: Task, gated: Task) -> ServiceError:
    """``task`` waits for a person's decision on ``gated`` (itself, or a blocker)."""
    return refuse(
        "approval_required",
        number=task.number,
        blocker=str(gated.number),
        approval=gated.approval_state,
    )


def _check_approved(task: Task) -> NoReturn:
    """A gated task goes on only once a person approved it: refused while its request
    waits (``awaiting_approval``) or before anyone asked (``approval_required``)."""
    if task.approval_state == ApprovalState.REQUESTED:
        raise refuse(
            "awaiting_approval", number=task.number, requestedBy=task.approval_requested_by
        )
    raise _approval_required(task, task)


def _check_may_start(task: Task) -> None:
    """In progress needs: no unfinished blocker, and an approval when the task is gated."""
    _check_not_blocked(task)
    if awaits_person(task):
        _check_approved(task)


def check_status(work: Work, task: Task, status: str) -> None:
    """Every precondition of moving ``task`` to ``status`` by the unit of work's actor."""
    if status not in TRANSITIONS:
        raise InvalidInput(f"status: unknown status {status[:40]!r}", field="status")
    if status not in TRANSITIONS[task.status]:
        raise refuse("terminal", number=task.number, status=task.status)
    _check_gate(work, task, status)
    _check_agent_may(work, task, status)
    if status == Status.IN_PROGRESS:
        _check_may_start(task)
        if not work.person:
            costs.check_budget(work.board)


def set_status(work: Work, task: Task, status: str) -> dict[str, Any]:
    """Move ``task`` to ``status`` (unsaved; the caller stores it with its other changes).

    Returns the diff entries: the status, and the approval it clears on a reopen.
    """
    check_status(work, task, status)
    work.restatused.add(task.number)
    dependents = work.status_changed(task)
    if {status, task.status} & DEPENDENTS_SEE:
        # Dependents show unfinished blockers, and which ones failed: their cards change too.
        work.touched.update(dependents)
    diff: dict[str, Any] = {"status": {"from": task.status, "to": status}}
    reopened = task.status in TERMINAL_STATUSES and status not in TERMINAL_STATUSES
    if work.person and status == Status.PENDING:
        task.failures = 0  # a person's retry: the task gets its attempts back
        if reopened:
            diff.update(_hand_back(task))
    task.status = status
    task.completed_at = work.now if status in TERMINAL_STATUSES else None
    task.lead_seconds = (
        (work.now - task.created_at).total_seconds() if status == Status.COMPLETED else None
    )
    if reopened:
        diff.update(_clear_approval(work, task, "reopened"))
    return diff


def _hand_back(task: Task) -> dict[str, Any]:
    """A person's retry or reopen of finished work: it goes back to any agent, unowned
    and without a result; the attempts keep who tried and what each gave (the last
    attempt takes the result when it has none of its own, e.g. a result written after it
    ended; a result no attempt can hold stays on the task). Agents retrying their own
    work keep it."""
    diff: dict[str, Any] = {}
    if task.owner:
        diff["owner"] = {"from": task.owner, "to": ""}
        task.owner = ""
    if task.result:
        last = Attempt.objects.filter(task=task).order_by("-n").first()
        if last is None or last.result not in ("", task.result):
            return diff
        if not last.result:
            Attempt.objects.filter(pk=last.pk).update(result=task.result)
        diff["result"] = {"from": shown(task.result), "to": ""}
        task.result = ""
    return diff


def _clear_approval(work: Work, task: Task, why: str) -> dict[str, Any]:
    """Forget a decision: it was for the task as it was, so the next claim asks again."""
    if task.approval_state not in (ApprovalState.APPROVED, ApprovalState.DENIED):
        return {}
    before = task.approval_state
    task.approval_state = ApprovalState.NONE
    work.record(EventKind.APPROVAL_CLEARED, task.number, reason=why, version=task.version + 1)
    return {"approval": {"from": before, "to": ApprovalState.NONE}}


def content_changed(work: Work, task: Task, fields: set[str]) -> dict[str, Any]:
    """A change to the content a person approves (subject, description, prompt,
    metadata) undoes the approval, and cancels a request still waiting: the person
    would decide on something they never saw. The agent must ask again."""
    changed = sorted(fields & APPROVED_CONTENT)
    if not changed:
        return {}
    why = ", ".join(changed) + " changed"
    if task.approval_state == ApprovalState.REQUESTED:
        task.approval_state = ApprovalState.NONE
        work.record(
            EventKind.APPROVAL_CANCELLED,
            task.number,
            reason=why,
            requestedBy=task.approval_requested_by,
            version=task.version + 1,
        )
        return {"approval": {"from": ApprovalState.REQUESTED, "to": ApprovalState.NONE}}
    if task.approval_state == ApprovalState.APPROVED:
        return _clear_approval(work, task, why)
    return {}


def check_delete(work: Work, task: Task) -> None:
    _check_gate(work, task, "deleted")
    _check_agent_may(work, task, "deleted")


def check_takeover(work: Work, task: Task, owner: str) -> None:
    """Taking in-progress work from a live agent is for people, for the token that agent
    belongs to, and for orchestrators' tokens; any other agent is refused (403)."""
    if owner == task.owner:
        return
    holder = _live_holder(work, task)
    if not holder:
        return
    raise PermissionDenied(
        f"Task #{task.number} is in progress under {holder}, whose lease is live; only a "
        "person, an orchestrator's token or the token it belongs to can take it over",
        code="not_your_task",
    )


def hand_over(work: Work, task: Task, owner: str) -> dict[str, Any]:
    """In-progress work given to ``owner``: its attempt ends (``reassigned``) with its
    lease, and the task waits, pending, for the new owner to start it; the old owner's
    next write is refused (``lease_lost``). Returns the diff."""
    old = task.owner
    work.status_changed(task)
    work.restatused.add(task.number)
    task.owner, task.status = owner, Status.PENDING
    task.lease_lost_by = old if old != owner else ""
    settle(work, task, Status.IN_PROGRESS, old, outcome=AttemptOutcome.REASSIGNED)
    return {
        "owner": {"from": old, "to": owner},
        "status": {"from": Status.IN_PROGRESS, "to": Status.PENDING},
    }


def check_reassign(work: Work, task: Task) -> None:
    """A new owner is for work that can still be done: not finished, not blocked."""
    if task.status in TERMINAL_STATUSES:
        raise refuse("terminal", number=task.number, status=task.status)
    _check_not_blocked(task)


def _start(work: Work, task: Task, owner: str) -> dict[str, Any]:
    work.status_changed(task)
    diff = {
        "owner": {"from": task.owner, "to": owner},
        "status": {"from": task.status, "to": Status.IN_PROGRESS},
    }
    task.owner = owner
    task.status = Status.IN_PROGRESS
    return diff


def claim(work: Work, task: Task, *, lease_seconds: int | None = None) -> Outcome:
    """The work's actor (an agent) takes ``task`` and starts it, or asks for its approval.

    Refused when the task is finished, owned by someone else, blocked, or awaits
    another agent's approval request. Claiming one's own in-progress task again
    changes nothing.
    """
    agent = work.actor
    if task.status in TERMINAL_STATUSES:
        raise refuse("terminal", number=task.number, status=task.status)
    if task.owner and task.owner != agent:
        raise refuse("owned", number=task.number, owner=task.owner)
    _check_not_blocked(task)
    if task.owner == agent and task.status == Status.IN_PROGRESS:
        return Outcome(task.number, [])
    costs.check_budget(work.board)
    if awaits_person(task):
        if task.approval_state == ApprovalState.REQUESTED:
            if task.approval_requested_by != agent:
                _check_approved(task)
            return Outcome(task.number, [], awaiting_approval=True)
        _check_gate(work, task, Status.IN_PROGRESS)  # a denied task stays denied
        # The lease the claim asked for, kept for when a person approves it.
        task.lease_seconds = lease_seconds
        request_approval(work, task, "claimed; waiting for approval before starting")
        return Outcome(task.number, work.changes, awaiting_approval=True)
    was_status, was_owner = task.status, task.owner
    fields = _start(work, task, agent)
    settle(work, task, was_status, was_owner, lease_seconds=lease_seconds)
    work.save_task(task, EventKind.CLAIMED, fields=fields)
    return Outcome(task.number, work.changes)


def request_approval(work: Work, task: Task, reason: str) -> None:
    """Record the actor's request for a person's approval of ``task``."""
    if task.status in TERMINAL_STATUSES:
        raise refuse("terminal", number=task.number, status=task.status)
    if task.approval_state == ApprovalState.REQUESTED and task.approval_requested_by != work.actor:
        _check_approved(task)
    task.approval_state = ApprovalState.REQUESTED
    task.approval_requested_by = work.actor
    task.approval_requested_at = work.now
    task.approval_reason = reason
    task.approval_decided_by = ""
    task.approval_decided_at = None
    task.approval_note = ""
    task.approval_version = None
    work.save_task(
        task,
        EventKind.APPROVAL_REQUESTED,
        change="approval_requested",
        reason=shown(reason),
        version=task.version + 1,
    )


def decide(work: Work, task: Task, *, approve: bool, note: str, version: int | None = None) -> None:
    """A person's decision on a pending request.

    ``version`` is the task version the person saw: a decision on a task that has
    changed since is refused (they would decide on something they did not read).
    Approving lets the requester's claim go through (owner + in progress) when the
    task can start; denying cancels the task with the note.
    """
    if task.approval_state != ApprovalState.REQUESTED or task.status in TERMINAL_STATUSES:
        raise refuse("not_awaiting_approval", number=task.number)
    if version is not None and version != task.version:
        raise refuse("stale_version", number=task.number, version=task.version, seen=version)
    requester = task.approval_requested_by
    task.approval_state = ApprovalState.APPROVED if approve else ApprovalState.DENIED
    task.approval_decided_by = work.actor
    task.approval_decided_at = work.now
    task.approval_note = note
    task.approval_version = task.version + 1  # the version this save gives the task
    fields: dict[str, Any] = {"requestedBy": requester}
    was_status, was_owner = task.status, task.owner
    if approve:
        starts = (
            task.status == Status.PENDING
            and task.owner in ("", requester)
            and not open_blockers(task)
        )
        if starts:
            fields.update(_start(work, task, requester))
    else:
        fields["status"] = {"from": task.status, "to": Status.CANCELLED}
        work.touched.update(work.status_changed(task))  # its dependents are stuck now
        task.status = Status.CANCELLED
        task.completed_at = work.now
    settle(work, task, was_status, was_owner, lease_seconds=task.lease_seconds)
    kind = EventKind.APPROVED if approve else EventKind.DENIED
    work.save_task(task, kind, change=kind, note=note, fields=fields, version=task.approval_version)


# -- leases and attempts --------------------------------------------------------------


def lease_length(work: Work, requested: int | None = None) -> int:
    """The claim's ``leaseSeconds``, else the board's setting, else the server's default."""
    return int(requested or work.board.lease_seconds or settings.KANBAN_LEASE_SECONDS)


def _lease(work: Work, task: Task, seconds: int | None) -> None:
    task.lease_seconds = lease_length(work, seconds)
    task.lease_expires_at = work.now + timedelta(seconds=task.lease_seconds)


def settle(
    work: Work,
    task: Task,
    was_status: str,
    was_owner: str,
    *,
    lease_seconds: int | None = None,
    outcome: str | None = None,
) -> None:
    """Attempts and leases follow the task's status and owner (call before saving it).

    Entering in progress, or a new owner while in progress, starts an attempt (and
    a lease when someone owns it); leaving in progress, or losing its owner, ends
    the attempt with the outcome the new status means (or ``outcome``).
    """
    running_before = was_status == Status.IN_PROGRESS
    running_now = task.status == Status.IN_PROGRESS
    owner_changed = task.owner != was_owner
    if running_before and (not running_now or owner_changed):
        ended = outcome or (ATTEMPT_ENDS[task.status] if not running_now else "reassigned")
        _end_attempt(work, task, ended)
    if running_now and (not running_before or owner_changed):
        # Whoever comes to hold in-progress work, by any path, is held to the limits.
        check_wip(work, task.owner, entering=not running_before)
        task.attempts += 1
        Attempt.objects.create(task=task, n=task.attempts, agent=task.owner, started_at=work.now)
        task.started_at = work.now
        if task.owner and task.owner == task.lease_lost_by:
            task.lease_lost_by = ""  # it claimed the work again: its writes count again
    if task.status != Status.PENDING or not task.owner:
        task.assigned_at = None  # started, finished or released: no longer "not started"
    if running_now and task.owner:
        if not running_before or owner_changed or task.lease_expires_at is None:
            _lease(work, task, lease_seconds)
    else:
        task.lease_expires_at = None
        task.lease_seconds = None


def _end_attempt(work: Work, task: Task, outcome: str) -> None:
    running = Attempt.objects.filter(task=task, n=task.attempts, ended_at=None)
    started = running.values_list("started_at", flat=True).first()
    running.update(
        ended_at=work.now,
        outcome=outcome,
        result=task.result,
        notes=task.notes,
        seconds=(work.now - started).total_seconds() if started else None,
    )
    if outcome in FAILED_OUTCOMES:
        task.failures += 1  # at the board's maxAttempts a person decides (rules.needs_of)


def check_lease(work: Work, task: Task) -> None:
    """An agent whose lease on ``task`` lapsed may not write to it until it claims it again."""
    if work.person:
        return
    lapsed_now = (
        task.status == Status.IN_PROGRESS
        and task.owner == work.actor
        and task.lease_expires_at is not None
        and task.lease_expires_at <= work.now
    )
    lost = bool(task.lease_lost_by) and task.lease_lost_by == work.actor
    if lost and task.owner and task.owner != work.actor:
        raise Conflict(
            f"Task #{task.number} is no longer yours: it was reassigned to {task.owner}; "
            "leave it to them",
            code="lease_lost",
            details={"owner": task.owner},
        )
    if lapsed_now or lost:
        raise Conflict(
            f"Task #{task.number} is no longer yours: your lease lapsed (no tool call for "
            f"{task.lease_seconds or lease_length(work)} s) and the task went back to pending; "
            "claim it again with TaskClaim if it still needs doing",
            code="lease_lost",
            details={"owner": task.owner or None},
        )


def check_wip(work: Work, agent: str, *, entering: bool = True) -> None:
    """The board's work-in-progress limits, per agent and in all (None: no limit).

    ``agent`` (empty: nobody) is about to hold one more task in progress;
    ``entering``: the task is entering in progress (not changing hands in it).
    """
    board = work.board
    per_agent = board.max_in_progress_per_agent if agent else None
    overall = board.max_in_progress if entering else None
    if per_agent is None and overall is None:
        return
    running = Task.objects.filter(board=board, status=Status.IN_PROGRESS)
    if per_agent is not None:
        held = list(running.filter(owner=agent).order_by("number").values_list("number", flat=True))
        if len(held) >= per_agent:
            raise Conflict(
                f"{agent} already has {len(held)} task(s) in progress "
                f"({', '.join(f'#{n}' for n in held)}); this board allows {per_agent} per agent",
                code="wip_limit",
                details={"limit": per_agent, "scope": "agent", "held": [str(n) for n in held]},
            )
    if overall is not None:
        count = running.count()
        if count >= overall:
            raise Conflict(
                f"The board has {count} task(s) in progress; it allows {overall} at once",
                code="wip_limit",
                details={"limit": overall, "scope": "board", "inProgress": count},
            )


def reclaim(work: Work, task: Task) -> None:
    """The lease on ``task`` lapsed: back to pending, unowned; the attempt timed out."""
    owner, expired = task.owner, task.lease_expires_at
    task.lease_lost_by = owner
    task.owner = ""
    work.status_changed(task)
    task.status = Status.PENDING
    settle(work, task, Status.IN_PROGRESS, owner, outcome=AttemptOutcome.TIMED_OUT)
    work.restatused.add(task.number)
    work.save_task(
        task,
        EventKind.RECLAIMED,
        change="reclaimed",
        owner=owner,
        leaseExpiredAt=iso(expired),
        fields={
            "status": {"from": Status.IN_PROGRESS, "to": Status.PENDING},
            "owner": {"from": owner, "to": ""},
        },
    )
