"""Sums that an uncapped usage report once pushed past their columns (SQLite stored them; no
read of the row worked afterwards): set back to the caps the services now hold them to."""

from django.db import migrations

CLAMPS = [
    ("boards_board", "spent_usd", "1000000000"),
    ("boards_task", "cost_usd", "1000000"),
    ("boards_attempt", "cost_usd", "1000000"),
    ("boards_usage", "cost_usd", "10000"),
]


def clamp(apps, schema_editor):
    with schema_editor.connection.cursor() as cursor:
        for table, column, cap in CLAMPS:
            cursor.execute(
                f"UPDATE {table} SET {column} = %s WHERE {column} > %s",  # noqa: S608
                [cap, cap],
            )


class Migration(migrations.Migration):
    dependencies = [("boards", "0013_token_orchestrator")]

    operations = [migrations.RunPython(clamp, migrations.RunPython.noop)]
