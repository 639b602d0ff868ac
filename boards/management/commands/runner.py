"""``python manage.py runner`` / ``agent-kanban runner``: the runner's options, handed to
``boards.runner.program`` (SPEC §16), which imports nothing of the board."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from boards.runner import program


class Command(BaseCommand):
    help = (
        "Start a runner: it connects to the board (outbound only) and runs coding clients "
        "on cards in git worktrees of the repositories it is given."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        program.add_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        code = program.serve(options)
        if code:
            raise CommandError("the runner stopped", returncode=code)
