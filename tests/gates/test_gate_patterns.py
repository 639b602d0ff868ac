"""Gate rules that cannot hurt the server (issue #39): a pattern whose compile would cost
seconds and gigabytes is refused when saved, a board's rules are bounded in number and
share one time budget per call, and what cannot be read is asked about, never let by."""

from __future__ import annotations

import re as stdlib_re
import resource
import threading
import time

import pytest
import regex

from boards.core import limits
from boards.core.errors import Conflict
from boards.gates import matching
from boards.gates import rules as gaterules
from boards.models import GateRule

CWD = "/home/ann/app"


def bash(command: str) -> dict[str, str]:
    return {"command": command}


def test_a_pattern_that_multiplies_its_repeats_is_refused_at_once_with_memory_flat():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()

    problem = matching.pattern_problem("(?:(?:a{1000}){100}){100}")

    assert time.perf_counter() - started < 0.5
    assert problem is not None and "too large once its repeats are counted" in problem
    grown_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kb < 50_000


@pytest.mark.parametrize(
    "pattern",
    ["a{99999999999}", "(?:a{10000}){10000}", "x{5000}y{5000}z", "(?:(?:a{30}){30}){30}"],
)
def test_patterns_too_big_to_compile_safely_are_refused(pattern):
    assert matching.pattern_problem(pattern) is not None


@pytest.mark.parametrize(
    "pattern", ["", r"\bgit\s+push\b", r"^rm\s+-rf", "a{1000}", r"(?:ab|cd){1,50}", r"x++(?>y)"]
)
def test_ordinary_patterns_are_accepted(pattern):
    assert matching.pattern_problem(pattern) is None


def test_an_unsafe_pattern_saved_before_the_check_asks_and_stays_quick():
    rule = matching.Rule("Bash", "(?:(?:a{1000}){100}){100}", decision=matching.ALLOW)
    ask = matching.Rule("Bash", "(?:(?:a{1000}){100}){100}")
    started = time.perf_counter()
    assert matching.first_match([rule], "Bash", bash("ls"), CWD) is None
    assert matching.first_match([ask], "Bash", bash("ls"), CWD) is not None
    assert time.perf_counter() - started < 0.5


def test_slow_allow_rules_share_one_budget_and_the_call_is_asked_about():
    slow = [matching.Rule("Bash", r"(a+)+$", decision=matching.ALLOW) for _ in range(40)]
    started, cpu = time.perf_counter(), time.thread_time()

    rule = matching.first_match(slow, "Bash", bash("a" * 5000 + "!"), CWD)

    # The budget is the thread's CPU time (a loaded machine stretches the wall clock).
    spent, elapsed = time.thread_time() - cpu, time.perf_counter() - started
    assert rule is not None and rule.decision == matching.ASK
    assert spent < limits.GATE_MATCH_BUDGET_SECONDS + 0.1, spent
    assert elapsed < matching.MATCH_WALL_MAX_SECONDS * 2, elapsed


def test_a_command_longer_than_what_is_read_is_asked_about_not_let_by():
    command = "echo " + "x" * matching.INPUT_MATCH_MAX + " && rm -rf /"
    rules = [matching.Rule("Bash", r"^ls\b", decision=matching.ALLOW), *matching.DEFAULT_RULES]
    rule = matching.first_match(rules, "Bash", bash(command), CWD)
    assert rule is not None and rule.decision == matching.ASK


def test_a_command_no_parser_can_read_is_asked_about_even_under_an_allow_rule():
    rules = [matching.Rule("Bash", r"^ls\b", decision=matching.ALLOW), *matching.DEFAULT_RULES]
    rule = matching.first_match(rules, "Bash", bash("ls; echo 'unclosed"), CWD)
    assert rule is not None and rule.decision == matching.ASK
    assert "could not be wholly read" in rule.label()


def test_a_deny_rule_that_cannot_be_read_asks_instead_of_denying():
    rule = matching.first_match(
        [matching.Rule("Bash", "dropdb", decision=matching.DENY)], "Bash", bash("x 'y"), CWD
    )
    assert rule is not None and rule.decision == matching.ASK


def test_a_write_to_a_path_that_cannot_be_resolved_is_asked_about():
    outside = matching.DEFAULT_RULES[-1]
    assert matching.first_match([outside], "Bash", bash("echo x > $SOMEWHERE/f"), CWD) is not None
    assert matching.first_match([outside], "Bash", bash("echo x > build/f"), CWD) is None
    assert matching.first_match([outside], "Bash", bash("D=/etc; echo x > $D/f"), CWD) is not None
    assert matching.first_match([outside], "Bash", bash("D=out; echo x > $D/f"), CWD) is None


def test_the_supervision_files_are_asked_about_before_any_rule_of_the_board():
    allow_all = [matching.Rule("*", decision=matching.ALLOW)]
    for tool, tool_input in [
        ("Write", {"file_path": f"{CWD}/.claude/settings.json"}),
        ("Bash", bash("echo '{}' > ~/.codex/hooks.json")),
        ("Bash", bash("cd .git/hooks && echo exit 0 > pre-commit")),
    ]:
        rule = matching.first_match(allow_all, tool, tool_input, CWD)
        assert rule is matching.SUPERVISION_RULE, tool_input
    assert matching.first_match(allow_all, "Read", {"file_path": ".claude/settings.json"}, CWD)
    assert matching.first_match([], "Bash", bash("cat .claude/settings.json"), CWD) is None


def test_a_rules_tool_names_the_normalised_tool_the_clients_own_or_a_kind():
    by_client = matching.Rule("run_shell_command", "rm")
    by_kind = matching.Rule("kind:shell", "rm")
    assert matching.rule_matches(
        by_client, "Bash", bash("rm x"), CWD, client_tool="run_shell_command"
    )
    assert not matching.rule_matches(by_client, "Bash", bash("rm x"), CWD)
    assert matching.rule_matches(by_kind, "Bash", bash("rm x"), CWD)
    assert matching.rule_matches(by_kind, "bash", bash("rm x"), CWD)
    assert not matching.rule_matches(by_kind, "Write", {"file_path": "rm"}, CWD)
    assert [
        matching.kind_of(t) for t in ("Bash", "Edit", "Read", "WebFetch", "mcp__x__y", "Task")
    ] == [
        "shell",
        "write",
        "read",
        "fetch",
        "mcp",
        "other",
    ]
    assert matching.tool_glob_problem("kind:shell|Write") is None
    assert "kind:" in (matching.tool_glob_problem("kind:everything") or "")


def test_a_board_has_at_most_its_limit_of_rules(board):
    GateRule.objects.filter(board=board).delete()
    GateRule.objects.bulk_create(
        GateRule(board=board, position=n, tool="Bash", pattern=f"x{n}")
        for n in range(limits.GATE_RULES_MAX)
    )
    with pytest.raises(Conflict) as refused:
        gaterules.gate_rule_add(board=board, actor="pat", tool="Bash", pattern="one more")
    assert refused.value.status == 409
    assert str(limits.GATE_RULES_MAX) in refused.value.message
    assert GateRule.objects.filter(board=board).count() == limits.GATE_RULES_MAX


def test_a_loaded_server_never_holds_an_ordinary_call_for_a_person():
    """The budgets count the matching thread's CPU time: while other threads keep the
    interpreter busy (a server answering many calls at once), ``echo N`` still matches no
    default rule, as on an idle machine."""
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    spinners = [threading.Thread(target=spin, daemon=True) for _ in range(16)]
    for spinner in spinners:
        spinner.start()
    try:
        held = [
            n
            for n in range(5)
            if matching.first_match(matching.DEFAULT_RULES, "Bash", bash(f"echo {n}"), CWD)
            is not None
        ]
    finally:
        stop.set()
        for spinner in spinners:
            spinner.join()
    assert held == []


def test_compiling_the_rules_is_not_counted_against_a_calls_budget(monkeypatch):
    # A server's first call compiles every rule's pattern: counted against the call's CPU
    # budget, that held an ordinary call for a person (the bench's first hook call).
    rules = list(matching.DEFAULT_RULES)
    call = {"command": "npm test -- --shard 3"}
    assert matching.first_match(rules, "Bash", call, "/srv/app") is None  # warm: no rule
    matching._compiled.cache_clear()
    regex.purge()
    stdlib_re.purge()
    # Far above what matching this call costs warm, far below what compiling them costs.
    monkeypatch.setattr(matching.limits, "GATE_MATCH_BUDGET_SECONDS", 0.004)
    assert matching.first_match(rules, "Bash", call, "/srv/app") is None
