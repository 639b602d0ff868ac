"""The public JSON shapes of tasks and their parts, as every answer of the tool API gives them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from boards.core.fields import TASK_FIELDS
from boards.core.selectors.tasks import TaskView, view_parent_number
from boards.models import ApprovalState, Attempt, Status, Task


def iso(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.isoformat().replace("+00:00", "Z")


def approval_to_dict(task: Task) -> dict:
    return {
        "required": task.approval_required,
        "state": task.approval_state,
        "requestedBy": task.approval_requested_by or None,
        "requestedAt": iso(task.approval_requested_at),
        "reason": task.approval_reason or None,
        "decidedBy": task.approval_decided_by or None,
        "decidedAt": iso(task.approval_decided_at),
        "note": task.approval_note or None,
        "version": task.approval_version,
    }


def task_to_dict(view: TaskView, *, with_children: bool = False) -> dict:
    """The one public shape of a task, used by every answer of the tool API."""
    task = view.task
    data: dict[str, Any] = {f.wire: getattr(task, f.model) for f in TASK_FIELDS}
    data |= {
        "id": str(task.number),
        "status": task.status,
        "blocked": view.blocked,
        "createdBy": task.created_by,
        "blockedBy": [str(n) for n in view.blocked_by],
        "blocks": [str(n) for n in view.blocks],
        "parentId": str(view_parent_number(task)) if task.parent_id else None,
        "metadata": task.metadata,
        "approval": approval_to_dict(task),
        "priority": task.get_priority_display(),
        "labels": view.labels,
        "stuck": view.stuck,
        "stuckOn": [str(n) for n in view.stuck_on] if view.stuck else [],
        "attempt": task.attempts,
        "lease": {"expiresAt": iso(task.lease_expires_at)} if task.lease_expires_at else None,
        "needsAttention": view.needs_attention is not None,
        "attention": view.needs_attention,
        "needs": task.needs or None,
        "usage": usage_dict(task),
        "version": task.version,
        "createdAt": iso(task.created_at),
        "updatedAt": iso(task.updated_at),
        "completedAt": iso(task.completed_at),
        "session": task.session or None,
        "clientTaskId": task.client_task_id or None,
    }
    if with_children:
        data["children"] = [str(n) for n in view.children]
    if view.depth is not None:
        data["depth"] = view.depth
    return data


def usage_dict(row: Task | Attempt) -> dict[str, Any]:
    """Tokens and cost reported on a task or an attempt, summed."""
    return {
        "inputTokens": row.input_tokens,
        "outputTokens": row.output_tokens,
        "costUsd": float(row.cost_usd),
    }


def task_summary(view: TaskView) -> dict[str, Any]:
    """A task as lists show it: what an agent needs to choose work, not its full text."""
    task = view.task
    data: dict[str, Any] = {
        "id": str(task.number),
        "subject": task.subject,
        "status": task.status,
        "blocked": view.blocked,
        "owner": task.owner,
        "blockedBy": [str(n) for n in view.open_blockers] if view.blocked else [],
    }
    if task.status == Status.IN_PROGRESS and task.active_form:
        data["activeForm"] = task.active_form
    if task.parent_id:
        data["parentId"] = str(view_parent_number(task))
    if task.approval_required or task.approval_state != ApprovalState.NONE:
        data["approval"] = task.approval_state
    if task.priority != 2:
        data["priority"] = task.get_priority_display()
    if view.labels:
        data["labels"] = view.labels
    if view.stuck:
        data["stuckOn"] = [str(n) for n in view.stuck_on]
    if view.needs_attention:
        data["needsAttention"] = True
    if view.depth is not None:
        data["depth"] = view.depth
    if task.client_task_id:
        data["session"], data["clientTaskId"] = task.session, task.client_task_id
    return data


STATUS_MARKS: dict[str, str] = {
    Status.PENDING: " ",
    Status.IN_PROGRESS: ">",
    Status.COMPLETED: "x",
    Status.FAILED: "!",
    Status.CANCELLED: "-",
}


def tasks_as_text(views: list[TaskView], matches: dict[int, str] | None = None) -> str:
    """Seed 004's compact rendering: ``#2. [ ] Write tests  blocked by: #1`` (a search's
    lines end with where the task matched: ``  match: …``)."""
    lines = []
    for v in views:
        indent = "  " * (v.depth or 0)
        line = f"{indent}#{v.number}. [{STATUS_MARKS[v.task.status]}] {v.task.subject}"
        if v.task.owner:
            line += f"  @{v.task.owner}"
        if v.blocked:
            line += "  blocked by: " + ", ".join(f"#{n}" for n in v.open_blockers)
        elif v.task.status in (Status.FAILED, Status.CANCELLED):
            line += f"  ({v.task.status})"
        if v.task.approval_state == ApprovalState.REQUESTED:
            line += "  (awaiting approval)"
        if matches and matches.get(v.number):
            line += "  match: " + " ".join(matches[v.number].split())
        lines.append(line)
    return "\n".join(lines)


def attempts(task: Task) -> list[dict[str, Any]]:
    """Every attempt at the task, oldest first, as TaskGet answers them."""
    return [
        {
            "n": a.n,
            "agent": a.agent or None,
            "startedAt": iso(a.started_at),
            "endedAt": iso(a.ended_at),
            "outcome": a.outcome or None,
            "result": a.result or None,
            "notes": a.notes or None,
            "usage": usage_dict(a),
        }
        for a in Attempt.objects.filter(task=task).order_by("n")
    ]
