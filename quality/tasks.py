"""Celery task: compute one queued agreement report (thin; the work is in quality.services).

Options are asserted in quality/tests/test_reports.py on the task object, so a typo cannot
silently drop them.
"""

from __future__ import annotations

from celery import shared_task
from django.db import OperationalError

from quality.services import agreement_report_compute

TASK_OPTIONS = {
    "bind": True,
    "acks_late": True,  # a worker killed mid-report leaves the message for another worker
    "reject_on_worker_lost": True,
    "max_retries": 3,
    # Bootstrap CIs of every field for a large project take seconds to a few minutes.
    "soft_time_limit": 540,
    "time_limit": 600,
    "ignore_result": True,
}


@shared_task(name="quality.compute_agreement_report", **TASK_OPTIONS)
def agreement_report_task(self, report_id: int) -> str:
    try:
        row = agreement_report_compute(report_id=report_id)
    except OperationalError as exc:  # database restarting or locked: try again a little later
        raise self.retry(exc=exc, countdown=10 * (self.request.retries + 1)) from exc
    return row.status if row is not None else "not claimed"
