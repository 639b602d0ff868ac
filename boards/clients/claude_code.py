"""Claude Code (SPEC §11): its hooks, their input and the answers it obeys."""

from __future__ import annotations

import hashlib
from typing import Any

from boards.clients import actions
from boards.core.services import PlanStep

EVENTS = (
    "SessionStart",
    "UserPromptSubmit",
    "PreToolUse",
    "PreSkillShellCommand",
    "PostToolUse",
    "PostToolUseFailure",
    "PostToolBatch",
    "PermissionDenied",
    "Notification",
    "SubagentStart",
    "SubagentStop",
    "TaskCreated",
    "TaskCompleted",
    "Stop",
    "StopFailure",
    "SessionEnd",
)
# ``WorktreeCreate`` is never subscribed: a hook on it takes over worktree creation.

# The events that need a verdict or may be refused: a command (``kanban-hook``), which
# blocks while the board cannot be reached (an http hook would give no verdict). The
# rest are http hooks, which cost the client no process. SessionStart reaches only
# command hooks (Claude Code 2.1).
COMMAND_EVENTS = ("SessionStart", "PreToolUse", "PreSkillShellCommand", "TaskCompleted")
HTTP_HOOK_EVENTS = tuple(e for e in EVENTS if e not in COMMAND_EVENTS)
TOOL_EVENTS = frozenset({"PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionDenied"})
QUICK_HOOK_SECONDS = 10
# Sessions sharing one task list are one plan: the http hooks send the list's name.
TASK_LIST_HEADER = "X-Kanban-Task-List"
TASK_LIST_ENV = "CLAUDE_CODE_TASK_LIST_ID"


def normalise(body: dict[str, Any]) -> dict[str, Any]:
    """Claude Code's input is the board's own vocabulary: its tool is its own name. A
    skill's shell line (``PreSkillShellCommand``) is a shell call like any other."""
    return actions.normalised(body, events={"PreSkillShellCommand": "PreToolUse"}, tools={})


def answer(
    event: dict[str, Any], decision: str | None, reason: str, context: str
) -> dict[str, Any]:
    """Claude Code's hook output; a refused task completion is a block with its reason."""
    if event.get("hook_event_name") == "TaskCompleted":
        return {"decision": "block", "reason": reason} if decision == "deny" else {}
    return actions.claude_answer(event, decision, reason, context)


def claude_settings(
    hook_url: str, longest_wait: int, forwarder: str = "kanban-hook"
) -> dict[str, Any]:
    """The ``.claude/settings.json`` a person copies from the Connect page (SPEC §11).

    A tool call, a skill's shell line and a task's completion go through ``kanban-hook``
    (a command hook): it blocks them (exit 2) when the board cannot be reached, where an
    http hook would give no verdict and let the client's own permissions run it. It
    waits a little longer than the board's longest rule, and the client a little longer
    than it, so the board always answers first. Everything else is an http hook that
    never blocks and costs the client no process (SPEC §11, at little cost). The token
    and agent name come from the environment (``KANBAN_TOKEN``, ``KANBAN_AGENT``), never
    the file; the board's hook URL is set for the session (``"env"``), with the client's
    task tools on, so the session's plan reaches the board; ``kanban-hook`` sends the
    token only to the board it names (or to one ``agent-kanban connect`` configured).
    ``forwarder`` is how the command is started (``python3 -I -S /path/forwarder.py``
    starts in a fraction of the console script's time).
    """
    held = longest_wait + 30

    def command(seconds: int) -> dict[str, Any]:
        return {
            "type": "command",
            "command": f"{forwarder} --url {hook_url} --timeout {seconds} --client claude-code",
            "timeout": seconds + 30,
        }

    http = {
        "type": "http",
        "url": hook_url,
        "headers": {
            "Authorization": "Bearer $KANBAN_TOKEN",
            "X-Agent": "$KANBAN_AGENT",
            TASK_LIST_HEADER: f"${TASK_LIST_ENV}",
        },
        "allowedEnvVars": ["KANBAN_TOKEN", "KANBAN_AGENT", TASK_LIST_ENV],
        "timeout": QUICK_HOOK_SECONDS,
    }
    hooks: dict[str, list[dict[str, Any]]] = {
        "SessionStart": [{"hooks": [command(QUICK_HOOK_SECONDS)]}],
        "PreToolUse": [{"matcher": "*", "hooks": [command(held)]}],
        "PreSkillShellCommand": [{"hooks": [command(held)]}],
        "TaskCompleted": [{"hooks": [command(QUICK_HOOK_SECONDS)]}],
    }
    for event in HTTP_HOOK_EVENTS:
        entry: dict[str, Any] = {"hooks": [http]}
        if event in TOOL_EVENTS:
            entry = {"matcher": "*", **entry}
        hooks[event] = [entry]
    env = {"KANBAN_HOOK_URL": hook_url, "CLAUDE_CODE_ENABLE_TODO_TOOLS": "1"}
    return {"env": env, "hooks": hooks}


# -- the session's own plan (SPEC §11) ----------------------------------------------------


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _maybe(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _ids(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        return ()
    return tuple(str(v)[:128] for v in value[:50] if isinstance(v, str | int))


def plan_steps(event: dict[str, Any]) -> list[PlanStep]:
    """What one event says of the session's own tasks: TaskCreate and TaskUpdate (their
    ``PostToolUse``), ``TaskCreated``, and a ``TodoWrite`` list (its items have no id: an
    item is named by its text)."""
    name = event.get("client_event") or event["hook_event_name"]
    if name in ("TaskCreated", "TaskCompleted"):
        return [
            PlanStep(
                str(event.get("task_id") or "")[:128],
                subject=_text(event.get("task_subject")),
                description=_maybe(event.get("task_description")),
            )
        ]
    if name != "PostToolUse":
        return []
    tool = event.get("tool_name")
    given = event.get("tool_input") or {}
    response = event.get("tool_response")
    if not isinstance(response, dict):
        return []
    if tool == "TaskCreate":
        task = response.get("task")
        if not isinstance(task, dict):
            return []
        return [
            PlanStep(
                str(task.get("id") or "")[:128],
                subject=_text(task.get("subject")) or _text(given.get("subject")),
                description=_maybe(task.get("description")),
                active_form=_maybe(given.get("activeForm")),
                blocked_by=_ids(given.get("blockedBy")),
            )
        ]
    if tool == "TaskUpdate":
        if response.get("success") is False:
            return []
        change = response.get("statusChange")
        status = change.get("to") if isinstance(change, dict) else given.get("status")
        return [
            PlanStep(
                str(response.get("taskId") or given.get("taskId") or "")[:128],
                subject=_text(given.get("subject")),
                description=_maybe(given.get("description")),
                active_form=_maybe(given.get("activeForm")),
                status=_maybe(status),
                blocked_by=_ids(given.get("addBlockedBy")),
            )
        ]
    if tool == "TodoWrite":
        todos = response.get("newTodos")
        steps = []
        for todo in todos[:100] if isinstance(todos, list) else ():
            content = _text(todo.get("content")) if isinstance(todo, dict) else ""
            if content.strip():
                digest = hashlib.sha256(content.strip().encode()).hexdigest()[:24]
                steps.append(
                    PlanStep(
                        f"todo-{digest}",
                        subject=content.strip(),
                        active_form=_maybe(todo.get("activeForm")),
                        status=_maybe(todo.get("status")),
                    )
                )
        return steps
    return []
