from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("boards", "0027_push_and_passkeys"),
    ]

    operations = [
        migrations.AddField(
            model_name="gaterule",
            name="session_id",
            field=models.CharField(blank=True, max_length=128),
        ),
    ]
