from django.core.management.base import BaseCommand, CommandError, CommandParser

from boards.core import services
from boards.core.errors import ServiceError
from boards.models import Board, Role


class Command(BaseCommand):
    help = "Give a person a role on a board (viewer, operator, approver, admin), or --remove them."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("username")
        parser.add_argument("role", nargs="?", choices=Role.values, default=Role.VIEWER)
        parser.add_argument("--remove", action="store_true", help="take them off the board")

    def handle(
        self, *args: object, slug: str, username: str, role: str, remove: bool, **options: object
    ) -> None:
        board = Board.objects.filter(slug=slug).first()
        if board is None:
            raise CommandError(f"No board {slug!r}")
        try:
            if remove:
                services.member_remove(board=board, username=username, actor="manage.py")
                self.stdout.write(f"{username} is no longer a member of {slug!r}")
            else:
                services.member_set(board=board, username=username, role=role, actor="manage.py")
                self.stdout.write(f"{username} is {role} on {slug!r}")
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
