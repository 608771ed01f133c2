"""Write paths of the quality app: agreement-report cache rows and candidate-blind audits."""

from __future__ import annotations

import logging
import secrets

from django.db import IntegrityError, transaction

from annotation.models import Annotation, Kind
from annotation.services import annotation_audit_assign
from core.errors import Invalid, ServiceError
from core.jobs import Progress, job_enqueue, job_finish, job_run
from projects.models import Item, Project
from quality import agreement, audits, reports
from quality.models import AgreementReport, Audit, AuditItem
from quality.sampling import SamplingError, stratified_sample

log = logging.getLogger(__name__)
Status = AgreementReport.Status
DEFAULT_AUDIT_SIZE = 200
MAX_AUDIT_SIZE = 10_000


# ---------------------------------------------------------------------------- agreement reports


def _row_for(*, project: Project, filters: dict, user) -> tuple[AgreementReport, bool]:
    full = {**reports.DEFAULT_FILTERS, **filters}
    key = reports.filter_key(full)
    fp = reports.data_fingerprint(project=project)
    try:
        with transaction.atomic():
            return AgreementReport.objects.get_or_create(
                project=project,
                filter_key=key,
                fingerprint=fp,
                defaults={"filters": full, "created_by": user if user and user.is_authenticated else None},
            )
    except IntegrityError:  # a concurrent request created it
        return AgreementReport.objects.get(project=project, filter_key=key, fingerprint=fp), False


def _requeue(row: AgreementReport, user) -> None:
    AgreementReport.objects.filter(pk=row.pk).update(
        status=Status.PENDING,
        error="",
        progress_done=0,
        started_at=None,
        finished_at=None,
        heartbeat_at=None,
        cancel_requested=False,
        created_by=user if user and user.is_authenticated else None,
    )
    row.refresh_from_db()


def agreement_report_request(
    *, project: Project, filters: dict, user, force: bool = False
) -> tuple[AgreementReport, bool]:
    """Queue the computation of a report for the current data -> (row, enqueued).

    Deduplicated: a row already queued or running (and alive) is returned as is; a done row is
    returned unless ``force`` (the lead's "Recompute" button). The task is sent on commit.
    """
    row, created = _row_for(project=project, filters=filters, user=user)
    if not created:
        busy = row.status in (Status.PENDING, Status.RUNNING) and not row.stalled
        if busy or (row.status == Status.DONE and not force):
            return row, False
        _requeue(row, user)
    job_enqueue(row)
    return row, True


def _compute(row: AgreementReport, progress: Progress) -> None:
    result = reports.agreement_report_build(
        project=row.project,
        filters=row.filters,
        progress=lambda done, total: progress(done, total, phase="computing field figures"),
    )
    with transaction.atomic():
        job_finish(row, result=result)
        # Older data's rows for the same filters are never served again: keep the table small.
        AgreementReport.objects.filter(project=row.project, filter_key=row.filter_key).exclude(pk=row.pk).exclude(
            status__in=[Status.PENDING, Status.RUNNING]
        ).delete()


def agreement_report_compute(*, report_id: int) -> AgreementReport | None:
    """Compute one queued report and publish it atomically (status and result in one UPDATE).
    Idempotent: a row that is done, or alive in another worker, is left alone."""
    return job_run(AgreementReport, report_id, _compute)


def agreement_report_compute_now(*, project: Project, filters: dict, user) -> AgreementReport:
    """Small projects: fill the cache row in this request (same code path as the Celery job)."""
    row, _ = _row_for(project=project, filters=filters, user=user)
    if row.status == Status.DONE:
        return row
    if row.status in (Status.FAILED, Status.CANCELLED):
        _requeue(row, user)
    return agreement_report_compute(report_id=row.pk) or AgreementReport.objects.get(pk=row.pk)


def agreement_report_current(*, project: Project, filters: dict, user) -> dict:
    """The report to show for these filters.

    Current data: the cached row, or (projects with at most ``sync_max_annotations()``
    submissions) computed now into the cache. Otherwise the job computing it (if a lead started
    one) and the last report of older data, marked stale. Returns {row, result, stale, job, failed}.
    """
    fp = reports.data_fingerprint(project=project)
    row = reports.cached_report(project=project, filters=filters, fingerprint=fp)
    small = reports.submitted_annotation_count(project=project) <= reports.sync_max_annotations(project=project)
    if small and (row is None or row.status == Status.PENDING):
        row = agreement_report_compute_now(project=project, filters=filters, user=user)
    if row is not None and row.status == Status.DONE:
        return {"row": row, "result": row.result, "stale": False, "job": None, "failed": None}
    stale = reports.latest_done_report(project=project, filters=filters)
    return {
        "row": stale,
        "result": stale.result if stale else None,
        "stale": stale is not None,
        "job": row if row is not None and row.status in (Status.PENDING, Status.RUNNING) else None,
        "failed": row if row is not None and row.status == Status.FAILED else None,
    }


# ---------------------------------------------------------------------------- blind audit


def audit_create(
    *,
    project: Project,
    created_by,
    size: int = DEFAULT_AUDIT_SIZE,
    seed: int | None = None,
    include_untargeted: bool = False,
) -> Audit:
    """Sample ``size`` gold items stratified over category x grounding condition and assign each
    to an auditor who did not annotate it (annotation.services.annotation_audit_assign).

    Proportional allocation, at least one item per non-empty stratum, reproducible from
    ``seed`` (drawn at random and stored when not given). Auditors are balanced: each item goes
    to the eligible auditor with the fewest items of this audit so far. Items that every
    auditor annotated are drawn last within their stratum and, if still drawn, stay
    unassigned (recorded in ``notes``). Raises core.errors.Invalid with a message for the lead.
    """

    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise Invalid("The audit size must be a whole number of at least 1.")
    if size > MAX_AUDIT_SIZE:
        raise Invalid(f"The audit size can be at most {MAX_AUDIT_SIZE}.")
    if seed is None:
        seed = secrets.randbelow(2**31)
    elif isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise Invalid("The seed must be a non-negative whole number.")
    auditors = list(audits.auditors_for_project(project=project))
    if not auditors:
        raise Invalid("This project has no auditor yet. Add a member with the auditor role, then create the audit.")
    population = audits.audit_population(project=project, include_untargeted=include_untargeted)
    if not population:
        if include_untargeted or not audits.audit_population(project=project, include_untargeted=True):
            raise Invalid(
                "There are no gold records yet: the audit samples gold items, so finish "
                "annotation and adjudication of some items first."
            )
        raise Invalid(
            "No gold item has a target yet (all are e.g. non-harmful). Tick “also sample items "
            "without a target” or wait for more gold records."
        )
    if size > len(population):
        raise Invalid(
            f"Only {len(population)} gold item(s) can be sampled; choose a size of at most {len(population)}."
        )
    schema = project.get_schema()
    plans = agreement.field_plans(schema)
    strata: dict[str, list[int]] = {}
    labels: dict[str, str] = {}
    for item_id, values in population:
        key, label = audits.stratum_of(schema, plans, values, project.audit_strata)
        strata.setdefault(key, []).append(item_id)
        labels[key] = label
    annotated: dict[int, set[int]] = {}
    for item_id, annotator_id in Annotation.objects.filter(
        item_id__in=[i for i, _ in population], kind=Kind.ANNOTATION, status=Annotation.Status.SUBMITTED
    ).values_list("item_id", "annotator_id"):
        annotated.setdefault(item_id, set()).add(annotator_id)
    auditor_ids = {a.pk for a in auditors}

    def eligible(item_id: int) -> bool:
        return bool(auditor_ids - annotated.get(item_id, set()))

    try:
        sample = stratified_sample(strata, size, seed, prefer=eligible)
    except SamplingError as exc:
        raise Invalid(f"Cannot sample: {exc}.") from None
    items = Item.objects.in_bulk([i for ids in sample.values() for i in ids])
    notes: list[str] = []
    load = {a.pk: 0 for a in auditors}
    with transaction.atomic():
        audit = Audit.objects.create(
            project=project,
            created_by=created_by,
            seed=seed,
            size=size,
            include_untargeted=include_untargeted,
            strata=[
                {"key": k, "label": labels[k], "population": len(strata[k]), "sampled": len(sample.get(k, []))}
                for k in sorted(strata)
            ],
        )
        for key in sorted(sample):
            for item_id in sample[key]:
                item = items[item_id]
                annotation, chosen = None, None
                for auditor in sorted(auditors, key=lambda a: (load[a.pk], a.pk)):
                    if auditor.pk in annotated.get(item_id, set()):
                        continue
                    try:
                        annotation = annotation_audit_assign(auditor=auditor, item=item)
                    except ServiceError:
                        # Notes go into reports researchers read: no auditor names.
                        notes.append(f"item {item_id}: one auditor could not be assigned; tried the next")
                        continue
                    chosen = auditor
                    load[auditor.pk] += 1
                    break
                if chosen is None:
                    notes.append(f"item {item_id}: every auditor annotated this item, so it has no blind auditor")
                AuditItem.objects.create(audit=audit, item=item, stratum=key, auditor=chosen, annotation=annotation)
        if notes:
            Audit.objects.filter(pk=audit.pk).update(notes=notes)
            audit.notes = notes
    return audit
