import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

STATUS = models.CharField(
    choices=[("pending", "Queued"), ("running", "Running"), ("done", "Done"), ("failed", "Failed"),
             ("cancelled", "Cancelled")],
    db_index=True, default="pending", max_length=12,
)


def job_fields(model: str, *, skip: tuple = ()) -> list:
    fields = {
        "heartbeat_at": models.DateTimeField(blank=True, null=True,
                                             help_text="Renewed while a worker runs the job; stale = worker lost."),
        "attempts": models.PositiveIntegerField(default=0, help_text="How many times a worker started the job."),
        "taken_over_at": models.DateTimeField(blank=True, null=True,
                                              help_text="When a worker last took the job over from a lost one."),
        "cancel_requested": models.BooleanField(default=False),
        "phase": models.CharField(blank=True, help_text="What the job is doing now.", max_length=80),
        "progress_done": models.PositiveBigIntegerField(default=0),
        "progress_total": models.PositiveBigIntegerField(default=0),
        "created_by": models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL,
                                        related_name="+", to=settings.AUTH_USER_MODEL),
        "started_at": models.DateTimeField(blank=True, null=True),
    }
    return [migrations.AddField(model_name=model, name=k, field=v) for k, v in fields.items() if k not in skip]


class Migration(migrations.Migration):
    dependencies = [
        ("exports", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        # DedupScan: its start time becomes the job's creation time; the rest of the job fields are new.
        migrations.RenameField(model_name="dedupscan", old_name="started_at", new_name="created_at"),
        *job_fields("dedupscan"),
        migrations.AlterField(model_name="dedupscan", name="status", field=STATUS),
        migrations.AlterField(model_name="dedupscan", name="error",
                              field=models.TextField(blank=True, help_text="Why the job failed (the row or step is named).")),
        migrations.AlterModelOptions(name="dedupscan",
                                     options={"ordering": ["-created_at", "-id"], "verbose_name": "near-duplicate scan"}),
        # ExportJob already had status, phase, progress, error, created_by and the times.
        *job_fields("exportjob", skip=("phase", "progress_done", "progress_total", "created_by", "started_at")),
        migrations.AlterField(model_name="exportjob", name="status", field=STATUS),
        migrations.AlterField(model_name="exportjob", name="created_by",
                              field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL,
                                                      related_name="+", to=settings.AUTH_USER_MODEL)),
        migrations.AlterField(model_name="exportjob", name="phase",
                              field=models.CharField(blank=True, help_text="What the job is doing now.", max_length=80)),
        migrations.AlterField(model_name="exportjob", name="error",
                              field=models.TextField(blank=True, help_text="Why the job failed (the row or step is named).")),
        migrations.AlterModelOptions(name="exportjob",
                                     options={"ordering": ["-created_at", "-id"], "verbose_name": "release build"}),
    ]
