"""Celery tasks: thin, idempotent, one per (item, provider).

The options below are asserted in tests (candidates/tests/test_tasks.py) on the task object,
so a typo cannot silently drop them.
"""
from __future__ import annotations

import logging
import random
import time

from celery import shared_task
from celery.signals import worker_init

log = logging.getLogger(__name__)

MAX_RETRIES = 6
BACKOFF_BASE = 5.0  # seconds: 5, 10, 20, 40, 80, 160 (x 0.5-1.0 jitter), about 5 minutes in all
BACKOFF_CAP = 300.0
# Far below the Redis broker's visibility timeout (3600 s in settings): a message waiting longer
# than that would be delivered a second time.
RETRY_AFTER_CAP = 1800.0

TASK_OPTIONS = {
    "bind": True,
    "acks_late": True,  # a worker killed mid-call leaves the message to be redelivered
    "reject_on_worker_lost": True,
    "max_retries": MAX_RETRIES,
    # Provider timeouts are capped at 300 s (services.MAX_TIMEOUT_SECONDS).
    "soft_time_limit": 360,
    "time_limit": 420,
    "ignore_result": True,
}


def backoff_delay(*, retries: int, retry_after: float | None = None, rng: random.Random | None = None) -> float:
    """Exponential backoff with jitter; never earlier than the server's Retry-After."""
    rng = rng or random
    exp = min(BACKOFF_CAP, BACKOFF_BASE * (2 ** max(0, retries)))
    delay = exp * rng.uniform(0.5, 1.0)
    if retry_after is not None:
        delay = max(delay, min(retry_after, RETRY_AFTER_CAP) + rng.uniform(0, 1.0))
    return delay


@worker_init.connect
def _preload_sdks(**kwargs) -> None:
    """Import the SDKs in the worker's main process, before the pool forks: otherwise every pool
    process imports them (~1.5 s of CPU each) on its first call, late for its rate-limit slot."""
    import google.genai  # noqa: F401
    import openai  # noqa: F401
    from google.genai import types  # noqa: F401


@shared_task(name="candidates.generate_candidate", **TASK_OPTIONS)
def candidate_task_run(self, task_id: int, slot_at: float | None = None) -> str:
    from candidates.services import candidate_task_execute, candidate_task_fail

    eager = bool(self.request.is_eager)
    retries = self.request.retries or 0
    while True:
        try:
            outcome = candidate_task_execute(task_id=task_id, slot_at=slot_at)
        except Exception as exc:  # a bug or a database outage: never leave the row "running"
            log.exception("candidate task %s crashed", task_id)
            from candidates.services import Outcome, candidate_task_release

            try:
                candidate_task_release(task_id=task_id, error=f"internal error: {type(exc).__name__}: {exc}")
            except Exception:  # noqa: BLE001 - the database may be the problem; the lease expires
                pass
            outcome = Outcome("retry", error=f"internal error: {type(exc).__name__}: {exc}")
        slot_at = None
        if outcome.kind == "wait":
            if not eager:
                # Waiting for a rate-limit slot is not a failure: re-schedule without spending a
                # retry, and free this worker for other providers' tasks meanwhile.
                self.apply_async(
                    args=(task_id,), kwargs={"slot_at": outcome.slot_at}, countdown=outcome.wait, retries=retries,
                )
                return "rescheduled"
            time.sleep(outcome.wait)  # eager (tests, inline runs): no queue to go back to
            slot_at = outcome.slot_at
            continue
        if outcome.kind == "retry":
            if retries >= self.max_retries:
                candidate_task_fail(task_id=task_id, error=f"gave up after {retries + 1} attempts: {outcome.error}")
                return "failed"
            if not eager:
                raise self.retry(countdown=backoff_delay(retries=retries, retry_after=outcome.retry_after))
            # Eager: like Celery's own eager retry, run again at once (with eager_propagates,
            # self.retry would raise out of the caller instead).
            retries += 1
            continue
        return outcome.kind


@shared_task(name="candidates.publish_tasks", acks_late=True, reject_on_worker_lost=True, max_retries=3,
             soft_time_limit=570, time_limit=600, ignore_result=True)
def candidate_tasks_publish_task(task_ids: list[int]) -> int:
    """Publish a chunk of a job's tasks, each timed for its rate-limit slot.

    A redelivery publishes the still-pending ones again; their duplicates are harmless (status
    guard, lease, unique constraint) and only cost rate-limit slots.
    """
    from candidates.services import candidate_tasks_publish_ids

    return candidate_tasks_publish_ids(task_ids=task_ids)
