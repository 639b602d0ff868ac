"""A board's lease now takes 5 to 86,400 seconds, as a claim's does (limits.LEASE_MIN): a
board that stored less is raised to the floor, so its settings page can be saved again."""

from django.db import migrations

LEASE_MIN = 5  # limits.LEASE_MIN when this was written


def raise_to_floor(apps, schema_editor):
    Board = apps.get_model("boards", "Board")
    Board.objects.filter(lease_seconds__lt=LEASE_MIN).update(lease_seconds=LEASE_MIN)


class Migration(migrations.Migration):
    dependencies = [("boards", "0023_event_kinds")]

    operations = [migrations.RunPython(raise_to_floor, migrations.RunPython.noop)]
