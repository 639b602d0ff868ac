"""``kanban-hook`` and the real hook door (Django's live server): the board proves its
answers with the token (``X-Kanban-Proof``), so its verdict passes through as it came,
and an answer the token did not prove never does."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from boards.gates import rules as gaterules
from boards.models import GateRule
from devtools.liveserver import ROOT
from tests.support.factories import make_board, make_token


def forward(event: dict, url: str, token: str, tmp_path: Path) -> subprocess.CompletedProcess:
    """The forwarder with ``url`` and ``token`` in boards.json (the environment picks it)."""
    config = tmp_path / "agent-kanban" / "boards.json"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(json.dumps({"version": 1, "boards": [{"url": url, "token": token}]}))
    base = {k: v for k, v in os.environ.items() if not k.startswith("KANBAN_")}
    return subprocess.run(
        [sys.executable, "-m", "boards.clients.forwarder", "--timeout", "20"],
        input=json.dumps(event).encode(),
        capture_output=True,
        cwd="/",
        env={
            **base,
            "PYTHONPATH": str(ROOT),
            "XDG_CONFIG_HOME": str(tmp_path),
            "KANBAN_HOOK_URL": url,
        },
        timeout=60,
        check=False,
    )


def bash(command: str, name: str = "PreToolUse") -> dict:
    return {
        "hook_event_name": name,
        "session_id": "s-1",
        "cwd": "/home/dev/project",
        "tool_name": "Bash",
        "tool_input": {"command": command},
        "tool_use_id": "tu-1",
    }


@pytest.mark.django_db(transaction=True)
def test_the_boards_deny_passes_through_and_a_wrong_token_is_blocked(live_server, tmp_path):
    board = make_board("team", "Team board")
    token = make_token(board, "claude")
    gaterules.gate_rule_add(
        board=board, actor="pat", tool="Bash", pattern=r"\bdropdb\b", decision="deny"
    )
    GateRule.objects.filter(board=board, decision="ask").delete()
    url = f"{live_server.url}/api/boards/team/hooks/claude-code"

    denied = forward(bash("dropdb production"), url, token, tmp_path)
    free = forward(bash("ls -la"), url, token, tmp_path)
    refused = forward(bash("ls -la"), url, "ak_not-a-token", tmp_path)

    assert (denied.returncode, denied.stderr) == (0, b"")
    answer = json.loads(denied.stdout)["hookSpecificOutput"]
    assert answer["permissionDecision"] == "deny"
    assert "Blocked by the board's rule" in answer["permissionDecisionReason"]
    assert (free.returncode, free.stdout, free.stderr) == (0, b"", b"")  # no rule: no decision
    assert refused.returncode == 2
    assert b"(it refused the token: HTTP 401)" in refused.stderr


def test_the_door_proves_its_answer_with_the_callers_token(board, client):
    token = make_token(board, "claude")
    response = client.post(
        "/api/boards/team/hooks/claude-code",
        json.dumps(bash("ls")),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )

    assert response.status_code == 200
    expected = hmac.new(token.encode(), response.content, hashlib.sha256).hexdigest()
    assert response["X-Kanban-Proof"] == expected
