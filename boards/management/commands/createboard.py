from django.core.management.base import BaseCommand, CommandError, CommandParser

from boards.core import services
from boards.core.errors import ServiceError


class Command(BaseCommand):
    help = "Create a board."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--name", default="")
        parser.add_argument("--admin", default="", help="a person who administers the board")

    def handle(self, *args: object, slug: str, name: str, admin: str, **options: object) -> None:
        try:
            board = services.board_create(slug=slug, name=name)
            if admin:
                services.member_set(board=board, username=admin, role="admin", actor="manage.py")
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(f"Created board {board.slug!r} ({board.name})")
