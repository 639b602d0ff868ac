"""The roster has one line per coding-client session, each with its own state and calls;
durations read in human units."""

from __future__ import annotations

from boards.clients import sessions
from boards.core import selectors, services
from boards.core.selectors.sessions import human_duration
from tests.clients.test_hooks import bash, hook


def test_three_sessions_on_one_token_show_each_with_its_own_state_and_calls(board, person_client):
    for name in ("claude", "other"):
        services.agent_seen(board=board, agent=name)  # what the hook door does first
    sessions.session_event(board=board, agent="claude", event=hook("SessionStart", "s-a"))
    sessions.session_event(board=board, agent="claude", event=bash("ls -la", "s-a", "tu-a"))
    sessions.session_event(board=board, agent="claude", event=bash("rm -rf build", "s-b", "tu-b"))
    sessions.session_event(board=board, agent="claude", event=bash("git push", "s-c", "tu-c"))
    sessions.session_event(board=board, agent="other", event=hook("SessionStart", "s-d"))

    [first, other] = selectors.roster(board)
    assert other["name"] == "other"
    assert first["name"] == "claude" and first["waiting"]  # waits on a person: first
    lines = first["sessions"]
    assert [s.session_id for s in lines][:2] in (["s-b", "s-c"], ["s-c", "s-b"])
    assert [s.state for s in lines] == ["waiting", "waiting", "working"]
    assert {s.session_id: s.calls[-1]["doing"] for s in lines}["s-b"] == "Running `rm -rf build`"

    html = person_client.get("/boards/team/").content.decode()
    roster = html.split('id="roster"', 1)[1].split("</section>", 1)[0]
    assert roster.count('class="session session--') == 4
    assert roster.index('data-agent="claude"') < roster.index('data-agent="other"')
    claude = roster.split('data-agent="claude"', 1)[1].split('data-agent="other"', 1)[0]
    assert "rm -rf build" in claude and "git push" in claude and "ls -la" in claude


def test_durations_read_in_human_units():
    assert [human_duration(ms) for ms in (None, 840, 4200, 185_000, 3_720_000)] == [
        "",
        "840 ms",
        "4.2 s",
        "3 min 5 s",
        "1 h 2 min",
    ]
