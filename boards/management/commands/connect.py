"""``python manage.py connect --url http(s)://HOST:PORT/boards/<slug>/``: set up every
installed coding client (or ``--client NAME``) to go through the board (SPEC §13)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from boards.clients import registry, setup
from boards.core import services
from boards.models import Board


class Command(BaseCommand):
    help = (
        "Write each installed coding client's user hooks (the forwarder, copied to "
        "~/.config/agent-kanban/ and run by this Python with -I -S, --client NAME) and the "
        "board's URL and token to ~/.config/agent-kanban/boards.json; --remove takes them "
        "out again."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--url", required=True, help="http(s)://HOST:PORT/boards/<slug>/")
        parser.add_argument(
            "--client",
            action="append",
            choices=registry.NAMES,
            help="a client to set up, installed or not (repeat; default: those on PATH)",
        )
        parser.add_argument(
            "--token",
            default="",
            help="the board token the hooks send (default: $KANBAN_TOKEN, else a new team "
            "token when the board is on this server)",
        )
        parser.add_argument("--agent", default="", help="the agent's name, for a team token")
        parser.add_argument("--remove", action="store_true", help="take the hooks out")
        parser.add_argument("--dry-run", action="store_true", help="print, write nothing")
        parser.add_argument(
            "--system",
            action="store_true",
            help="write each client's managed (system) settings, as root: Claude Code "
            "/etc/claude-code/managed-settings.json, Codex /etc/codex/hooks.json, Gemini "
            "/etc/gemini-cli/settings.json, Qwen /etc/qwen-code/settings.json (a project's "
            "own settings cannot switch those off); the forwarder goes to /etc/agent-kanban",
        )
        parser.add_argument(
            "--python",
            default="",
            help="the interpreter the hooks run (default: this one, or the one its venv links "
            "to); refused inside a project an agent works in",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        env = dict(os.environ)
        home = setup.Home(Path(env.get("HOME") or Path.home()), env)
        try:
            board = setup.board_of(options["url"])
        except setup.SetupError as exc:
            raise CommandError(str(exc)) from exc
        clients = options["client"] or setup.installed(env)
        if not clients:
            raise CommandError(
                "No coding client found on PATH (looked for "
                + ", ".join(setup.BINARIES.values())
                + "): name one with --client"
            )
        skipped = []
        if options["system"] and not options["client"]:
            # Found on PATH but with no managed scope: set up without --system.
            skipped = [name for name in clients if name not in setup.SYSTEM_SETTINGS]
            clients = [name for name in clients if name in setup.SYSTEM_SETTINGS]
        remove, dry = options["remove"], options["dry_run"]
        token = options["token"] or env.get("KANBAN_TOKEN", "")
        if not token and not remove:
            token = self._issue(board, dry)
        system = options["system"]
        try:
            python, note = setup.python_for_hooks(options["python"] or None, Path.cwd(), home.home)
            hook = setup.forwarder(python, home.forwarder_dir(system))
            # The forwarder first: the hooks written after it import it.
            changes = [] if remove else [setup.forwarder_change(home, python=python, system=system)]
            changes += [
                setup.client_change(name, home, hook=hook, remove=remove, system=system)
                for name in dict.fromkeys(clients)
            ]
            changes.append(setup.boards_change(home, board, token, options["agent"], remove=remove))
        except setup.SetupError as exc:
            raise CommandError(str(exc)) from exc
        if note and not remove:
            self.stdout.write(note)
        for name in skipped:
            self.stdout.write(
                f"{registry.BY_NAME[name].display}: no managed settings; run connect for it "
                "without --system"
            )
        for change in changes:
            label = registry.BY_NAME[change.client].display if change.client else "the board"
            if change.compile_with:
                label = "the forwarder"
            if dry:
                verb = "would remove" if change.text is None else "would write"
                self.stdout.write(f"# {label}: {verb} {change.path}")
                if change.text is not None and not change.compile_with:
                    self.stdout.write(_shown(change.text, token))
                continue
            try:
                setup.apply(change)
            except OSError as exc:
                raise CommandError(f"Cannot write {change.path}: {exc.strerror}") from exc
            except setup.SetupError as exc:
                raise CommandError(str(exc)) from exc
            problem = setup.check(change)
            if problem:
                raise CommandError(problem)
            verb = "removed from" if remove or change.text is None else "set up in"
            self.stdout.write(f"{label}: {verb} {change.path}")
            if change.advice:
                self.stdout.write(f"  {change.advice}")

    def _issue(self, board: setup.Board, dry: bool) -> str:
        row = Board.objects.filter(slug=board.slug).first()
        if row is None:
            raise CommandError(
                f"No board {board.slug!r} on this server to issue a token for: pass --token "
                "(from the board's Connect page) or set KANBAN_TOKEN"
            )
        if dry:
            return "<a new team token>"
        return services.token_issue(board=row, team=True, created_by="connect")


def _shown(text: str, token: str) -> str:
    """A file as printed: the token itself never on the screen."""
    return text.replace(token, "<token>") if token and len(token) > 8 else text
