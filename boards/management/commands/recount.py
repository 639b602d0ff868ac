"""``manage.py recount [SLUG ...] [--fix]``: check each board's kept open counts against
a count of its tasks, report any drift, and (``--fix``) set them right."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from boards.core.services.counts import recount
from boards.models import Board


class Command(BaseCommand):
    help = "Check the boards' kept open counts against their tasks (--fix sets them right)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slugs", nargs="*", help="Boards to check (all when none is named).")
        parser.add_argument("--fix", action="store_true", help="Set drifted counts right.")

    def handle(self, *args: Any, slugs: list[str], fix: bool, **options: Any) -> None:
        boards = Board.objects.order_by("slug")
        if slugs:
            boards = boards.filter(slug__in=slugs)
        drifted = 0
        for board in boards:
            drift = recount(board, fix=fix)
            if not drift:
                self.stdout.write(f"{board.slug}: counts agree")
                continue
            drifted += 1
            parts = ", ".join(f"{k} kept {a} counted {b}" for k, (a, b) in drift.items())
            self.stdout.write(f"{board.slug}: {parts}" + (" (fixed)" if fix else ""))
        if drifted and not fix:
            raise SystemExit(1)
