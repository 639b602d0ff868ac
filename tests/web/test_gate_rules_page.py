"""Gate rules people can shape (issue #39, item 2): numbered in the order they are
matched, the same on the page and in ``manage.py gaterules``; moved, added before a
number, changed in place, and a call tried against them without saving anything."""

from __future__ import annotations

import io
import re

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from boards.clients import calls, sessions
from boards.core.errors import Conflict, InvalidInput, NotFound
from boards.gates import matching
from boards.gates import rules as gaterules
from boards.models import Board, CallState, Event, GateRule, Membership, Role, ToolCall

DEFAULTS = len(matching.DEFAULT_RULES)


def listed(board: Board, *args: str) -> str:
    out = io.StringIO()
    call_command("gaterules", board.slug, *args, stdout=out)
    return out.getvalue()


def notes(board: Board) -> list[str]:
    return [r.note for r in GateRule.objects.filter(board=board).order_by("position", "id")]


def page_numbers(html: str) -> list[tuple[str, str]]:
    """(number, what it guards) of each row of the page's table."""
    rows = re.findall(r"<tr data-rule=.*?</tr>", html, re.S)
    found = []
    for row in rows:
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        found.append((cells[0].strip(), cells[5].strip()))
    return found


def events(board: Board, action: str) -> list[dict]:
    return [
        e.data
        for e in Event.objects.filter(board=board, kind="gate_rule").order_by("seq")
        if e.data.get("action") == action
    ]


# -- order ------------------------------------------------------------------------------------


def test_the_page_and_the_command_number_rules_alike_and_never_by_id(board, person_client):
    gaterules.gate_rule_remove(
        board=board, actor="pat", rule_id=GateRule.objects.filter(board=board).first().pk
    )
    gaterules.gate_rule_add(board=board, actor="pat", tool="Bash", pattern="x", note="Extra")
    html = person_client.get("/boards/team/gates/").content.decode()
    on_page = page_numbers(html)
    in_shell = [
        (line.split("\t")[0], line.rsplit("  ", 1)[1]) for line in listed(board).splitlines()
    ]
    assert on_page == in_shell
    assert [n for n, _ in on_page] == [str(n) for n in range(1, DEFAULTS + 1)]
    assert on_page[-1] == (str(DEFAULTS), "Extra")


def test_an_exception_added_before_the_rule_it_narrows_decides(board, person_client):
    """The new user's case: an allow for ``rm -rf build`` added last never applies;
    added before the recursive-delete rule, it does."""
    allow = {
        "tool": "Bash",
        "pattern": r"^rm -rf build$",
        "decision": "allow",
        "wait_seconds": "300",
        "fallback": "deny",
        "note": "Build output",
    }
    person_client.post("/boards/team/gates/", allow)
    assert "Rule 1 decides: ask (Recursive delete)" in listed(board, "--test", "rm -rf build")
    GateRule.objects.filter(board=board, note="Build output").delete()
    response = person_client.post("/boards/team/gates/", {**allow, "before": "1"})
    assert response.status_code == 302
    assert notes(board)[:2] == ["Build output", "Recursive delete"]
    assert "Rule 1 decides: allow (Build output)" in listed(board, "--test", "rm -rf build")
    assert "Rule 2 decides: ask (Recursive delete)" in listed(board, "--test", "rm -rf src")
    assert events(board, "added")[-1]["at"] == 1


def test_a_rule_moves_up_down_and_to_a_number_with_an_event(board, person_client):
    before = notes(board)
    push = GateRule.objects.get(board=board, note="git push")
    response = person_client.post("/boards/team/gates/", {"move": push.pk, "to": "1"})
    assert response.status_code == 302
    assert notes(board) == [before[1], before[0], *before[2:]]
    assert events(board, "moved")[-1] == {
        "action": "moved",
        "rule": "git push",
        "from": 2,
        "to": 1,
    }
    listed(board, "--move", "1", "--to", str(DEFAULTS))
    assert notes(board) == [before[0], *before[2:], before[1]]
    positions = list(
        GateRule.objects.filter(board=board).order_by("position").values_list("position", flat=True)
    )
    assert positions == list(range(DEFAULTS))


@pytest.mark.parametrize("to", ["0", str(DEFAULTS + 1), "", "x", "٣"])
def test_a_move_to_no_such_number_is_a_400_naming_the_field(board, person_client, to):
    before, seen = notes(board), Event.objects.filter(board=board).count()
    push = GateRule.objects.get(board=board, note="git push")
    response = person_client.post("/boards/team/gates/", {"move": push.pk, "to": to})
    assert response.status_code == 400
    assert "to:" in response.content.decode()
    assert notes(board) == before
    assert Event.objects.filter(board=board).count() == seen


def test_before_a_number_past_the_end_is_refused_beside_its_field(board, person_client):
    response = person_client.post(
        "/boards/team/gates/",
        {"tool": "Bash", "wait_seconds": "300", "decision": "ask", "fallback": "deny"}
        | {"before": str(DEFAULTS + 2)},
    )
    assert response.status_code == 400
    assert f"1 to {DEFAULTS + 1}" in response.content.decode()
    assert len(notes(board)) == DEFAULTS


def test_a_rule_of_another_board_is_not_moved_changed_or_removed(board, other_board, person_client):
    theirs = GateRule.objects.filter(board=other_board).first()
    for post in ({"move": theirs.pk, "to": "1"}, {"remove": theirs.pk}):
        assert person_client.post("/boards/team/gates/", post).status_code == 400
    theirs.refresh_from_db()
    assert theirs.position == 0
    with pytest.raises(NotFound):
        gaterules.gate_rule_change(board=board, actor="pat", rule_id=theirs.pk, note="mine")


def test_the_command_names_a_number_it_does_not_have(board):
    with pytest.raises(CommandError, match=f"No gate rule number 99: the board has {DEFAULTS}"):
        listed(board, "--remove", "99")
    with pytest.raises(CommandError, match="--to"):
        listed(board, "--move", "1")
    assert len(notes(board)) == DEFAULTS


# -- change -----------------------------------------------------------------------------------


def test_a_rule_is_changed_in_place_with_what_changed_recorded(board, person_client):
    rule = GateRule.objects.get(board=board, note="git push")
    page = person_client.get(f"/boards/team/gates/?edit={rule.pk}").content.decode()
    assert "Change rule 2" in page and 'value="git push"' in page
    response = person_client.post(
        "/boards/team/gates/",
        {
            "change": rule.pk,
            "tool": "kind:shell",
            "pattern": rule.pattern,
            "decision": "deny",
            "wait_seconds": "60",
            "fallback": "deny",
            "note": "git push (never)",
            "step_up": "on",  # as the form shows it: kept
        },
    )
    assert response.status_code == 302
    rule.refresh_from_db()
    assert (rule.decision, rule.wait_seconds, rule.note, rule.position) == (
        "deny",
        60,
        "git push (never)",
        1,
    )
    [changed] = events(board, "changed")
    assert changed["changes"] == {
        "decision": {"from": "ask", "to": "deny"},
        "wait_seconds": {"from": 300, "to": 60},
        "note": {"from": "git push", "to": "git push (never)"},
    }


def test_a_rule_is_added_and_changed_step_up_from_the_page(board, person_client):
    page = person_client.get("/boards/team/gates/").content.decode()
    assert page.count("data-step-up") == 3  # rm -r, git push, sudo
    response = person_client.post(
        "/boards/team/gates/",
        {
            "tool": "Bash",
            "pattern": "^terraform apply",
            "decision": "ask",
            "wait_seconds": "300",
            "fallback": "deny",
            "note": "Infrastructure",
            "step_up": "on",
        },
    )
    assert response.status_code == 302
    rule = GateRule.objects.get(board=board, note="Infrastructure")
    assert rule.step_up is True
    edit = person_client.get(f"/boards/team/gates/?edit={rule.pk}").content.decode()
    assert re.search(r'<input type="checkbox" name="step_up"[^>]*checked', edit)
    fields = {
        "change": rule.pk,
        "tool": "Bash",
        "pattern": "^terraform apply",
        "decision": "ask",
        "wait_seconds": "300",
        "fallback": "deny",
        "note": "Infrastructure",
    }
    assert person_client.post("/boards/team/gates/", fields).status_code == 302
    rule.refresh_from_db()
    assert rule.step_up is False
    [changed] = events(board, "changed")
    assert changed["changes"] == {"step_up": {"from": True, "to": False}}


def test_a_change_is_checked_as_a_new_rule_is(board, person_client):
    rule = GateRule.objects.get(board=board, note="git push")
    response = person_client.post(
        "/boards/team/gates/",
        {
            "change": rule.pk,
            "tool": "Bash",
            "pattern": "(?:(?:a{1000}){100}){100}",
            "decision": "ask",
            "wait_seconds": "300",
            "fallback": "deny",
        },
    )
    assert response.status_code == 400
    assert "too large" in response.content.decode()
    rule.refresh_from_db()
    assert rule.tool == "kind:shell" and not events(board, "changed")
    with pytest.raises(InvalidInput) as refused:
        gaterules.gate_rule_change(board=board, actor="pat", rule_id=rule.pk, decision="maybe")
    assert refused.value.details[0]["field"] == "decision"


def test_the_command_changes_only_what_it_is_given(board):
    out = listed(board, "--change", "2", "--decision", "deny", "--note", "No pushing")
    assert out.splitlines()[1].startswith("2\tkind:shell ~ ^(git|hub)")
    assert out.splitlines()[1].endswith("→ deny  No pushing")
    rule = GateRule.objects.get(board=board, note="No pushing")
    assert rule.wait_seconds == 300 and rule.outside_cwd is False


# -- test -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "text", "said"),
    [
        ("Bash", "rm -rf build", "Rule 1 decides: ask (Recursive delete)"),
        ("Bash", "bash -c 'git push origin main'", "Rule 2 decides: ask (git push)"),
        ("Bash", "ls -la", "No rule matches: the client's own permission settings decide."),
        ("Write", "/etc/hosts", f"Rule {DEFAULTS} decides: ask (Writing outside the folder)"),
        ("Write", ".claude/settings.json", "The built-in supervision rule decides: ask"),
    ],
)
def test_a_call_is_tried_on_the_page_and_in_the_shell_alike(board, person_client, tool, text, said):
    seen = Event.objects.filter(board=board).count()
    page = person_client.get("/boards/team/gates/", {"tool": tool, "text": text, "cwd": "/srv/app"})
    assert page.status_code == 200
    assert said in page.content.decode().replace("&#x27;", "'")
    assert said in listed(board, "--test", text, "--test-tool", tool, "--cwd", "/srv/app")
    assert Event.objects.filter(board=board).count() == seen


def test_the_row_that_decides_is_marked(board, person_client):
    page = person_client.get("/boards/team/gates/", {"tool": "Bash", "text": "git push"}).content
    [marked] = re.findall(r'<tr data-rule="\d+" class="decides">\s*<td>(\d+)</td>', page.decode())
    assert marked == "2"


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"tool": "Bash|Write", "text": "ls"}, "tool"),
        ({"tool": "", "text": "ls"}, "tool"),
        ({"tool": "Bash", "text": "ls", "cwd": "relative/dir"}, "cwd"),
        ({"tool": "Bash", "text": "x" * (2 * matching.INPUT_MATCH_MAX + 1)}, "text"),
    ],
)
def test_a_test_that_cannot_be_read_is_a_400_naming_the_field(board, person_client, query, field):
    response = person_client.get("/boards/team/gates/", query)
    assert response.status_code == 400
    assert re.search(rf'name="{field}"[^>]*aria-invalid="true"', response.content.decode())


def test_only_admins_see_or_shape_the_rules(board, django_user_model):
    user = django_user_model.objects.create_user(username="ann", password="pw-ann-123")
    Membership.objects.create(board=board, user=user, role=Role.APPROVER)
    client = Client()
    client.force_login(user)
    push = GateRule.objects.get(board=board, note="git push")
    assert client.get("/boards/team/gates/", {"tool": "Bash", "text": "ls"}).status_code == 403
    assert client.post("/boards/team/gates/", {"move": push.pk, "to": "1"}).status_code == 403
    assert notes(board)[1] == "git push"


# -- approve, and allow from now on -------------------------------------------------------------


def held(board: Board, command: str, session: str = "s-one", tool: str = "Bash") -> ToolCall:
    key = "command" if tool == "Bash" else "file_path"
    event = {
        "hook_event_name": "PreToolUse",
        "session_id": session,
        "tool_name": tool,
        "tool_input": {key: command},
        "cwd": "/srv/app",
    }
    verdict = sessions.session_event(board=board, agent="dev", event=event)
    assert verdict.decision == matching.ASK and verdict.held, verdict
    return ToolCall.objects.get(pk=verdict.held)


def decides(board: Board, command: str, session: str) -> str | None:
    event = {"tool_name": "Bash", "tool_input": {"command": command}, "cwd": "/srv/app"}
    rule = calls.first_match(board, {**event, "session_id": session})
    return rule.decision if rule else None


def test_approve_and_allow_in_this_session_approves_and_adds_a_first_rule(board, person_client):
    call = held(board, "git reset --hard HEAD~1")
    url = f"/boards/team/calls/{call.pk}/approve-session/"
    assert person_client.post(url).status_code == 302
    call.refresh_from_db()
    assert call.state == CallState.APPROVED
    first = GateRule.objects.filter(board=board).order_by("position").first()
    assert (first.decision, first.session_id, first.pattern) == (
        "allow",
        "s-one",
        "^git reset --hard HEAD~1$",
    )
    assert decides(board, "git reset --hard HEAD~1", "s-one") == "allow"
    # Only this call, only this session.
    assert decides(board, "git reset --hard HEAD~2", "s-one") == "ask"
    assert decides(board, "git reset --hard HEAD~1", "s-two") == "ask"
    [added] = [e for e in events(board, "added") if e.get("scope")]
    assert (added["scope"], added["call"], added["session"], added["at"]) == (
        "session",
        call.pk,
        "s-one",
        1,
    )
    approved = Event.objects.get(board=board, kind="tool_call_approved")
    assert approved.data["from_now"] == "session"
    page = person_client.get("/boards/team/gates/").content.decode()
    assert "(session s-one only)" in page
    assert page_numbers(page)[0][0] == "1"


def test_approve_and_allow_on_the_board_covers_every_session(board, person_client):
    call = held(board, "git reset --hard origin/main")
    assert person_client.post(f"/boards/team/calls/{call.pk}/approve-board/").status_code == 302
    assert decides(board, "git reset --hard origin/main", "s-other") == "allow"
    assert decides(board, "git reset --hard origin/other", "s-other") == "ask"
    assert "Rule 1 decides: allow" in listed(board, "--test", "git reset --hard origin/main")


def test_a_call_the_gate_cannot_read_whole_is_approved_alone_or_not_at_all(board, person_client):
    call = held(board, 'eval "$CMD" && rm -rf build')
    rules, seen = notes(board), Event.objects.filter(board=board).count()
    response = person_client.post(
        f"/boards/team/calls/{call.pk}/approve-board/", headers={"HX-Request": "true"}
    )
    assert response.status_code == 409
    assert "cannot read all of what it runs" in response.content.decode()
    call.refresh_from_db()
    assert call.state == CallState.REQUESTED  # one unit of work: nothing approved either
    assert notes(board) == rules and Event.objects.filter(board=board).count() == seen


def test_a_write_to_the_supervision_is_never_allowed_from_now_on(board):
    call = held(board, ".claude/settings.json", tool="Write")
    with pytest.raises(Conflict, match="supervision"):
        calls.tool_call_decide(
            board=board, person="pat", call_id=call.pk, approve=True, from_now="board"
        )
    call.refresh_from_db()
    assert call.state == CallState.REQUESTED


def test_a_scope_with_a_denial_or_unknown_is_a_400_naming_the_field(board):
    call = held(board, "rm -rf build")
    for approve, scope in ((False, "board"), (True, "forever")):
        with pytest.raises(InvalidInput) as refused:
            calls.tool_call_decide(
                board=board, person="pat", call_id=call.pk, approve=approve, from_now=scope
            )
        assert refused.value.details[0]["field"] == "from_now"
    call.refresh_from_db()
    assert call.state == CallState.REQUESTED


def test_an_approver_may_approve_but_not_allow_from_now_on(board, django_user_model):
    user = django_user_model.objects.create_user(username="ann", password="pw-ann-123")
    Membership.objects.create(board=board, user=user, role=Role.APPROVER)
    client = Client()
    client.force_login(user)
    call = held(board, "rm -rf build")
    rules = notes(board)
    board_page = client.get("/boards/team/").content.decode()
    assert "Approve, and allow in this session from now on" in board_page  # hidden by role
    assert 'class="board can-status can-approve"' in board_page
    refused = client.post(
        f"/boards/team/calls/{call.pk}/approve-session/", headers={"HX-Request": "true"}
    )
    assert refused.status_code == 403
    call.refresh_from_db()
    assert call.state == CallState.REQUESTED and notes(board) == rules
    inbox = client.get("/api/inbox").json()
    [item] = [i for i in inbox["items"] if i["id"] == f"call-{call.pk}"]
    assert [a["action"] for a in item["actions"]] == ["approve", "deny"]
    assert client.post(f"/boards/team/calls/{call.pk}/approve/").status_code == 302
    call.refresh_from_db()
    assert call.state == CallState.APPROVED


def test_a_call_a_step_up_rule_holds_is_never_allowed_from_now_on(board, person_client):
    """A standing approval first among the rules would walk around the passkey a step-up
    rule asks for each time (SPEC §14): refused, and the call stays held."""
    call = held(board, "git push origin main")
    assert call.step_up
    rules = notes(board)
    response = person_client.post(
        f"/boards/team/calls/{call.pk}/approve-board/", headers={"HX-Request": "true"}
    )
    assert response.status_code == 409
    assert "step-up rule holds it" in response.content.decode()
    call.refresh_from_db()
    assert call.state == CallState.REQUESTED
    assert notes(board) == rules


def test_the_command_marks_a_rule_step_up_and_takes_the_mark_off(board):
    """``--step-up``: approving what the rule holds needs a passkey (SPEC §14), set from
    the shell as on the page; ``--no-step-up`` takes it off; the list says which."""

    def line_of(out: str) -> str:
        return next(line for line in out.splitlines() if "terraform apply" in line)

    out = listed(board, "--add", "Bash", "--pattern", "terraform apply", "--step-up")
    added = GateRule.objects.filter(board=board, pattern="terraform apply").get()
    assert added.step_up is True
    assert "terraform apply → ask (wait" in line_of(out)
    assert "(approved with a passkey)" in line_of(out)
    number = line_of(out).split("\t")[0]
    out = listed(board, "--change", number, "--no-step-up")
    added.refresh_from_db()
    assert added.step_up is False
    assert "passkey" not in line_of(out)
    # --change without either flag keeps the mark as it is.
    listed(board, "--change", number, "--step-up")
    listed(board, "--change", number, "--note", "Applies infrastructure")
    added.refresh_from_db()
    assert (added.step_up, added.note) == (True, "Applies infrastructure")
