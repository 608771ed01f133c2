"""Every write path of the candidates app: providers, jobs, task execution, stage moves."""

from __future__ import annotations

import logging
import mimetypes
import random
import re
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit

from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Q
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
from core.errors import Invalid
from core.jobs import job_enqueue
from core.models import ACTIVE, JobStatus
from projects.imaging import image_path
from projects.models import Item, Project, Stage

log = logging.getLogger(__name__)

ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]{0,99}$")
MAX_TIMEOUT_SECONDS = 300.0  # below the task's soft time limit (tasks.py)
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
PENDING_STATES = (CandidateTask.Status.PENDING, CandidateTask.Status.RUNNING)


# -- providers ---------------------------------------------------------------------------------


def _replay_path_clean(value: str) -> str:
    # Replay files are read by the server: confine them to the var directory so a lead cannot
    # point a provider at arbitrary files on the host.
    root = Path(settings.VAR_DIR).resolve()
    path = Path(value)
    path = (path if path.is_absolute() else root / path).resolve()
    if root != path and root not in path.parents:
        raise Invalid(
            "The replay file must be inside the var folder.", errors={"replay_path": f"must be inside {root}"}
        )
    if not path.is_file():
        raise Invalid("No such replay file.", errors={"replay_path": f"no such file: {path}"})
    return str(path)


def _provider_clean(
    *,
    project: Project,
    instance: Provider | None,
    name: str,
    kind: str,
    model: str,
    base_url: str,
    api_key_env: str,
    replay_path: str,
    requests_per_minute: int,
    timeout_seconds: float,
) -> dict:
    errors: dict[str, str] = {}
    name, model, base_url, api_key_env, replay_path = (
        (name or "").strip(),
        (model or "").strip(),
        (base_url or "").strip(),
        (api_key_env or "").strip(),
        (replay_path or "").strip(),
    )
    if not name:
        errors["name"] = "Give the provider a name."
    elif len(name) > 80:
        errors["name"] = "At most 80 characters."
    elif Provider.objects.filter(project=project, name=name).exclude(pk=getattr(instance, "pk", None)).exists():
        errors["name"] = "Another provider of this project has this name."
    if kind not in ProviderKind.values:
        errors["kind"] = f"Unknown kind; choose one of {', '.join(ProviderKind.values)}."
    if not model:
        errors["model"] = "Give the model name the endpoint expects."
    elif len(model) > 200:
        errors["model"] = "At most 200 characters."
    if base_url:
        # Not URLValidator: self-hosted servers often have bare host names (http://vllm:8000/v1).
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in base_url):
            errors["base_url"] = "Give an http(s) URL, e.g. http://127.0.0.1:8000/v1."
    elif kind == ProviderKind.OPENAI_COMPATIBLE:
        errors["base_url"] = "An OpenAI-compatible server needs its base URL (e.g. http://gpu-host:8000/v1)."
    if api_key_env and not ENV_NAME.match(api_key_env):
        errors["api_key_env"] = (
            "Give the NAME of an environment variable (upper-case letters, digits and _, e.g. OPENAI_API_KEY), "
            "never the key itself."
        )
    elif not api_key_env and kind in (ProviderKind.OPENAI, ProviderKind.GEMINI):
        errors["api_key_env"] = "Name the environment variable that holds the API key (e.g. OPENAI_API_KEY)."
    if kind == ProviderKind.REPLAY:
        if not replay_path:
            errors["replay_path"] = "A replay provider needs a JSONL file."
        else:
            try:
                replay_path = _replay_path_clean(replay_path)
            except Invalid as exc:
                errors.update(exc.errors)
    else:
        replay_path = ""
    try:
        requests_per_minute = int(requests_per_minute)
        if not 1 <= requests_per_minute <= 100_000:
            raise ValueError
    except (TypeError, ValueError):
        errors["requests_per_minute"] = "A whole number between 1 and 100000."
    try:
        timeout_seconds = float(timeout_seconds)
        if not 1 <= timeout_seconds <= MAX_TIMEOUT_SECONDS:
            raise ValueError
    except (TypeError, ValueError):
        errors["timeout_seconds"] = f"Between 1 and {MAX_TIMEOUT_SECONDS:g} seconds."
    if errors:
        raise Invalid(" ".join(errors.values()), errors=errors)
    return {
        "name": name,
        "kind": kind,
        "model": model,
        "base_url": base_url,
        "api_key_env": api_key_env,
        "replay_path": replay_path,
        "requests_per_minute": requests_per_minute,
        "timeout_seconds": timeout_seconds,
    }


def provider_create(
    *,
    project: Project,
    name: str,
    kind: str,
    model: str,
    base_url: str = "",
    api_key_env: str = "",
    replay_path: str = "",
    requests_per_minute: int = 60,
    timeout_seconds: float = 60.0,
    enabled: bool = True,
) -> Provider:
    """Raises Invalid with {field: message} on bad input; never stores an API key."""
    clean = _provider_clean(
        project=project,
        instance=None,
        name=name,
        kind=kind,
        model=model,
        base_url=base_url,
        api_key_env=api_key_env,
        replay_path=replay_path,
        requests_per_minute=requests_per_minute,
        timeout_seconds=timeout_seconds,
    )
    try:
        with transaction.atomic():
            return Provider.objects.create(project=project, enabled=enabled, **clean)
    except IntegrityError:
        raise Invalid(
            "Another provider of this project has this name.",
            errors={"name": "Another provider of this project has this name."},
        ) from None


def provider_update(
    *,
    provider: Provider,
    name: str,
    kind: str,
    model: str,
    base_url: str = "",
    api_key_env: str = "",
    replay_path: str = "",
    requests_per_minute: int = 60,
    timeout_seconds: float = 60.0,
    enabled: bool = True,
) -> Provider:
    clean = _provider_clean(
        project=provider.project,
        instance=provider,
        name=name,
        kind=kind,
        model=model,
        base_url=base_url,
        api_key_env=api_key_env,
        replay_path=replay_path,
        requests_per_minute=requests_per_minute,
        timeout_seconds=timeout_seconds,
    )
    for key, value in clean.items():
        setattr(provider, key, value)
    provider.enabled = enabled
    try:
        with transaction.atomic():
            provider.save()
    except IntegrityError:
        raise Invalid(
            "Another provider of this project has this name.",
            errors={"name": "Another provider of this project has this name."},
        ) from None
    return provider


def provider_set_enabled(*, provider: Provider, enabled: bool) -> Provider:
    Provider.objects.filter(pk=provider.pk).update(enabled=enabled, updated_at=timezone.now())
    provider.enabled = enabled
    return provider


# -- jobs --------------------------------------------------------------------------------------


def parse_item_ids(text: str) -> list[int]:
    """Item ids typed by a lead: numbers separated by commas, spaces or new lines."""
    ids, bad = [], []
    for token in re.split(r"[\s,;]+", text or ""):
        if not token:
            continue
        if token.isdigit() and len(token) < 19:
            ids.append(int(token))
        else:
            bad.append(token)
    if bad:
        shown = ", ".join(bad[:5]) + ("…" if len(bad) > 5 else "")
        message = f"Not item ids: {shown}. Give numbers separated by commas or spaces."
        raise Invalid(message, errors={"item_ids": message})
    return list(dict.fromkeys(ids))


def _items_for_job(*, project: Project, item_ids: list[int] | None) -> list[int]:
    if item_ids is None:
        return list(Item.objects.filter(project=project, stage=Stage.NEW).order_by("id").values_list("id", flat=True))
    ids = list(dict.fromkeys(int(i) for i in item_ids))
    found = set(Item.objects.filter(project=project, pk__in=ids).values_list("id", flat=True))
    missing = [i for i in ids if i not in found]
    if missing:
        shown = ", ".join(map(str, missing[:10])) + ("…" if len(missing) > 10 else "")
        message = f"No such item in this project: {shown}."
        raise Invalid(message, errors={"item_ids": message})
    return ids


def candidate_job_start(
    *, project: Project, user, item_ids: list[int] | None = None, enqueue: bool = True
) -> CandidateJob:
    """One task per (item, enabled provider); the job's own Celery task publishes them.

    ``item_ids=None`` means every item in stage ``new``. Pairs that already have a successful
    candidate for the current prompt version are recorded as done and not sent again.
    """
    providers = list(Provider.objects.filter(project=project, enabled=True).order_by("id"))
    if not providers:
        raise Invalid("No enabled provider: add or enable one on the providers page first.")
    ids = _items_for_job(project=project, item_ids=item_ids)
    if not ids:
        raise Invalid(
            "No item to generate candidates for: every item has left stage “new”. Select items by id to regenerate."
        )
    prompt = prompt_for_project(project)
    with transaction.atomic():
        job = CandidateJob.objects.create(
            project=project, created_by=user, prompt_version=prompt.version, progress_total=len(ids) * len(providers)
        )
        existing = set(
            Candidate.objects.filter(
                item_id__in=ids, provider__in=providers, prompt_version=prompt.version, parse_error=""
            ).values_list("item_id", "provider_id")
        )
        CandidateTask.objects.bulk_create(
            [
                CandidateTask(
                    job=job,
                    item_id=item_id,
                    provider=p,
                    status=CandidateTask.Status.DONE if (item_id, p.pk) in existing else CandidateTask.Status.PENDING,
                )
                for item_id in ids
                for p in providers
            ]
        )
        if enqueue:
            job_enqueue(job)
    candidate_job_finish_if_complete(job_id=job.pk)
    job.refresh_from_db()
    return job


def _job_heartbeat(job_id: int) -> None:
    """A task outcome: the job is alive (see CandidateJob)."""
    CandidateJob.objects.filter(pk=job_id, status__in=ACTIVE).update(heartbeat_at=timezone.now())


def candidate_job_retry_failed(*, job: CandidateJob, enqueue: bool = True) -> int:
    """Put the job's failed tasks back in the queue; returns how many."""
    with transaction.atomic():
        failed = list(CandidateTask.objects.select_for_update().filter(job=job, status=CandidateTask.Status.FAILED))
        if not failed:
            return 0
        # A reply without a JSON object or without any usable field was stored for inspection;
        # it must not block a new try (the unique constraint would).
        pairs = Q()
        for t in failed:
            pairs |= Q(item_id=t.item_id, provider_id=t.provider_id)
        unusable = [
            c.pk
            for c in Candidate.objects.filter(pairs).only("id", "parse_error", "fields")
            if c.parse_error or not c.fields
        ]
        Candidate.objects.filter(pk__in=unusable).delete()
        CandidateTask.objects.filter(pk__in=[t.pk for t in failed]).update(
            status=CandidateTask.Status.PENDING, attempts=0, error="", lease_until=None, updated_at=timezone.now()
        )
        CandidateJob.objects.filter(pk=job.pk).update(
            status=CandidateJob.Status.PENDING, finished_at=None, cancel_requested=False, error=""
        )
        if enqueue:
            job_enqueue(job)
    job.refresh_from_db()
    return len(failed)


def candidate_job_finish_if_complete(*, job_id: int) -> bool:
    """Mark the job done when no task is pending; its items then move to annotating.

    Call after the caller's own status change has committed: the last task to finish then
    sees every other task's final status (READ COMMITTED), and the conditional update lets
    exactly one caller finish the job.
    """
    S = CandidateTask.Status
    counts = CandidateTask.objects.filter(job_id=job_id).aggregate(
        open=Count("id", filter=Q(status__in=PENDING_STATES)),
        ended=Count("id", filter=Q(status__in=(S.DONE, S.FAILED, S.CANCELLED))),
    )
    now = timezone.now()
    CandidateJob.objects.filter(pk=job_id, status__in=ACTIVE).update(progress_done=counts["ended"], heartbeat_at=now)
    if counts["open"]:
        return False
    cancelled = CandidateJob.objects.filter(pk=job_id, cancel_requested=True).exists()
    finished = CandidateJob.objects.filter(pk=job_id, status__in=ACTIVE).update(
        status=JobStatus.CANCELLED if cancelled else JobStatus.DONE,
        finished_at=now,
        heartbeat_at=now,
    )
    if finished:
        Item.objects.filter(
            pk__in=CandidateTask.objects.filter(job_id=job_id).values("item_id"), stage=Stage.NEW
        ).update(stage=Stage.ANNOTATING)
    return bool(finished)


def item_advance_if_complete(*, item: Item) -> bool:
    """new -> annotating once the item has a usable candidate from every enabled provider."""
    enabled = set(Provider.objects.filter(project_id=item.project_id, enabled=True).values_list("id", flat=True))
    if not enabled:
        return False
    have = {
        provider_id
        for provider_id, fields in Candidate.objects.filter(
            item=item, provider_id__in=enabled, parse_error=""
        ).values_list("provider_id", "fields")
        if fields
    }
    if have != enabled:
        return False
    return bool(Item.objects.filter(pk=item.pk, stage=Stage.NEW).update(stage=Stage.ANNOTATING))


def items_start_annotation(*, project: Project, item_ids: list[int] | None = None) -> int:
    """Lead action "start annotation without candidates": new -> annotating. Returns the count."""
    qs = Item.objects.filter(project=project, stage=Stage.NEW)
    if item_ids is not None:
        _items_for_job(project=project, item_ids=item_ids)  # unknown ids are an error, not ignored
        qs = qs.filter(pk__in=item_ids)
    return qs.update(stage=Stage.ANNOTATING)


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
