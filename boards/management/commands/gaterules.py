"""``manage.py gaterules SLUG``: list a board's gate rules; ``--add``/``--remove`` change them."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from boards import gates, selectors, services
from boards.errors import ServiceError
from boards.models import GateRule


class Command(BaseCommand):
    help = "List, add or remove a board's gate rules (which agents' tool calls wait for a person)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument(
            "--add", metavar="TOOL", help="add a rule for these tools (Bash, Write|Edit, mcp__*)"
        )
        parser.add_argument(
            "--pattern", default="", help="regular expression over the command, path or URL"
        )
        parser.add_argument(
            "--outside-cwd", action="store_true", help="only paths outside the session's folder"
        )
        parser.add_argument("--decision", default=gates.ASK, choices=gates.DECISIONS)
        parser.add_argument(
            "--wait", type=int, default=gates.WAIT_DEFAULT, help="seconds to wait for a person"
        )
        parser.add_argument("--fallback", default=gates.DENY, choices=gates.FALLBACKS)
        parser.add_argument("--note", default="", help="what the rule guards, as people read it")
        parser.add_argument("--remove", type=int, metavar="ID", help="remove the rule with this id")

    def handle(self, *args: object, slug: str, **options: Any) -> None:
        try:
            board = selectors.board_get(slug)
            if options["add"]:
                services.gate_rule_add(
                    board=board,
                    actor="gaterules",
                    tool=options["add"],
                    pattern=options["pattern"],
                    outside_cwd=options["outside_cwd"],
                    decision=options["decision"],
                    wait_seconds=options["wait"],
                    fallback=options["fallback"],
                    note=options["note"],
                )
            if options["remove"] is not None:
                services.gate_rule_remove(board=board, actor="gaterules", rule_id=options["remove"])
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
        for rule in GateRule.objects.filter(board=board).order_by("position", "id"):
            wait = (
                f" (wait {rule.wait_seconds} s, then {rule.fallback})"
                if rule.decision == gates.ASK
                else ""
            )
            where = " outside the folder" if rule.outside_cwd else ""
            pattern = f" ~ {rule.pattern}" if rule.pattern else ""
            self.stdout.write(
                f"{rule.pk}\t{rule.tool}{pattern}{where} → {rule.decision}{wait}  {rule.note}"
            )
