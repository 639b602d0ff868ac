"""The "Connect an agent" page (issue 14): a token and copy-ready setup that works as pasted."""

from __future__ import annotations

import html
import json
import re

from boards.core import auth
from boards.models import AgentToken


def snippet(page: str, name: str) -> str:
    found = re.search(rf'<code data-snippet="{name}">(.*?)</code>', page, re.S)
    assert found, name
    return html.unescape(found.group(1))


def test_the_page_issues_a_token_and_fills_it_into_every_snippet(board, person_client):
    page = person_client.post("/boards/team/connect/", {"agent": "coder-1"}, follow=True)
    text = page.content.decode()
    token = AgentToken.objects.get(board=board, agent="coder-1")
    raw = re.search(r"data-new-token>(ak_[^<]+)<", text).group(1)
    assert token.prefix == raw[:10]
    assert snippet(text, "claude-code") == (
        "claude mcp add --transport http kanban http://testserver/mcp/team/ "
        f'--header "Authorization: Bearer {raw}"'
    )
    assert "TaskClaim" in snippet(text, "instructions")
    # Shown once: the next visit shows the placeholder.
    assert raw not in person_client.get("/boards/team/connect/").content.decode()


def test_the_mcp_json_snippet_names_the_mcp_route_and_a_token_it_accepts(board, person_client):
    # (The MCP server itself, driven through the same URL and header, is test_mcp.py's.)
    text = person_client.post("/boards/team/connect/", {"agent": "coder-1"}, follow=True)
    config = json.loads(snippet(text.content.decode(), "mcp-json"))["mcpServers"]["kanban"]
    assert (config["type"], config["url"]) == ("http", "http://testserver/mcp/team/")
    caller = auth.authenticate(config["headers"], "team")
    assert (caller.board, caller.agent) == (board, "coder-1")


def test_the_curl_snippet_calls_the_tool_api_as_pasted(board, person_client, client):
    text = person_client.post("/boards/team/connect/", {"team": "1"}, follow=True).content.decode()
    curl = snippet(text, "curl")
    url = re.search(r"-X POST (\S+)", curl).group(1)
    headers = dict(re.findall(r'-H "([^:]+): ([^"]+)"', curl))
    body = re.search(r"-d '(.*)'", curl).group(1)
    answer = client.post(
        url.removeprefix("http://testserver"),
        body,
        content_type=headers.pop("Content-Type"),
        headers=headers,
    )
    assert answer.status_code == 200, answer.content[:300]
    assert answer.json()["tasks"] == []


def test_only_admins_connect_agents(board, django_user_model, client):
    from boards.models import Membership, Role

    user = django_user_model.objects.create_user("op", password="pw-op-12345")
    Membership.objects.create(board=board, user=user, role=Role.OPERATOR)
    client.force_login(user)
    assert client.get("/boards/team/connect/").status_code == 403
