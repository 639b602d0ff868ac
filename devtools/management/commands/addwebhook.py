"""``python manage.py addwebhook SLUG URL [KIND …]``: add a webhook endpoint to a board, as
its admin would on the board's Webhooks page (``subscriptions.webhook_add``); prints the
endpoint's id and its secret. The live-server harness uses it (``Cluster.webhook``)."""

from django.core.management.base import BaseCommand, CommandError, CommandParser

from boards.core import selectors
from boards.core.errors import ServiceError
from boards.webhooks import subscriptions


class Command(BaseCommand):
    help = "Add a webhook endpoint to a board; prints its id and secret."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("url")
        parser.add_argument("kinds", nargs="*", help="signals it subscribes to (none: all)")
        parser.add_argument("--actor", default="admin", help="who the board's log names")

    def handle(
        self, *args: object, slug: str, url: str, kinds: list[str], actor: str, **options: object
    ) -> None:
        try:
            hook, secret = subscriptions.webhook_add(
                board=selectors.board_get(slug), actor=actor, url=url, kinds=kinds
            )
        except ServiceError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(f"{hook.pk} {secret}")
