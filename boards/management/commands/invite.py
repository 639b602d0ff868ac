from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.urls import reverse

from boards.core import selectors, services
from boards.core.errors import ServiceError
from boards.core.services.members import INVITE_DAYS_DEFAULT, INVITE_DAYS_MAX
from boards.models import Role


class Command(BaseCommand):
    help = (
        "Invite a person with no account to a board with a role; prints the one-time "
        "sign-up link alone on stdout (KANBAN_PUBLIC_URL is its address)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("role", choices=Role.values)
        parser.add_argument(
            "--days",
            type=int,
            default=INVITE_DAYS_DEFAULT,
            help=f"how long the link works (1 to {INVITE_DAYS_MAX} days)",
        )

    def handle(self, *args: object, slug: str, role: str, days: int, **options: object) -> None:
        try:
            board = selectors.board_get(slug)
            _, raw = services.invite_create(board=board, role=role, actor="manage.py", days=days)
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(settings.KANBAN_PUBLIC_URL + reverse("invite", args=[raw]))
