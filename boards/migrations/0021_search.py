"""Full-text search over tasks: an FTS5 table kept by triggers (SQLite) or a GIN index on
the weighted search vector (PostgreSQL); see ``boards.fulltext``."""

from django.db import migrations

from boards.core import fulltext


def forwards(apps, schema_editor):
    fulltext.install(schema_editor, apps.get_model("boards", "Task"))


def backwards(apps, schema_editor):
    fulltext.uninstall(schema_editor, apps.get_model("boards", "Task"))


class Migration(migrations.Migration):
    dependencies = [("boards", "0020_invites")]

    operations = [migrations.RunPython(forwards, backwards, elidable=False)]
