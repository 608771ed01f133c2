"""Running one (item, provider) task: rate-limit slot, lease, provider call, storing the reply.

Order in candidate_task_execute: guard on status -> existing candidate -> rate-limit slot -> lease
(a conditional update, so two deliveries of the same task never call the provider together) ->
call -> store under the unique constraint -> mark done and maybe move the item / finish the job.
"""

from __future__ import annotations

import logging
import mimetypes
import random
import time
from dataclasses import dataclass
from datetime import timedelta

from celery.exceptions import SoftTimeLimitExceeded
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from candidates.models import Candidate, CandidateJob, CandidateTask, Provider, ProviderKind
from candidates.parsing import parse_reply
from candidates.prompts import prompt_for_project
from candidates.providers import (
    CandidateRequest,
    PermanentProviderError,
    ProviderConfig,
    ProviderError,
    TransientProviderError,
    client_for,
)
from candidates.ratelimit import DEFAULT_HORIZON, rate_limit_penalize, rate_limit_reserve
from candidates.services.jobs import (
    PENDING_STATES,
    _job_heartbeat,
    candidate_job_finish_if_complete,
    item_advance_if_complete,
)
from core.models import JobStatus
from projects.imaging import image_path
from projects.models import Item

log = logging.getLogger(__name__)

# A task sleeps in the worker only for a slot this close; farther slots re-schedule the task.
MAX_INLINE_WAIT = 0.5
# Extra lease time beyond the provider timeout before another execution may take over a task.
LEASE_MARGIN = timedelta(seconds=5)
# A re-scheduled task is due this long before its slot and sleeps the rest in the worker.
SLOT_LEAD = 0.2
# A re-scheduled task that starts more than one interval (at least this) after its reserved slot
# gives it up instead of sending a late request next to the on-time ones: any window then sees
# at most one request more than the limit allows.
LATE_SLOT_TOLERANCE = 0.25


# -- executing one task ------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What happened to a task run; the Celery task turns it into retry / reschedule / done."""

    kind: str  # done | failed | skipped | wait | retry
    wait: float = 0.0
    slot_at: float | None = None  # wait: the rate-limit slot reserved for the next run (time.time())
    retry_after: float | None = None
    error: str = ""


def _image_mime(item: Item) -> str:
    ext = item.image.rsplit(".", 1)[-1].lower()
    return {"jpg": "image/jpeg", "png": "image/png", "gif": "image/gif", "webp": "image/webp"}.get(
        ext, mimetypes.guess_type(item.image)[0] or "application/octet-stream"
    )


def candidate_task_release(*, task_id: int, error: str) -> None:
    """A running task goes back to pending (its lease is dropped) until its retry arrives."""
    CandidateTask.objects.filter(pk=task_id, status=CandidateTask.Status.RUNNING).update(
        status=CandidateTask.Status.PENDING, lease_until=None, error=error[:2000], updated_at=timezone.now()
    )
    job_id = CandidateTask.objects.filter(pk=task_id).values_list("job_id", flat=True).first()
    if job_id is not None:
        _job_heartbeat(job_id)


def candidate_task_fail(*, task_id: int, error: str) -> None:
    """Final failure (permanent error or retries exhausted); the lead may retry it later."""
    updated = CandidateTask.objects.filter(pk=task_id, status__in=PENDING_STATES).update(
        status=CandidateTask.Status.FAILED, lease_until=None, error=error[:2000], updated_at=timezone.now()
    )
    if updated:
        job_id = CandidateTask.objects.filter(pk=task_id).values_list("job_id", flat=True).first()
        candidate_job_finish_if_complete(job_id=job_id)


def _task_done(*, task: CandidateTask, error: str = "", failed: bool = False) -> None:
    status = CandidateTask.Status.FAILED if failed else CandidateTask.Status.DONE
    CandidateTask.objects.filter(pk=task.pk).exclude(status=CandidateTask.Status.DONE).update(
        status=status, lease_until=None, error=error[:2000], updated_at=timezone.now()
    )
    if not failed:
        item_advance_if_complete(item=task.item)
    candidate_job_finish_if_complete(job_id=task.job_id)


def candidate_store(
    *,
    item: Item,
    provider: Provider,
    prompt_version: str,
    reply_text: str,
    model_name: str,
    latency_ms: int | None,
    prompt_tokens: int | None,
    completion_tokens: int | None,
) -> Candidate:
    """Parse, normalize and store one reply; a second store of the same triple returns the first."""
    parsed = parse_reply(reply_text, schema=item.project.get_schema(), item_text=item.text)
    try:
        with transaction.atomic():
            return Candidate.objects.create(
                item=item,
                provider=provider,
                prompt_version=prompt_version,
                model_name=model_name[:200],
                raw_reply=reply_text,
                think=parsed.think,
                fields=parsed.fields,
                removed=parsed.removed,
                parse_error=parsed.error,
                latency_ms=latency_ms,
                prompt_tokens=prompt_tokens,
                completion_tokens=completion_tokens,
            )
    except IntegrityError:
        # A redelivered or concurrent run stored it first: the constraint keeps exactly one.
        return Candidate.objects.get(item=item, provider=provider, prompt_version=prompt_version)


def candidate_task_execute(*, task_id: int, slot_at: float | None = None) -> Outcome:
    """Run one (item, provider) task once. Never raises for provider or reply problems.

    Order: guard on status -> existing candidate -> rate-limit slot -> lease (a conditional
    update, so two deliveries of the same task never call the provider together) -> call ->
    store under the unique constraint -> mark done and maybe move the item / finish the job.

    ``slot_at``: a slot this task reserved on an earlier run (it was re-scheduled to it).
    """
    S = CandidateTask.Status
    task = CandidateTask.objects.select_related("item__project", "provider", "job").filter(pk=task_id).first()
    if task is None or task.status in (S.DONE, S.FAILED):
        return Outcome("skipped")
    provider, item = task.provider, task.item
    if task.job.cancel_requested or task.job.status == JobStatus.CANCELLED:
        CandidateTask.objects.filter(pk=task.pk, status__in=PENDING_STATES).update(
            status=S.CANCELLED, lease_until=None, updated_at=timezone.now()
        )
        candidate_job_finish_if_complete(job_id=task.job_id)
        return Outcome("skipped")
    _job_heartbeat(task.job_id)
    if not provider.enabled:
        candidate_task_fail(task_id=task.pk, error="The provider was disabled.")
        return Outcome("failed", error="provider disabled")
    prompt = prompt_for_project(item.project)
    if Candidate.objects.filter(item=item, provider=provider, prompt_version=prompt.version, parse_error="").exists():
        _task_done(task=task)
        return Outcome("done")

    # A replay provider reads a local file: there is no remote quota to protect.
    if provider.kind != ProviderKind.REPLAY:
        interval = 60.0 / provider.requests_per_minute
        if slot_at is not None and time.time() - slot_at > max(LATE_SLOT_TOLERANCE, interval):
            # Started too late (busy workers): sending now would bunch requests beyond the
            # provider's rate. Give the slot up and queue for a new one.
            log.info(
                "candidate task %s started %.2f s after its slot; taking a new one", task_id, time.time() - slot_at
            )
            slot_at = None
        if slot_at is None:
            grant = rate_limit_reserve(provider=provider, horizon=DEFAULT_HORIZON)
            if not grant.reserved:
                # Spread the next attempts over a quarter of the horizon: they find the backlog
                # still 3/4 full, so no slot goes unused, without every waiting task asking at once.
                return Outcome("wait", wait=grant.wait + random.uniform(0, DEFAULT_HORIZON / 4))
            slot_at = time.time() + grant.wait
        early = slot_at - time.time()
        if early > MAX_INLINE_WAIT:
            # Come back a little before the slot and sleep the rest here: a message due at the
            # exact slot would start late by the broker's and the pool's dispatch delays.
            return Outcome("wait", wait=early - SLOT_LEAD, slot_at=slot_at)
        if early > 0:
            time.sleep(early)

    now = timezone.now()
    lease = timedelta(seconds=provider.timeout_seconds) + LEASE_MARGIN
    claimed = (
        CandidateTask.objects.filter(pk=task.pk, status__in=PENDING_STATES)
        .filter(Q(lease_until__isnull=True) | Q(lease_until__lt=now))
        .update(status=S.RUNNING, lease_until=now + lease, attempts=F("attempts") + 1, updated_at=now)
    )
    if not claimed:
        current = CandidateTask.objects.filter(pk=task.pk).values("status", "lease_until").first()
        if current is None or current["status"] in (S.DONE, S.FAILED):
            return Outcome("skipped")
        # Another delivery is calling the provider; look again when its lease ends.
        remaining = (current["lease_until"] - now).total_seconds() if current["lease_until"] else 1.0
        return Outcome("wait", wait=max(1.0, remaining + 1.0))

    try:
        try:
            image = image_path(item.image).read_bytes()
        except (OSError, ValueError) as exc:
            raise PermanentProviderError(f"image file unreadable: {exc.__class__.__name__}") from exc
        request = CandidateRequest(
            system=prompt.system,
            user=prompt.user_text(item_text=item.text, title=item.title),
            image=image,
            image_mime=_image_mime(item),
            item_id=item.pk,
            source_id=item.source_id,
            import_key=item.import_key,
        )
        reply = client_for(ProviderConfig.from_provider(provider)).generate(request)
    except TransientProviderError as exc:
        if exc.status == 429:
            # Everyone waits, not only this task: the provider told us its quota is spent.
            rate_limit_penalize(provider=provider, seconds=exc.retry_after or 60.0 / provider.requests_per_minute)
        candidate_task_release(task_id=task.pk, error=str(exc))
        return Outcome("retry", retry_after=exc.retry_after, error=str(exc))
    except ProviderError as exc:
        candidate_task_fail(task_id=task.pk, error=str(exc))
        return Outcome("failed", error=str(exc))
    except SoftTimeLimitExceeded:
        candidate_task_release(task_id=task.pk, error="the request exceeded the task's time limit")
        return Outcome("retry", error="time limit")

    cand = candidate_store(
        item=item,
        provider=provider,
        prompt_version=prompt.version,
        reply_text=reply.text,
        model_name=reply.model_name,
        latency_ms=reply.latency_ms,
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
    )
    if cand.parse_error:
        _task_done(task=task, failed=True, error=f"The reply holds no usable JSON object ({cand.parse_error}).")
        return Outcome("failed", error=cand.parse_error)
    if not cand.fields:
        reasons = "; ".join(f"{r['field']}: {r['reason']}" for r in cand.removed[:5])
        _task_done(task=task, failed=True, error=f"No field of the schema could be read from the reply ({reasons}).")
        return Outcome("failed", error="no usable field")
    _task_done(task=task)
    return Outcome("done")


def candidate_job_run_inline(*, job: CandidateJob) -> None:
    """Run a job's pending tasks in this process (demo loading, management use), no broker."""
    for task_id in CandidateTask.objects.filter(job=job, status=CandidateTask.Status.PENDING).values_list(
        "id", flat=True
    ):
        slot_at = None
        for _ in range(100):
            outcome = candidate_task_execute(task_id=task_id, slot_at=slot_at)
            if outcome.kind != "wait":
                break
            time.sleep(outcome.wait)
            slot_at = outcome.slot_at
        if outcome.kind == "retry":
            candidate_task_fail(task_id=task_id, error=outcome.error)
