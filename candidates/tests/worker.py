"""``python -m candidates.tests.worker <celery worker args>``: a Celery worker for tests and the benchmark.

The same app and settings as production, except that the Redis broker gives unacknowledged
messages back after ``CONCORD_TEST_VISIBILITY_TIMEOUT`` seconds (default 5) instead of an hour,
so a test can kill a worker and see its messages redelivered within the test's time.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "concord.settings")

import django

django.setup()

from concord.celery import app  # noqa: E402

visibility = float(os.environ.get("CONCORD_TEST_VISIBILITY_TIMEOUT", "5"))
app.conf.broker_transport_options = {
    **(app.conf.broker_transport_options or {}),
    "visibility_timeout": visibility,
    "unacked_restore_interval": 1,
    "unacked_restore_throttle": 1,
}

if __name__ == "__main__":
    app.worker_main(["worker", *sys.argv[1:]])
