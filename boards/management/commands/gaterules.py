"""``manage.py gaterules SLUG``: list a board's gate rules, numbered as its rules page
numbers them (the order they are matched in); ``--add``/``--change``/``--move``/``--remove``
change them (``--step-up``: approving what a rule holds needs a passkey), ``--test``
tries a call against them."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from boards.core import selectors
from boards.core.errors import ServiceError
from boards.gates import matching
from boards.gates import rules as gaterules
from boards.models import Board, GateRule


class Command(BaseCommand):
    help = (
        "List, add, change, move or remove a board's gate rules (which agents' tool calls "
        "wait for a person), or test a call against them."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument(
            "--add", metavar="TOOL", help="add a rule for these tools (Bash, Write|Edit, mcp__*)"
        )
        parser.add_argument(
            "--before", type=int, metavar="N", help="with --add: put it before rule N"
        )
        parser.add_argument(
            "--change", type=int, metavar="N", help="change rule N (the options given)"
        )
        parser.add_argument("--tool", help="with --change: the rule's tools")
        parser.add_argument("--pattern", help="regular expression over the command, path or URL")
        parser.add_argument(
            "--outside-cwd",
            action="store_true",
            default=None,
            help="only paths outside the session's folder",
        )
        parser.add_argument(
            "--anywhere",
            dest="outside_cwd",
            action="store_false",
            help="with --change: any path, not only outside the folder",
        )
        parser.add_argument("--decision", choices=matching.DECISIONS)
        parser.add_argument("--wait", type=int, help="seconds to wait for a person")
        parser.add_argument("--fallback", choices=matching.FALLBACKS)
        parser.add_argument("--note", help="what the rule guards, as people read it")
        parser.add_argument(
            "--step-up",
            action="store_true",
            default=None,
            help="approving what the rule holds needs a passkey, not a tap on a push",
        )
        parser.add_argument(
            "--no-step-up",
            dest="step_up",
            action="store_false",
            help="with --change: a tap approves what it holds again",
        )
        parser.add_argument("--move", type=int, metavar="N", help="move rule N (with --to)")
        parser.add_argument("--to", type=int, metavar="M", help="with --move: its new number")
        parser.add_argument("--remove", type=int, metavar="N", help="remove rule N")
        parser.add_argument(
            "--test", metavar="TEXT", help="which rule decides a call doing this (nothing saved)"
        )
        parser.add_argument("--test-tool", default="Bash", help="with --test: the tool's name")
        parser.add_argument(
            "--cwd", default=gaterules.TEST_CWD, help="with --test: the session's folder"
        )

    def handle(self, *args: object, slug: str, **options: Any) -> None:
        fields = {
            "tool": options["tool"],
            "pattern": options["pattern"],
            "outside_cwd": options["outside_cwd"],
            "decision": options["decision"],
            "wait_seconds": options["wait"],
            "fallback": options["fallback"],
            "note": options["note"],
            "step_up": options["step_up"],
        }
        try:
            board = selectors.board_get(slug)
            if options["add"]:
                defaults = {
                    "pattern": "",
                    "outside_cwd": False,
                    "decision": matching.ASK,
                    "wait_seconds": matching.WAIT_DEFAULT,
                    "fallback": matching.DENY,
                    "note": "",
                    "step_up": False,
                }
                given = {k: v for k, v in fields.items() if v is not None and k != "tool"}
                gaterules.gate_rule_add(
                    board=board,
                    actor="gaterules",
                    tool=options["add"],
                    before=options["before"],
                    **{**defaults, **given},
                )
            if options["change"] is not None:
                rule = gaterules.rule_numbered(board, options["change"])
                gaterules.gate_rule_change(
                    board=board, actor="gaterules", rule_id=rule.pk, **fields
                )
            if options["move"] is not None:
                if options["to"] is None:
                    raise CommandError("--move N needs --to M: the rule's new number")
                rule = gaterules.rule_numbered(board, options["move"])
                gaterules.gate_rule_move(
                    board=board, actor="gaterules", rule_id=rule.pk, to=options["to"]
                )
            if options["remove"] is not None:
                rule = gaterules.rule_numbered(board, options["remove"])
                gaterules.gate_rule_remove(board=board, actor="gaterules", rule_id=rule.pk)
            if options["test"] is not None:
                found = gaterules.gate_rule_test(
                    board=board, tool=options["test_tool"], text=options["test"], cwd=options["cwd"]
                )
                self.stdout.write(found.sentence)
                return
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
        self._list(board)

    def _list(self, board: Board) -> None:
        rows = GateRule.objects.filter(board=board).order_by("position", "id")
        for number, rule in enumerate(rows, 1):
            wait = (
                f" (wait {rule.wait_seconds} s, then {rule.fallback})"
                if rule.decision == matching.ASK
                else ""
            )
            where = " outside the folder" if rule.outside_cwd else ""
            passkey = " (approved with a passkey)" if rule.step_up and wait else ""
            pattern = f" ~ {rule.pattern}" if rule.pattern else ""
            if rule.session_id:
                where += f" in session {rule.session_id}"
            self.stdout.write(
                f"{number}\t{rule.tool}{pattern}{where} → {rule.decision}{wait}{passkey}  {rule.note}"
            )
