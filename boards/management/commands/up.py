"""One command from a fresh clone to a live board: migrate, a login, a demo board, serve."""

import os
import secrets

from daphne.cli import CommandLineInterface
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser

from boards import services
from boards.models import Board


class Command(BaseCommand):
    help = "Migrate, make sure a login and a demo board exist, and serve HTTP + WebSocket."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
        parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
        parser.add_argument("--no-serve", action="store_true", help="prepare only")

    def handle(
        self, *args: object, host: str, port: int, no_serve: bool, **options: object
    ) -> None:
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write("Database migrated.")
        User = get_user_model()
        username = os.environ.get("KANBAN_ADMIN_USER", "admin")
        if not User.objects.filter(username=username).exists():
            password = os.environ.get("KANBAN_ADMIN_PASSWORD") or secrets.token_urlsafe(9)
            User.objects.create_superuser(username=username, email="", password=password)
            self.stdout.write(f"Created login: {username} / {password}  (shown once)")
        else:
            self.stdout.write(
                f"Log in as {username!r} (password shown when it was created; "
                f"change it with: python manage.py changepassword {username})"
            )
        if not Board.objects.filter(slug="demo").exists():
            board = services.board_create(slug="demo", name="Demo board")
            token = services.token_issue(board=board, agent="demo-agent", created_by="up")
            self.stdout.write(f"Created board 'demo' with an agent token: {token}")
        if User.objects.filter(username=username).exists():
            # The login administers the demo board (also when it is not a superuser).
            demo = Board.objects.get(slug="demo")
            services.member_set(board=demo, username=username, role="admin", actor="up")
        address = f"http://{host}:{port}/"
        self.stdout.write(f"Agent Kanban on {address}  (board: {address}boards/demo/)")
        if no_serve:
            return
        self.stdout.flush()
        CommandLineInterface().run(["-b", host, "-p", str(port), "kanban.asgi:application"])
