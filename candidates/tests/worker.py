"""``python -m candidates.tests.worker <celery worker args>``: a Celery worker for tests and the benchmark.

The same app and settings as production, except:
- the Redis broker gives unacknowledged messages back after ``CONCORD_TEST_VISIBILITY_TIMEOUT``
  seconds (default 5) instead of two hours, so a test can see redelivery within its time (the
  fault tests set it to production's 7200, so only the lease and the sweeper can save a job);
- ``CONCORD_TEST_ROW_DELAY`` seconds of sleep per progress call (per row of an import or a
  release build, per item of an OCR run), so a test can kill the worker in the middle of a job that is otherwise
  over before the kill lands.
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

row_delay = float(os.environ.get("CONCORD_TEST_ROW_DELAY", "0"))
if row_delay:
    import time

    from core.jobs import Progress
    from exports.build.ticker import _Ticker

    def slowed(call):
        def slow(self, *args, **kwargs):
            time.sleep(row_delay)
            return call(self, *args, **kwargs)

        return slow

    Progress.__call__ = slowed(Progress.__call__)
    _Ticker.__call__ = slowed(_Ticker.__call__)

    # Import chunks checkpoint by time, not through Progress: slow each row they import
    # (looked up as a module global at call time, so the patched function is the one used).
    import projects.imports as imports

    def slowed_row(call):
        def slow(*args, **kwargs):
            time.sleep(row_delay)
            return call(*args, **kwargs)

        return slow

    imports._import_row = slowed_row(imports._import_row)

    # OCR chunks likewise: each item they read.
    import projects.ocr as ocr

    ocr.item_ocr_read = slowed_row(ocr.item_ocr_read)

if __name__ == "__main__":
    app.worker_main(["worker", *sys.argv[1:]])
