"""Claude Code sessions supervised on the board, end to end (SPEC §11, issue #22 "Done when").

The real Claude Code CLI (``tests/claude``, 2.1.328) runs headless against a scripted
stand-in for the Anthropic API on loopback (``tests/support/anthropic_standin``), with the
``.claude/settings.json`` a person copies from the board's Connect page (read in
Chromium, used as it is: ``kanban-hook`` command hooks for SessionStart and PreToolUse,
http hooks for the rest), its token in ``KANBAN_TOKEN`` and ``--allowedTools Bash`` (the
client allows the tool; the board gates it). The board is a real daphne server
(``devtools.liveserver.Cluster``) and the person is in Chromium:

- a session shows on the roster with its folder, and ends there;
- ``rm -rf build`` (a default rule asks) waits until a person clicks Approve, then runs;
- ``git push origin main`` denied with a note never runs, and the model reads the note;
- a call no rule matches runs without a person;
- a held call nobody answers ends with its rule's fallback at the rule's wait (5 s);
- 5 sessions × 50 tool calls posted as the CLI posts them leave the event log and the
  board's pushes bounded, and each session keeps its last few calls (two product bugs
  found there are fixed: pushes coalesced to one per window, and no event dropped on
  its way to the page);
- the hook door's refusals are clear JSON errors.

Waits are conditions with a bounded timeout, never sleeps.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import statistics
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Locator, Page, expect

from devtools.liveserver import Cluster, Server, wait_until
from tests.support.anthropic_standin import AnthropicStandin, Step, Text, ToolUse
from tests.support.claude_cli import ClaudeRun, claude_binary, run_claude

from .conftest import TIMEOUT_MS, USERNAME, BoardPages, LiveBoard, assert_not_reloaded

pytestmark = [pytest.mark.browser, pytest.mark.slow]

OpenPage = Callable[[], Page]

AGENT = "coder"  # the CLI's agent: a token bound to this name
CLI_SECONDS = 90  # one headless run, held calls included
CLI_MS = 30_000  # from starting the CLI to its first hook showing on the board
PROMPT = "Tidy up the project."

# Every hook the CLI ran in this module: (test, event, outcome, exit code). Shown at the end.
HOOKS_SEEN: list[tuple[str, str, str, Any]] = []


@pytest.fixture(scope="module", autouse=True)
def claude() -> Iterator[Path]:
    """The pinned CLI, and ``kanban-hook`` on PATH as the copied settings expect it."""
    binary = claude_binary()
    if shutil.which("kanban-hook") is None:
        pytest.fail("kanban-hook is not on PATH: `pip install -e .` installs it")
    yield binary
    if HOOKS_SEEN:
        print("\nHooks the CLI ran (test, event, outcome, exit code):")
        for seen in HOOKS_SEEN:
            print("  ", *seen)


# -- helpers -------------------------------------------------------------------------------------


@dataclass
class ClaudeBoard(LiveBoard):
    """A fresh board (with the default gate rules), its team token (``token``), a token
    bound to ``AGENT`` for the CLI and an admin-scoped one that reads the event log."""

    agent_token: str = ""
    admin_token: str = ""


_boards = itertools.count(1)


def new_board(cluster: Cluster, server: Server) -> ClaudeBoard:
    """A board and its three tokens, in one command (a Django start is two seconds)."""
    [board] = new_boards(cluster, server, 1)
    return board


def new_boards(cluster: Cluster, server: Server, count: int) -> list[ClaudeBoard]:
    """``count`` boards, each with its three tokens, in one command."""
    if not server.running:
        server.start()
    slugs = [f"cc{next(_boards)}-{os.getpid()}" for _ in range(count)]
    out = cluster.manage(
        "shell",
        "--no-imports",
        "-c",
        "from django.core.management import call_command\n"
        + "".join(
            f"call_command('createboard', {slug!r}, name='Claude Code {slug}')\n"
            f"call_command('issuetoken', {slug!r}, 'agents', team=True)\n"
            f"call_command('issuetoken', {slug!r}, {AGENT!r})\n"
            f"call_command('issuetoken', {slug!r}, 'auditor', admin=True)\n"
            for slug in slugs
        ),
    )
    tokens = [line for line in out.splitlines() if line.startswith("ak_")]
    assert len(tokens) == 3 * count, out
    return [ClaudeBoard(server, slug, *tokens[3 * n : 3 * n + 3]) for n, slug in enumerate(slugs)]


@pytest.fixture
def live_board(cluster: Cluster, server: Server) -> ClaudeBoard:
    """Overrides conftest's (``pages`` and ``open_page`` use it): a fresh board per test."""
    return new_board(cluster, server)


def copied_settings(page: Page, live_board: ClaudeBoard) -> dict[str, Any]:
    """The ``.claude/settings.json`` on the Connect page, as the logged-in person copies it."""
    connect = page.context.new_page()
    try:
        connect.goto(f"{live_board.url}connect/")
        raw = connect.locator("#claude-settings").inner_text()
    finally:
        connect.close()
    settings = json.loads(raw)
    gate = settings["hooks"]["PreToolUse"][0]["hooks"][0]
    assert gate["type"] == "command"
    assert gate["command"].startswith("kanban-hook --client claude-code --timeout "), gate
    assert gate["onFailure"] == "block", gate  # a killed hook blocks the call (#42)
    # The block carries no board and no token: they go to boards.json, as the page says,
    # which ``run_claude`` writes from the URL named here and the run's token.
    settings.setdefault("env", {})["KANBAN_HOOK_URL"] = live_board.url
    return settings


class Session:
    """One headless CLI run in a background thread, while the test drives the browser."""

    def __init__(
        self,
        script: list[Step],
        workdir: Path,
        settings: dict[str, Any],
        token: str,
        test: str,
        *,
        allowed_tools: Sequence[str] = ("Bash",),
        threads: dict[str, list[Step]] | None = None,
    ) -> None:
        self.api = AnthropicStandin(script, threads=threads or {})
        self.allowed_tools = list(allowed_tools)
        self.workdir = workdir
        self.project = workdir / "project"
        self.test = test
        self.run: ClaudeRun | None = None
        self.error: BaseException | None = None
        self.started = time.monotonic()
        self.seconds = 0.0
        self._thread = threading.Thread(
            target=self._run, args=(settings, token), name=f"claude {test}", daemon=True
        )
        self._thread.start()

    def _run(self, settings: dict[str, Any], token: str) -> None:
        try:
            self.run = run_claude(
                PROMPT,
                api_url=self.api.url,
                workdir=self.workdir,
                settings=settings,
                allowed_tools=self.allowed_tools,
                env={"KANBAN_TOKEN": token},
                timeout=CLI_SECONDS,
            )
        except BaseException as exc:  # shown by result() in the test's thread
            self.error = exc
        finally:
            self.seconds = time.monotonic() - self.started

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def result(self) -> ClaudeRun:
        """The finished run (waiting for it); every hook it ran answered."""
        self._thread.join(CLI_SECONDS + 10)
        self.api.close()
        assert not self._thread.is_alive(), "the CLI did not exit"
        if self.error is not None:
            raise self.error
        run = self.run
        assert run is not None
        assert run.returncode == 0, (run.returncode, run.stderr[-2000:])
        for hook in run.hook_responses():
            HOOKS_SEEN.append(
                (self.test, hook.get("hook_event"), hook.get("outcome"), hook.get("exit_code"))
            )
        HOOKS_SEEN.append((self.test, "(the CLI's run)", f"{self.seconds:.1f} s", None))
        failed = [h for h in run.hook_responses() if h.get("outcome") != "success"]
        assert not failed, failed
        return run


def start(
    tmp_path: Path,
    page: Page,
    live_board: ClaudeBoard,
    script: list[Step],
    test: str,
    **given: Any,
) -> Session:
    """The CLI, started with the settings copied from the Connect page and the agent's token
    (``given``: the Session's ``allowed_tools`` and ``threads``)."""
    settings = copied_settings(page, live_board)
    return Session(script, tmp_path / "claude", settings, live_board.agent_token, test, **given)


def roster_row(page: Page, agent: str = AGENT) -> Locator:
    return page.locator(f'#roster li[data-agent="{agent}"]')


def held_calls(page: Page) -> Locator:
    return page.locator("#needs li[data-call]")


def hooks_sent(run: ClaudeRun) -> list[str]:
    """The hooks the CLI ran, as its stream records them (SessionEnd is not recorded: it
    runs as the CLI exits, after its last message)."""
    return [str(h.get("hook_event")) for h in run.hook_responses()]


def board_decision(run: ClaudeRun) -> tuple[str, str]:
    """The board's answer to the run's one PreToolUse, as kanban-hook printed it."""
    [hook] = run.hook_responses("PreToolUse")
    answer = json.loads(hook["stdout"])["hookSpecificOutput"]
    return answer["permissionDecision"], answer["permissionDecisionReason"]


def expect_ended_on_roster(page: Page, run: ClaudeRun) -> None:
    """The session is on the roster with its folder, ended (pushed live, no reload)."""
    state = roster_row(page).locator("[data-session-state]")
    expect(state).to_have_attribute("data-session-state", "ended")
    expect(state.locator(".tag")).to_have_text("Ended")
    expect(state.locator("code")).to_have_text(str(run.project))
    assert run.init.get("cwd") == str(run.project)


# -- the tests -----------------------------------------------------------------------------------


def test_a_session_shows_on_the_roster_with_its_folder_and_ends(
    open_page: OpenPage, live_board: ClaudeBoard, tmp_path: Path
):
    page = open_page()
    expect(roster_row(page)).to_have_count(0)

    session = start(tmp_path, page, live_board, [Text("Nothing to tidy.")], "session")
    # It shows while it runs (SessionStart through kanban-hook), then ends (SessionEnd, http).
    expect(roster_row(page)).to_have_count(1, timeout=CLI_MS)
    run = session.result()
    assert run.result.get("result") == "Nothing to tidy."

    assert hooks_sent(run) == ["SessionStart", "UserPromptSubmit", "Stop"]  # and SessionEnd:
    expect_ended_on_roster(page, run)
    assert_not_reloaded(page)

    kinds = [e["kind"] for e in events(live_board)]
    assert kinds.count("session_started") == kinds.count("session_ended") == 1, kinds


def test_a_risky_call_waits_until_a_person_approves_it_then_runs(
    open_page: OpenPage, live_board: ClaudeBoard, tmp_path: Path
):
    page = open_page()
    build = tmp_path / "claude" / "project" / "build"
    build.mkdir(parents=True)
    (build / "app.js").write_text("// built\n")

    script: list[Step] = [
        ToolUse("Bash", {"command": "rm -rf build", "description": "Remove the build"}),
        Text("Removed the build."),
    ]
    session = start(tmp_path, page, live_board, script, "approve")

    item = held_calls(page)
    expect(item).to_have_count(1, timeout=CLI_MS)
    expect(item.locator("strong")).to_have_text(AGENT)
    expect(item).to_contain_text("asks to run Bash")
    expect(item.locator("code.call-summary")).to_have_text("rm -rf build")
    expect(item).to_contain_text(str(session.project))
    expect(item).to_contain_text("rule “Recursive delete”")
    waiting = roster_row(page).locator("[data-session-state]")
    expect(waiting).to_have_attribute("data-session-state", "waiting")
    # Held: the client waits on the board and the folder is still there.
    assert session.running
    assert build.exists()

    item.get_by_role("button", name="Approve", exact=True).click()
    expect(held_calls(page)).to_have_count(0)
    run = session.result()

    assert not build.exists()
    assert board_decision(run) == ("allow", f"Approved by {USERNAME} on the board")
    [result] = session.api.tool_results()
    assert not result.is_error, result
    assert run.result.get("result") == "Removed the build."
    tool_hooks = ["PreToolUse", "PostToolUse", "PostToolBatch"]
    assert hooks_sent(run) == ["SessionStart", "UserPromptSubmit", *tool_hooks, "Stop"]
    expect_ended_on_roster(page, run)
    last = roster_row(page).locator(".session-calls li.call").first
    expect(last).to_contain_text("Running `rm -rf build`")
    expect(last).to_have_class("call call--ok")
    assert_not_reloaded(page)


def test_a_denied_call_never_runs_and_the_model_reads_the_persons_note(
    open_page: OpenPage, live_board: ClaudeBoard, tmp_path: Path
):
    page = open_page()
    remote, project = scratch_repo(tmp_path / "claude")

    script: list[Step] = [
        ToolUse("Bash", {"command": "git push origin main", "description": "Push to main"}),
        Text("I will wait for the review."),
    ]
    session = start(tmp_path, page, live_board, script, "deny")

    item = held_calls(page)
    expect(item).to_have_count(1, timeout=CLI_MS)
    expect(item.locator("code.call-summary")).to_have_text("git push origin main")
    expect(item).to_contain_text("rule “git push”")
    assert session.running
    note = "Not on main: open a pull request for review first"
    item.locator("input[name=note]").fill(note)
    item.get_by_role("button", name="Deny", exact=True).click()
    expect(held_calls(page)).to_have_count(0)
    run = session.result()

    # Never ran: the remote has no branch.
    assert not git(remote, "branch", "--list").strip()
    assert (project / "README.md").exists()
    [result] = session.api.tool_results()
    assert result.is_error, result
    assert note in result.text, result.text
    assert f"Denied by {USERNAME} on the board" in result.text, result.text
    assert board_decision(run)[0] == "deny"
    # A call the board denied gets no PostToolUse: the board knows its outcome already.
    assert hooks_sent(run) == [
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolBatch",
        "Stop",
    ]

    expect_ended_on_roster(page, run)
    last = roster_row(page).locator(".session-calls li.call").first
    expect(last).to_contain_text("Running `git push origin main`")
    expect(last).to_have_class("call call--denied")
    denied = [e for e in events(live_board) if e["kind"] == "tool_call_denied"]
    assert [(e["actor"], e["data"]["note"]) for e in denied] == [(USERNAME, note)], denied
    assert_not_reloaded(page)


def test_a_call_no_rule_matches_runs_without_a_person(
    open_page: OpenPage, live_board: ClaudeBoard, tmp_path: Path
):
    page = open_page()
    script: list[Step] = [
        ToolUse("Bash", {"command": "echo hi > out.txt", "description": "Write out.txt"}),
        Text("Wrote out.txt."),
    ]
    session = start(tmp_path, page, live_board, script, "no rule")
    run = session.result()

    assert (run.project / "out.txt").read_text() == "hi\n"
    [result] = session.api.tool_results()
    assert not result.is_error, result
    tool_hooks = ["PreToolUse", "PostToolUse", "PostToolBatch"]
    assert hooks_sent(run) == ["SessionStart", "UserPromptSubmit", *tool_hooks, "Stop"]
    [hook] = run.hook_responses("PreToolUse")
    assert hook["stdout"].strip() in ("", "{}"), hook  # no decision: the client's own applies

    expect_ended_on_roster(page, run)
    last = roster_row(page).locator(".session-calls li.call").first
    expect(last).to_contain_text("Running `echo hi > out.txt`")
    expect(last).to_have_class("call call--ok")
    expect(held_calls(page)).to_have_count(0)
    kinds = [e["kind"] for e in events(live_board)]
    assert not [k for k in kinds if k.startswith("tool_call_")], kinds


def test_a_held_call_nobody_answers_ends_with_the_fallback_at_the_rules_wait(
    open_page: OpenPage, live_board: ClaudeBoard, cluster: Cluster, tmp_path: Path
):
    page = open_page()
    # The board's admin makes recursive deletes wait 5 s, then deny (`manage.py gaterules`:
    # the default rule removed, a quick one added; one Django start for the three).
    listed = cluster.manage(
        "shell",
        "--no-imports",
        "-c",
        "import io\nfrom django.core.management import call_command\n"
        f"out = io.StringIO(); call_command('gaterules', {live_board.slug!r}, stdout=out)\n"
        "[rule] = [line.split()[0] for line in out.getvalue().splitlines() "
        "if line.endswith('Recursive delete')]\n"
        f"call_command('gaterules', {live_board.slug!r}, remove=int(rule), stdout=io.StringIO())\n"
        f"call_command('gaterules', {live_board.slug!r}, add='Bash', pattern=r'\\brm\\s+-rf\\b', "
        "wait=5, fallback='deny', note='Quick delete check')\n",
    )
    assert "Recursive delete" not in listed, listed
    assert "~ \\brm\\s+-rf\\b → ask (wait 5 s, then deny)  Quick delete check" in listed, listed
    build = tmp_path / "claude" / "project" / "build"
    build.mkdir(parents=True)

    script: list[Step] = [
        ToolUse("Bash", {"command": "rm -rf build", "description": "Remove the build"}),
        Text("The build stays."),
    ]
    session = start(tmp_path, page, live_board, script, "no answer")
    item = held_calls(page)
    expect(item).to_have_count(1, timeout=CLI_MS)
    expect(item).to_contain_text("rule “Quick delete check”")
    expect(item).to_contain_text("deny at")
    # Nobody answers: the item goes by itself, at the rule's wait.
    expect(held_calls(page)).to_have_count(0, timeout=15_000)
    run = session.result()

    assert build.exists()
    [result] = session.api.tool_results()
    assert result.is_error, result
    assert "No person answered on the board within 5 s" in result.text, result.text
    assert "not run" in result.text, result.text
    assert board_decision(run)[0] == "deny"
    assert hooks_sent(run) == [
        "SessionStart",
        "UserPromptSubmit",
        "PreToolUse",
        "PostToolBatch",
        "Stop",
    ]
    expect_ended_on_roster(page, run)
    expect(roster_row(page).locator(".session-calls li.call").first).to_have_class(
        "call call--denied"
    )
    log = {e["kind"]: e for e in events(live_board) if e["kind"].startswith("tool_call_")}
    assert sorted(log) == ["tool_call_expired", "tool_call_requested"], log
    assert log["tool_call_expired"]["data"]["fallback"] == "deny"
    held = seconds_between(log["tool_call_requested"]["at"], log["tool_call_expired"]["at"])
    # On the server's clock: not before the rule's wait (the person had all of it), and
    # before the sweeper could have ended it (it waits 5 s past a deadline): the held
    # request itself ended it, at its wait.
    # (The events' times are stamped when each write starts, a few ms from the moment the
    # deadline is counted from: 0.1 s of slack, CI saw 4.99 s.)
    assert 5 - 0.1 <= held < 5 + 5, held


# -- many sessions at once -------------------------------------------------------------------------

SESSIONS = 5
STUCK_SECONDS = 10
CALLS = 50
HTTP_HEADERS = {  # what the CLI's http hooks send (docs/claude-code-hooks.md)
    "Content-Type": "application/json",
    "Accept": "application/json, text/plain, */*",
    "User-Agent": "axios/1.15.2",
}

# Each push the board's page receives: when (ms since the epoch), and the kinds of its events.
COUNT_PUSHES = """
window.__pushes = [];
document.addEventListener("htmx:ws:after:message:incoming", function (event) {
  var data = (event.detail.message && event.detail.message.data) || "";
  window.__pushes.push([Date.now(), (data.match(/data-kind="[a-z_]+"/g) || [])
    .map(function (found) { return found.slice(11, -1); }).join(" ")]);
});
"""


def quiet(page: Page, seconds: float = 0.6) -> None:
    """Wait until the page has had no push for ``seconds`` (the pushes in flight are in)."""
    last = "window.__pushes.length ? Date.now() - window.__pushes.at(-1)[0] : 1e9"
    wait_until(
        lambda: page.evaluate(last) >= seconds * 1000,
        timeout=TIMEOUT_MS / 1000,
        what="the pushes settled",
    )


def cli_payloads(session_id: str, cwd: str) -> Iterator[dict[str, Any]]:
    """One session's hook inputs, shaped as 2.1.328 sends them: start, 50 Bash calls
    (PreToolUse then PostToolUse), end."""
    common = {
        "session_id": session_id,
        "transcript_path": f"/root/.claude/projects/{cwd.replace('/', '-')}/{session_id}.jsonl",
        "cwd": cwd,
    }
    yield {**common, "hook_event_name": "SessionStart", "source": "startup"}
    prompt_id = str(uuid.uuid4())
    tool = {
        **common,
        "prompt_id": prompt_id,
        "permission_mode": "default",
        "effort": {"level": "medium"},
    }
    for n in range(CALLS):
        tool_input = {"command": f"echo {n}", "description": f"Say {n}"}
        use = f"toolu_{session_id[:8]}{n:04d}"
        call = {**tool, "tool_name": "Bash", "tool_input": tool_input, "tool_use_id": use}
        yield {**call, "hook_event_name": "PreToolUse"}
        response = {
            "stdout": str(n),
            "stderr": "",
            "interrupted": False,
            "isImage": False,
            "noOutputExpected": False,
        }
        yield {
            **call,
            "hook_event_name": "PostToolUse",
            "tool_response": response,
            "duration_ms": 7,
        }
    yield {**common, "prompt_id": prompt_id, "hook_event_name": "SessionEnd", "reason": "other"}


def post_hook(
    url: str, token: str, body: bytes, agent: str = "", timeout: float = 30
) -> tuple[int, dict[str, str], Any]:
    """One POST as the CLI's http hook sends it: (status, headers, JSON answer)."""
    headers = {**HTTP_HEADERS, "Authorization": f"Bearer {token}", "X-Agent": agent}
    request = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), json.loads(exc.read())


@dataclass
class Burst:
    """What 5 sessions × 50 calls did to a board, as its open page saw it."""

    board: ClaudeBoard
    agents: list[str]
    seq_before: int
    seq_started: int
    seq_after_calls: int
    seconds: float  # from the first call to the last answer
    pushes_before: int  # pushes received before the first call
    pushes_after_calls: int  # ... and once the page showed every session's last call
    pushes: list[tuple[float, str]]  # every push: (seconds from the first call, its events)
    latency: dict[str, list[float]]  # seconds per post, by hook event
    kept: dict[str, Any]  # the sessions' calls as stored, and KANBAN_SESSION_CALLS
    roster_summary: str  # the first session's "Last N tool calls", on the page

    def during_calls(self) -> list[tuple[float, str]]:
        return self.pushes[self.pushes_before : self.pushes_after_calls]


@pytest.fixture(scope="module")
def burst(cluster: Cluster, server: Server, browser: Browser) -> Iterator[Burst]:
    """5 sessions of one team token start, make 50 Bash calls each side by side (PreToolUse
    and PostToolUse posted directly to the live server, as the CLI's hooks post them,
    one thread per session), and end, while a person's page is open on the board."""
    board = new_board(cluster, server)
    pages = BoardPages(browser, board)
    try:
        page = pages.open()
        yield run_burst(board, page, cluster)
        assert not pages.errors, pages.errors
    finally:
        pages.close()


def run_burst(board: ClaudeBoard, page: Page, cluster: Cluster) -> Burst:
    url = f"{board.server.base}/api/boards/{board.slug}/hooks/claude-code"
    page.evaluate(COUNT_PUSHES)
    agents = [f"burst-{n}" for n in range(1, SESSIONS + 1)]
    plans = {a: list(cli_payloads(str(uuid.uuid4()), f"/home/dev/{a}")) for a in agents}
    latency: dict[str, list[float]] = {"PreToolUse": [], "PostToolUse": []}
    lock = threading.Lock()

    def send(agent: str, payload: dict[str, Any]) -> None:
        # A post that takes this long is stuck: the server prints its threads' stacks into
        # its log, which a failure shows.
        watchdog = threading.Timer(STUCK_SECONDS, board.server.dump_stacks)
        watchdog.start()
        began = time.perf_counter()
        try:
            status, _headers, answer = post_hook(
                url, board.token, json.dumps(payload).encode(), agent
            )
        finally:
            watchdog.cancel()
        took = time.perf_counter() - began
        assert (status, answer) == (200, {}), (payload["hook_event_name"], status, answer)
        if payload["hook_event_name"] in latency:
            with lock:
                latency[payload["hook_event_name"]].append(took)

    def calls(agent: str) -> None:
        for payload in plans[agent][1:-1]:  # one session's calls, one after another
            send(agent, payload)

    seq_before = events_page(board)["lastSeq"]
    with ThreadPoolExecutor(SESSIONS) as pool:
        list(pool.map(lambda a: send(a, plans[a][0]), agents))
        expect(page.locator("#roster [data-session-state]")).to_have_count(SESSIONS)
        seq_started = events_page(board)["lastSeq"]
        quiet(page)  # the starts' pushes are in (they are sent in the background)
        pushes_before = len(page.evaluate("window.__pushes"))
        began_ms = time.time() * 1000
        began = time.monotonic()
        list(pool.map(calls, agents))
        seconds = time.monotonic() - began
        # The last change of a burst is always pushed: each session shows its last call.
        for agent in agents:
            expect(roster_row(page, agent)).to_contain_text(f"Running `echo {CALLS - 1}`")
        seq_after_calls = events_page(board)["lastSeq"]
        pushes_after_calls = len(page.evaluate("window.__pushes"))
        list(pool.map(lambda a: send(a, plans[a][-1]), agents))
    expect(page.locator('#roster [data-session-state="ended"]')).to_have_count(SESSIONS)
    quiet(page)
    summary = roster_row(page, agents[0]).locator(".session-calls summary").inner_text()
    pushes = [((at - began_ms) / 1000, kinds) for at, kinds in page.evaluate("window.__pushes")]
    kept = json.loads(
        cluster.manage(
            "shell",
            "--no-imports",
            "-c",
            "import json; from django.conf import settings; from boards.models import "
            "ClientSession\nprint(json.dumps({'limit': settings.KANBAN_SESSION_CALLS, "
            "'window': settings.KANBAN_SESSION_PUSH_SECONDS, "
            "'calls': {s.agent: [(c['doing'], c['outcome']) for c in s.calls] for s in "
            f"ClientSession.objects.filter(board__slug={board.slug!r})}}}}))",
        ).splitlines()[-1]
    )
    done = Burst(
        board,
        agents,
        seq_before,
        seq_started,
        seq_after_calls,
        seconds,
        pushes_before,
        pushes_after_calls,
        pushes,
        latency,
        kept,
        summary,
    )
    post, pre = sorted(latency["PostToolUse"]), sorted(latency["PreToolUse"])
    report = (
        f"{SESSIONS} sessions × {CALLS} calls: {seconds:.2f} s for {len(pre) + len(post)} posts; "
        f"PostToolUse p50 {statistics.median(post) * 1000:.0f} ms, "
        f"p95 {post[int(len(post) * 0.95)] * 1000:.0f} ms; "
        f"PreToolUse p50 {statistics.median(pre) * 1000:.0f} ms; "
        f"pushes: {len(done.during_calls())} during the calls, {len(pushes)} in all"
    )
    print("\n" + report)
    HOOKS_SEEN.append(("burst", "(posted directly)", report, None))
    return done


def test_busy_sessions_leave_the_event_log_bounded_and_keep_their_last_calls(burst: Burst):
    # Every call was answered, and timed.
    assert len(burst.latency["PreToolUse"]) == len(burst.latency["PostToolUse"]) == SESSIONS * CALLS
    # The event log: each session's start and end, nothing for the 500 calls.
    assert burst.seq_after_calls == burst.seq_started
    kinds = sorted(e["kind"] for e in events(burst.board, after=burst.seq_before))
    assert kinds == ["session_ended"] * SESSIONS + ["session_started"] * SESSIONS, kinds
    # Each session keeps its last KANBAN_SESSION_CALLS calls, each with its outcome.
    limit = min(burst.kept["limit"], CALLS)
    assert sorted(burst.kept["calls"]) == burst.agents
    for agent, calls in burst.kept["calls"].items():
        assert calls == [[f"Running `echo {n}`", "ok"] for n in range(CALLS - limit, CALLS)], agent
    assert burst.roster_summary == f"Last {limit} tool calls"


def test_busy_sessions_push_far_fewer_updates_than_they_make_calls(burst: Burst):
    during = burst.during_calls()
    assert not [p for p in during if p[1]], f"pushes during the calls carried events: {during}"
    # 500 posts, 250 of them changing what a session is doing: never a push per call.
    assert len(during) <= SESSIONS * CALLS * 2 / 5, (len(during), burst.seconds)


def test_every_session_event_reaches_the_open_page(burst: Burst):
    """Each session's start and end is an event, and each event is pushed to the page
    (its announcer and notifications read #board-events)."""
    pushed = " ".join(kinds for _at, kinds in burst.pushes).split()
    assert sorted(pushed) == ["session_ended"] * SESSIONS + ["session_started"] * SESSIONS


def test_busy_sessions_pushes_are_coalesced_to_one_per_window(burst: Burst):
    """The roster is re-rendered at most once per KANBAN_SESSION_PUSH_SECONDS while the
    sessions only make calls (boards/services/hooks.py), however many sessions there are."""
    if burst.seconds < 6:
        pytest.skip(f"the calls took {burst.seconds:.1f} s: too short to tell")
    window = float(burst.kept["window"])
    during = [at for at, _events in burst.during_calls()]
    gaps = [later - earlier for earlier, later in itertools.pairwise(during)]
    assert len(during) <= burst.seconds / window + 2, (len(during), burst.seconds)
    assert min(gaps) >= window * 0.5, sorted(gaps)[:10]


# -- refusals ------------------------------------------------------------------------------------


def test_the_hook_door_refuses_bad_tokens_other_boards_and_bad_json(
    live_board: ClaudeBoard, cluster: Cluster
):
    other = f"{live_board.slug}-other"
    other_token = cluster.manage(
        "shell",
        "--no-imports",
        "-c",
        "from django.core.management import call_command\n"
        f"call_command('createboard', {other!r})\n"
        f"call_command('issuetoken', {other!r}, {AGENT!r})\n",
    ).splitlines()[-1]
    url = f"{live_board.server.base}/api/boards/{live_board.slug}/hooks/claude-code"
    event = json.dumps(
        {"session_id": "s-refused", "cwd": "/home/dev/project", "hook_event_name": "SessionStart"}
    ).encode()

    def refused(status: int, token: str, body: bytes) -> dict[str, Any]:
        got, headers, answer = post_hook(url, token, body)
        assert got == status, (got, answer)
        assert headers["Content-Type"] == "application/json", headers
        assert set(answer) == {"error"}, answer
        assert answer["error"]["code"] and answer["error"]["message"], answer
        return answer["error"]

    error = refused(401, "ak_not_a_token", event)
    assert error["code"] == "unauthorized", error
    assert "Unknown token" in error["message"], error
    headers = post_hook(url, "ak_not_a_token", event)[1]
    assert 'error="invalid_token"' in headers["WWW-Authenticate"], headers
    error = refused(403, other_token, event)
    assert (error["code"], error["message"]) == ("forbidden", "This token belongs to another board")
    error = refused(400, live_board.agent_token, b'{"session_id": "s-refused", "hook_event_name": ')
    assert error["code"] == "invalid_json", error
    assert error["message"].startswith("Body is not valid JSON"), error
    error = refused(400, live_board.agent_token, json.dumps({"session_id": "s-refused"}).encode())
    assert "hook_event_name" in error["message"], error
    # None of them made a session.
    assert not [e for e in events(live_board) if e["kind"] == "session_started"]


# -- plumbing --------------------------------------------------------------------------------------


def events_page(live_board: ClaudeBoard, after: int = 0) -> dict[str, Any]:
    request = urllib.request.Request(
        f"{live_board.server.base}/api/boards/{live_board.slug}/events?after={after}&limit=500",
        headers={"Authorization": f"Bearer {live_board.admin_token}"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def events(live_board: ClaudeBoard, after: int = 0) -> list[dict[str, Any]]:
    """The board's event log after ``after`` (an admin token's read)."""
    return events_page(live_board, after)["events"]


def seconds_between(earlier: str, later: str) -> float:
    """Seconds between two of the events API's ISO times."""
    parse = datetime.fromisoformat
    return (
        parse(later.replace("Z", "+00:00")) - parse(earlier.replace("Z", "+00:00"))
    ).total_seconds()


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


def scratch_repo(workdir: Path) -> tuple[Path, Path]:
    """A bare ``remote`` and the session's ``project``: a clone with one commit on main."""
    remote, project = workdir / "remote.git", workdir / "project"
    workdir.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(project)], check=True)
    (project / "README.md").write_text("scratch\n")
    git(project, "add", "README.md")
    git(project, "-c", "user.name=dev", "-c", "user.email=dev@example.com", "commit", "-qm", "init")
    git(project, "remote", "add", "origin", str(remote))
    return remote, project
