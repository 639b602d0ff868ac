"""Re-read every task into the search index (SQLite's FTS5 table; PostgreSQL's index is
an expression index and never out of step)."""

from typing import Any

from django.core.management.base import BaseCommand
from django.db import connection

from boards.core import fulltext


class Command(BaseCommand):
    help = (
        "Rebuild the full-text search index from the tasks (SQLite; nothing to do on PostgreSQL)."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        if connection.vendor != "sqlite":
            self.stdout.write("PostgreSQL searches an expression index: nothing to rebuild.")
            return
        with connection.cursor() as cursor:
            if not fulltext.sqlite_install(cursor):
                cursor.execute(fulltext.FTS_REBUILD)
        self.stdout.write("Search index rebuilt.")
