"""The hook door as the tests call it: one hook event posted with a token
(``post_hook``), and the reason of a deny read from the client's own answer shape
(``denied``)."""

from __future__ import annotations

import json
from typing import Any

from django.test import Client


def post_hook(
    client: str, token: str, body: Any, *, slug: str = "team", **headers: str
) -> tuple[int, Any]:
    """POST ``body`` (a JSON value, or bytes and text as they are) to ``client``'s hook door
    on board ``slug``: the status and the answer's JSON."""
    data = body if isinstance(body, bytes | str) else json.dumps(body)
    response = Client().post(
        f"/api/boards/{slug}/hooks/{client}",
        data=data,
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}", **headers},
    )
    return response.status_code, response.json()


def denied(client: str, answer: dict) -> str:
    """The reason of a deny in ``client``'s shape (fails on any other answer)."""
    if client in ("claude-code", "codex", "qwen"):
        out = answer["hookSpecificOutput"]
        assert out["permissionDecision"] == "deny", answer
        return out["permissionDecisionReason"]
    if client == "copilot":
        assert answer["permissionDecision"] == "deny", answer
        return answer["permissionDecisionReason"]
    assert answer["decision"] == "deny", answer
    return answer["reason"]
