"""Model stages (projects.workflow): one item's conversion by the configured LLM.

MemeBench section 2: "Gemini-3.1-Pro then converts each explanation into the VIKR schema";
"quality control combines automated schema and entity-link validation with targeted manual
review". Here the reply is read leniently (candidates.parsing: fences, trailing commas, cut-off
objects) into the stage's fields, the automated checks (lib.vikr) turn every problem into a
flag for the reviewer, and nothing is repaired: a layer of five items stays five items, a
dangling link stays dangling, so the review stage shows exactly what the model wrote.

A provider error or a reply with no JSON object leaves the conversion FAILED with the reason,
for the lead to retry; the item waits in the model stage meanwhile (nothing is lost).

Locks: a conversion is claimed by a conditional UPDATE (pending, or running with an expired
lease -> running with a lease), so two executions never call the provider for one item.
"""

from __future__ import annotations

import hashlib
import logging
import time
from datetime import timedelta

from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from candidates.models import Conversion, ConversionJob, Provider, ProviderKind
from candidates.parsing import ReplyParseError, extract_json_object
from candidates.providers import (
    CandidateRequest,
    PermanentProviderError,
    ProviderConfig,
    ProviderError,
    TransientProviderError,
    client_for,
)
from candidates.ratelimit import rate_limit_penalize, rate_limit_reserve
from candidates.services.execution import LEASE_MARGIN, _image_mime
from core.errors import Invalid
from core.jobs import job_enqueue
from core.models import ACTIVE, JobStatus
from lib.vikr import LAYERS, vikr_checks
from projects.fieldtypes import REGISTRY, FieldError
from projects.fieldtypes.base import MAX_DRAFT_LIST, Context
from projects.imaging import image_path
from projects.models import Item, Project
from projects.workflow import StageSpec

log = logging.getLogger(__name__)
S = JobStatus

#: A transient provider error (429, 5xx, timeout) is tried again this many times in all.
MAX_ATTEMPTS = 4
#: Longest wait for a rate-limit slot inside the job (it re-asks after this).
MAX_SLOT_WAIT = 30.0


def conversion_provider(*, project: Project, stage: StageSpec) -> Provider:
    """The provider a model stage converts with: the one it names, else the project's only
    enabled provider. Raises PermanentProviderError naming what the lead must do."""
    name = (stage.model or {}).get("provider") or ""
    qs = Provider.objects.filter(project=project, enabled=True)
    if name:
        provider = qs.filter(name=name).first()
        if provider is None:
            raise PermanentProviderError(
                f"the stage converts with provider {name!r}, which does not exist or is disabled"
            )
        return provider
    providers = list(qs[:2])
    if len(providers) != 1:
        raise PermanentProviderError(
            "no enabled provider: add one on the providers page"
            if not providers
            else "several providers are enabled: choose the one that converts on the conversion page"
        )
    return providers[0]


def conversion_prompt(*, stage: StageSpec, schema, source_schema, source_values: dict, item: Item) -> tuple[str, str]:
    """(system, user) texts: the stage's prompt, then the earlier stage's values and the
    expected fields described by their types (projects.fieldtypes prompt_value)."""
    lines = ["Reference explanation and metadata (written by a person):"]
    for spec in source_schema.fields:
        ftype = source_schema.type_of(spec["name"])
        lines.append(
            f"- {spec.get('label') or spec['name']}: {ftype.display_text(spec, source_values.get(spec['name']))}"
        )
    if item.text:
        lines += ["", "Text found in the image at import (may be incomplete):", item.text]
    lines += ["", "Answer with one JSON object with these keys:"]
    for name in stage.fields:
        spec = schema.by_name[name]
        lines.append(f'- "{name}" ({spec.get("label") or name}): {schema.type_of(name).prompt_value(spec)}')
    return stage.model["prompt"], "\n".join(lines)


def _relaxed(spec: dict) -> dict:
    # Read everything the model wrote: a layer with too many or too few items is flagged by
    # the checks and left for the reviewer, not cut to size here.
    return {**spec, "min_items": 0, "max_items": MAX_DRAFT_LIST}


def conversion_read(*, reply_text: str, stage: StageSpec, schema) -> tuple[dict, list[dict]]:
    """(values, flags) of a reply. Raises ReplyParseError when it holds no JSON object or
    none of the stage's fields."""
    raw = extract_json_object(reply_text, expected_keys=set(stage.fields))
    for key in ("answer", "result", "output", "vikr"):
        if isinstance(raw.get(key), dict) and not set(stage.fields) & set(raw):
            raw = {**raw[key], **{k: v for k, v in raw.items() if k != key}}
    if not set(stage.fields) & set(raw):
        raise ReplyParseError(f"the reply holds none of the fields {', '.join(stage.fields)}")
    flags: list[dict] = []
    if "vikr" in stage.model.get("checks", ()):
        by_letter = dict(LAYERS)
        names = {letter: by_letter[letter] for letter in by_letter if by_letter[letter] in stage.fields}
        if len(names) == len(LAYERS):
            flags = vikr_checks(raw, fields=names)
    values = {}
    for name in stage.fields:
        spec, ftype = schema.by_name[name], REGISTRY[schema.by_name[name]["type"]]
        value = raw.get(name)
        if value is None or ftype.is_absent(spec, value):
            values[name] = ftype.absent(spec)
            if not any(f["field"] == name for f in flags):
                flags.append({"check": "schema", "field": name, "item": None, "message": f"{name}: missing"})
            continue
        try:
            values[name], notes = ftype.normalize_candidate(_relaxed(spec), value, Context(item_text=""))
        except FieldError as exc:
            values[name] = ftype.absent(spec)
            flags.append(
                {"check": "schema", "field": name, "item": None, "message": f"{name}: unreadable ({exc}), left empty"}
            )
            continue
        flags += [{"check": "schema", "field": name, "item": None, "message": f"{name}: {n}"} for n in notes]
    return values, flags


def _claim(conversion_id: int, lease: timedelta) -> bool:
    now = timezone.now()
    return bool(
        Conversion.objects.filter(pk=conversion_id)
        .filter(Q(status=S.PENDING) | Q(status=S.RUNNING, lease_until__lt=now))
        .update(status=S.RUNNING, lease_until=now + lease, attempts=F("attempts") + 1, updated_at=now)
    )


def _end(conversion_id: int, **fields) -> None:
    Conversion.objects.filter(pk=conversion_id, status=S.RUNNING).update(
        lease_until=None, updated_at=timezone.now(), **fields
    )


def conversion_execute(*, conversion: Conversion, stage: StageSpec, schema, source_schema, source_values: dict) -> str:
    """Convert one item once: "done", "failed", "retry" (a transient error, back to pending)
    or "skipped" (another execution holds it, or it ended). Never raises for provider or reply
    problems: they are recorded on the row for the lead."""
    item = conversion.item
    try:
        provider = conversion_provider(project=item.project, stage=stage)
    except PermanentProviderError as exc:
        if _claim(conversion.pk, timedelta(seconds=60)):
            _end(conversion.pk, status=S.FAILED, error=str(exc), finished_at=timezone.now())
            return "failed"
        return "skipped"
    if not _claim(conversion.pk, timedelta(seconds=provider.timeout_seconds) + LEASE_MARGIN):
        return "skipped"
    if provider.kind != ProviderKind.REPLAY:
        grant = rate_limit_reserve(provider=provider)
        while not grant.reserved:
            time.sleep(min(grant.wait, MAX_SLOT_WAIT))
            grant = rate_limit_reserve(provider=provider)
        time.sleep(max(0.0, grant.wait))
    system, user = conversion_prompt(
        stage=stage, schema=schema, source_schema=source_schema, source_values=source_values, item=item
    )
    prompt_sha = hashlib.sha256(f"{system}\n{user}".encode()).hexdigest()[:16]
    try:
        try:
            image = image_path(item.image).read_bytes()
        except (OSError, ValueError) as exc:
            raise PermanentProviderError(f"image file unreadable: {exc.__class__.__name__}") from exc
        reply = client_for(ProviderConfig.from_provider(provider)).generate(
            CandidateRequest(
                system=system,
                user=user,
                image=image,
                image_mime=_image_mime(item),
                item_id=item.pk,
                source_id=item.source_id,
                import_key=item.import_key,
            )
        )
    except TransientProviderError as exc:
        if exc.status == 429:
            rate_limit_penalize(provider=provider, seconds=exc.retry_after or 60.0 / provider.requests_per_minute)
        attempts = Conversion.objects.filter(pk=conversion.pk).values_list("attempts", flat=True).first() or 0
        if attempts >= MAX_ATTEMPTS:
            _end(
                conversion.pk,
                status=S.FAILED,
                provider=provider,
                error=f"{exc} (after {attempts} attempts)",
                finished_at=timezone.now(),
            )
            return "failed"
        _end(conversion.pk, status=S.PENDING, provider=provider, error=str(exc))
        return "retry"
    except ProviderError as exc:
        _end(conversion.pk, status=S.FAILED, provider=provider, error=str(exc), finished_at=timezone.now())
        return "failed"
    common = {
        "provider": provider,
        "model_name": reply.model_name[:200],
        "prompt_sha": prompt_sha,
        "raw_reply": reply.text,
        "latency_ms": reply.latency_ms,
        "finished_at": timezone.now(),
    }
    try:
        values, flags = conversion_read(reply_text=reply.text, stage=stage, schema=schema)
    except ReplyParseError as exc:
        _end(conversion.pk, status=S.FAILED, error=f"The reply could not be read: {exc}.", **common)
        return "failed"
    _end(conversion.pk, status=S.DONE, values=values, flags=flags, error="", **common)
    return "done"


# -- entering a model stage, retries, the job --------------------------------------------------


def conversion_job_ensure(*, project: Project, user=None) -> ConversionJob | None:
    """A queued or running conversion job for the project: the existing one, or a new one.

    Called after the commit that created pending conversions: a job that was about to end
    looks for pending rows once more after it finished (workflow.services), so a conversion
    created in between is never left without a job."""
    with transaction.atomic():
        Project.objects.select_for_update().filter(pk=project.pk).first()
        job = ConversionJob.objects.filter(project=project, status__in=ACTIVE).first()
        if job is not None and not job.stalled:
            return job
        if not Conversion.objects.filter(item__project=project, status__in=ACTIVE).exists():
            return job
        job = ConversionJob.objects.create(project=project, created_by=user)
        job_enqueue(job)
    return job


def conversion_create(*, item: Item, stage: StageSpec) -> Conversion:
    """The item entered a model stage: its conversion is queued (a job is ensured once the
    caller's transaction commits). Caller holds the item lock."""
    conversion, created = Conversion.objects.get_or_create(item=item, stage=stage.index)
    if not created:
        Conversion.objects.filter(pk=conversion.pk).update(
            status=S.PENDING, values={}, flags=[], error="", raw_reply="", attempts=0, lease_until=None
        )
    project = item.project
    transaction.on_commit(lambda: conversion_job_ensure(project=project))
    return conversion


def conversions_retry_failed(*, project: Project, user, conversion_ids: list[int] | None = None) -> int:
    """A lead's retry: failed conversions (all, or these) go back to the queue. Returns how many."""
    qs = Conversion.objects.filter(item__project=project, status=S.FAILED)
    if conversion_ids is not None:
        qs = qs.filter(pk__in=conversion_ids)
    with transaction.atomic():
        n = qs.update(status=S.PENDING, attempts=0, error="", lease_until=None, updated_at=timezone.now())
        if not n:
            raise Invalid("No failed conversion to retry.")
        transaction.on_commit(lambda: conversion_job_ensure(project=project, user=user))
    return n
