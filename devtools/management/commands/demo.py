"""``python manage.py demo``: a simulated team of agents working a plan on a running board.

The team and its plan live in ``devtools.demo``; this command checks the server,
gets the team a token, runs it and prints what it did. Watch it on the board:
``<url>/boards/<board>/``.

Tokens: unless ``--token`` is given, the command makes sure the board exists and
issues itself a team token *in-process* (``services.token_issue``), so it must run
against the same database as the server (same ``DATABASE_URL``); the token is
revoked when the demo ends. With ``--token`` (a team token from the board's
"Agent tokens" or ``manage.py issuetoken BOARD demo --team``) it needs no
database at all. Every agent names itself in the ``X-Agent`` header:
``orchestrator``, ``worker-1`` … ``worker-N``.

Workers claim with ``TaskClaim {}`` (the lowest-numbered ready task on the board),
so on a board with other ready work they take that too, as real agents would.
The demo ends when no task of its plan can make progress any more: every task is
finished, or waits on a failed or cancelled task. ``--max-seconds`` is a safety
stop (exit status 1).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError, connections

from boards.core import services
from boards.models import AgentToken, Board, hash_token
from devtools.demo.team import (
    DemoError,
    ServerUnreachable,
    Team,
    check_token,
    run_team,
    server_check,
    summary_lines,
)


class Command(BaseCommand):
    help = (
        "Run a simulated agent team (an orchestrator and N workers) against a running "
        "board, through the HTTP tool API only."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--board", default="demo", help="board slug (created if missing)")
        parser.add_argument("--agents", type=int, default=3, help="number of workers")
        parser.add_argument(
            "--speed", type=float, default=1.0, help="work this many times faster (10 = 10x)"
        )
        parser.add_argument(
            "--url", default="http://127.0.0.1:8000", help="address of the running server"
        )
        parser.add_argument(
            "--seed", type=int, default=None, help="decides which tasks fail (default: random)"
        )
        parser.add_argument(
            "--max-seconds", type=float, default=600.0, help="safety stop (exit status 1)"
        )
        parser.add_argument(
            "--token",
            default="",
            help="a team token of the board; without it the command issues one itself "
            "(it must then use the server's database)",
        )

    def handle(self, *args: object, **options: Any) -> None:
        board: str = options["board"]
        agents: int = options["agents"]
        speed: float = options["speed"]
        url: str = options["url"].rstrip("/")
        seed: int = options["seed"] if options["seed"] is not None else random.randrange(10_000)
        max_seconds: float = options["max_seconds"]
        if not 1 <= agents <= 50:
            raise CommandError("--agents: 1 to 50")
        if speed <= 0:
            raise CommandError("--speed must be above 0")
        if max_seconds <= 0:
            raise CommandError("--max-seconds must be above 0")
        started = time.monotonic()
        lock = threading.Lock()

        def write(agent: str, text: str) -> None:
            with lock:
                self.stdout.write(f"{agent:<12} {text}")
                self.stdout.flush()

        try:
            server_check(url, board)
        except ServerUnreachable as exc:
            raise CommandError(
                f"No board server answers at {url} ({exc}). Start one with "
                "'python manage.py up', or pass --url."
            ) from exc
        token, revoke = self.team_token(board, options["token"])
        team = Team(url, board, token, speed, seed, write, verbose=options["verbosity"] > 1)
        try:
            check_token(team)
            self.stdout.write(
                f"Demo team on {team.board_url}: orchestrator + {agents} worker(s), "
                f"speed {speed:g}, seed {seed} (repeat with --seed {seed})"
            )
            progress = run_team(team, agents, started + max_seconds)
        except DemoError as exc:
            raise CommandError(str(exc)) from exc
        finally:
            revoke()
        for line in summary_lines(progress, time.monotonic() - started):
            self.stdout.write(line)
        if team.errors:
            raise CommandError("; ".join(team.errors))
        if progress is None or not progress.settled:
            waiting = progress is not None and progress.counts()["awaiting approval"] > 0
            raise CommandError(
                f"Stopped after --max-seconds {max_seconds:g} with work still open"
                + (": a task still waits for a person's approval on the board" if waiting else "")
            )

    def team_token(self, slug: str, given: str) -> tuple[str, Callable[[], None]]:
        """The team token the agents use, and how to revoke it when the demo ends."""
        if given:
            return given, lambda: None
        try:
            board = Board.objects.filter(slug=slug).first()
            if board is None:
                board = services.board_create(
                    slug=slug, name="Demo board" if slug == "demo" else slug
                )
                self.stdout.write(f"Created board {slug!r}.")
            raw = services.token_issue(board=board, team=True, created_by="demo command")
        except DatabaseError as exc:
            raise CommandError(
                f"Could not reach this project's database ({exc}). Run the demo with the "
                "server's DATABASE_URL (after 'python manage.py up'), or pass --token."
            ) from exc
        finally:
            connections.close_all()

        def revoke() -> None:
            try:
                token = AgentToken.objects.filter(token_hash=hash_token(raw)).first()
                if token is not None:
                    services.token_revoke(board=token.board, token_id=token.pk)
            except DatabaseError:
                pass
            finally:
                connections.close_all()

        return raw, revoke
