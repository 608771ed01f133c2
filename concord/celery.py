from __future__ import annotations

import os

from celery import Celery
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "concord.settings")

app = Celery("concord")
# Only CELERY_-prefixed settings are read; tests assert that the ones we rely on arrived
# (a misspelt prefix would silently drop them).
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
def _sweep_when_a_worker_starts(**kwargs) -> None:
    """A worker that starts (after a crash, a deploy) looks for jobs lost meanwhile at once,
    instead of waiting for the next beat (README "Jobs")."""
    app.send_task("core.sweep_jobs")
