"""Answers carry the run that generates them; the reaper's query gets its index."""

from django.db import migrations, models


def runs_for_streaming(apps, schema_editor):  # type: ignore[no-untyped-def]
    # An answer left streaming by an older version gets a run of its own, so the reaper
    # (which reads runs) can still finish it.
    import uuid

    Message = apps.get_model("conversations", "Message")
    for message in Message.objects.filter(status="streaming", run_id__isnull=True):
        message.run_id = uuid.uuid4()
        message.run_started_at = message.created_at
        message.save(update_fields=["run_id", "run_started_at"])


class Migration(migrations.Migration):
    dependencies = [
        ("conversations", "0005_answer_finished_at_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="message",
            name="run_id",
            field=models.UUIDField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="message",
            name="run_started_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="message",
            name="run_client_id",
            field=models.UUIDField(blank=True, null=True),
        ),
        migrations.AddIndex(
            model_name="message",
            index=models.Index(
                condition=models.Q(("status", "streaming")),
                fields=["run_started_at"],
                name="answer_streaming_run",
            ),
        ),
        migrations.RunPython(runs_for_streaming, migrations.RunPython.noop),
    ]
