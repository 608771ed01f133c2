"""replay_path (a server path) becomes replay_file (a name in the project's replay folder).

Existing files are copied into var/replay/<project id>/ under their base name, so providers
keep working; a file that cannot be found leaves the name set, and the provider's next task
fails with "replay file <name> is not readable" until a lead uploads it.
"""

import re
import shutil
from pathlib import Path

from django.conf import settings
from django.db import migrations, models

NAME = re.compile(r"[^A-Za-z0-9._-]")


def move_files(apps, schema_editor):
    Provider = apps.get_model("candidates", "Provider")
    for p in Provider.objects.exclude(replay_file=""):
        old = Path(p.replay_file)
        name = NAME.sub("-", old.name) or "replay.jsonl"
        if not name.endswith(".jsonl"):
            name += ".jsonl"
        folder = Path(settings.VAR_DIR) / "replay" / str(p.project_id)
        if old.is_file():
            folder.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(old, folder / name)
        Provider.objects.filter(pk=p.pk).update(replay_file=name[:100])


class Migration(migrations.Migration):
    dependencies = [("candidates", "0002_jobs_on_job_base")]

    operations = [
        migrations.RenameField(model_name="provider", old_name="replay_path", new_name="replay_file"),
        migrations.RunPython(move_files, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="provider",
            name="replay_file",
            field=models.CharField(
                blank=True, max_length=100,
                help_text="replay: name of a JSONL file in the project's replay folder (uploaded on the providers page), "
                          "one {\"source_id\"|\"item_id\"|\"import_key\", \"reply\"} per line.",
            ),
        ),
    ]
