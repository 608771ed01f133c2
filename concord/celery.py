from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "concord.settings")

app = Celery("concord")
# Only CELERY_-prefixed settings are read; tests assert that the ones we rely on arrived
# (a misspelt prefix would silently drop them).
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
