"""One command from a fresh clone to a live board: migrate, a login, a demo board, serve."""

import io
import os
import secrets
import socket

import qrcode
from daphne.cli import CommandLineInterface
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from boards.core import services
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
        if not no_serve:
            # Before anything is printed: an address and a once-only password that no
            # server will answer on are worse than no output.
            busy = port_taken(host, port)
            if busy:
                raise CommandError(
                    f"Cannot serve on {host}:{port}: {busy}. Stop what listens there, "
                    "or choose another port with --port."
                )
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write("Database migrated.")
        if not settings.FROM_CHECKOUT or os.environ.get("KANBAN_DATA_DIR"):
            self.stdout.write(f"Data directory: {settings.KANBAN_DATA_DIR}")
        User = get_user_model()
        username = os.environ.get("KANBAN_ADMIN_USER", "admin")
        if not User.objects.filter(username=username).exists():
            password = os.environ.get("KANBAN_ADMIN_PASSWORD") or secrets.token_urlsafe(9)
            User.objects.create_superuser(username=username, email="", password=password)
            self.stdout.write(f"Created login: {username} / {password}  (shown once)")
        else:
            self.stdout.write(
                f"Log in as {username!r} (password shown when it was created; "
                f"change it with: {settings.KANBAN_COMMAND} changepassword {username})"
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
        self.stdout.write(qr_text(settings.KANBAN_PUBLIC_URL))
        self.stdout.write(
            f"On a phone: {settings.KANBAN_PUBLIC_URL}/  (KANBAN_PUBLIC_URL; pushes and "
            "passkeys need HTTPS under a host name, or localhost)"
        )
        if no_serve:
            return
        self.stdout.flush()
        CommandLineInterface().run(["-b", host, "-p", str(port), "kanban.asgi:application"])


def port_taken(host: str, port: int) -> str | None:
    """Why the server could not listen on host:port, or None when it can."""
    try:
        family, kind, protocol, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as error:
        return f"the address does not resolve ({error.strerror})"
    with socket.socket(family, kind, protocol) as probe:
        # Daphne (Twisted) listens with SO_REUSEADDR: a port held only by closed
        # connections is free for it, one with a listener is not.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as error:
            return error.strerror or str(error)
    return None


def qr_text(url: str) -> str:
    """``url`` as a QR code drawn with text, for a phone's camera (dark on a light
    terminal or light on a dark one: both scan)."""
    code = qrcode.QRCode(border=1)
    code.add_data(url + "/")
    out = io.StringIO()
    code.print_ascii(out=out, invert=True)
    return out.getvalue()
