"""``python manage.py pagequeries SLUG USERNAME``: how many database queries the board page
makes for that person (read only; ``bench`` reports it beside the page's time)."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext


class Command(BaseCommand):
    help = "Count the database queries of one board page load, for a logged-in person."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("slug")
        parser.add_argument("username")

    def handle(self, *args: object, slug: str, username: str, **options: object) -> None:
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user {username!r}")
        client = Client()
        client.force_login(user)
        with CaptureQueriesContext(connection) as captured:
            status = client.get(f"/boards/{slug}/").status_code
        if status != 200:
            raise CommandError(f"/boards/{slug}/ answered {status}")
        self.stdout.write(str(len(captured)))
