"""Reading any client's tool call as Claude Code's (SPEC §13): one table per client maps
its own tool names and input keys to Claude's, so the gate rules, the roster and the
strip read every client's calls alike; ``HookInput`` checks the normalised event every
adapter's ``normalise`` gives (the door validates it). Pure functions over plain data."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, StringConstraints

from boards.core import limits

URL = re.compile(r"https?://[^\s\"'<>]+")


@dataclass(frozen=True)
class Tool:
    """A client's tool as Claude Code's: Claude's name and, for each of Claude's input
    keys, the client's keys that may carry it (the first present wins)."""

    claude: str
    keys: dict[str, tuple[str, ...]] = field(default_factory=dict)
    url_in: str = ""  # a key whose text holds the URL (Gemini's web_fetch takes a prompt)


SHELL = Tool("Bash", {"command": ("command",), "description": ("description",)})


def claude_call(
    own: str, tool_input: dict[str, Any], table: dict[str, Tool]
) -> tuple[str, dict[str, Any]]:
    """(Claude's tool name, Claude-shaped input) of the client's call ``own``; a tool the
    table does not know keeps its own name and input."""
    tool = table.get(own)
    if tool is None:
        return own, tool_input
    shaped: dict[str, Any] = {}
    for key, sources in tool.keys.items():
        for source in sources:
            if source in tool_input:
                shaped[key] = tool_input[source]
                break
    if tool.url_in and "url" not in shaped:
        found = URL.search(str(tool_input.get(tool.url_in, "")))
        shaped["url"] = found.group(0) if found else ""
    return tool.claude, shaped


def input_object(value: Any) -> dict[str, Any]:
    """A call's input as an object: some clients send it as a JSON string."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return {"input": value}
    return value if isinstance(value, dict) else {}


def normalised(
    body: dict[str, Any], *, events: dict[str, str], tools: dict[str, Tool]
) -> dict[str, Any]:
    """The client's hook input read as Claude Code's: ``hook_event_name`` and
    ``tool_name``/``tool_input`` in Claude's terms, the client's own names kept as
    ``client_event`` and ``client_tool``; other fields pass through as sent."""
    event = dict(body)
    own_event = body.get("hook_event_name")
    if isinstance(own_event, str):
        event["client_event"] = own_event
        event["hook_event_name"] = events.get(own_event, own_event)
    own_tool = body.get("tool_name")
    if isinstance(own_tool, str) and own_tool:
        shaped = input_object(body.get("tool_input"))
        event["client_tool"] = own_tool
        event["tool_name"], event["tool_input"] = claude_call(own_tool, shaped, tools)
    return event


def claude_answer(
    event: dict[str, Any], decision: str | None, reason: str, context: str
) -> dict[str, Any]:
    """Claude Code's hook output (Codex and Qwen Code read the same): a decision on a
    tool call, or context for the model, or nothing."""
    name = event.get("client_event") or event["hook_event_name"]
    if decision is not None:
        return {
            "hookSpecificOutput": {
                "hookEventName": name,
                "permissionDecision": decision,
                "permissionDecisionReason": reason,
            }
        }
    if context:
        return {"hookSpecificOutput": {"hookEventName": name, "additionalContext": context}}
    return {}


class HookInput(BaseModel):
    """A coding client's hook event (Claude Code's hook input, SPEC §11): the fields the
    board reads are checked; whatever else a client version sends is let through."""

    model_config = ConfigDict(extra="allow", strict=True)

    hook_event_name: Annotated[str, StringConstraints(min_length=1, max_length=64)]
    session_id: Annotated[
        str, StringConstraints(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:-]+$")
    ]
    cwd: Annotated[str, StringConstraints(max_length=4096)] = ""
    permission_mode: Annotated[str, StringConstraints(max_length=64)] | None = None
    tool_name: Annotated[str, StringConstraints(max_length=200)] | None = None
    tool_input: dict[str, Any] | None = None
    tool_use_id: Annotated[str, StringConstraints(max_length=128)] | None = None
    duration_ms: int | float | None = None
    prompt: Annotated[str, StringConstraints(max_length=limits.LONG_TEXT_MAX)] | None = None
    message: Annotated[str, StringConstraints(max_length=10_000)] | None = None
    model: str | dict[str, Any] | None = None
    # Set on every event from inside a subagent (its calls are marked with its type).
    agent_id: Annotated[str, StringConstraints(max_length=128)] | None = None
    agent_type: Annotated[str, StringConstraints(max_length=128)] | None = None
