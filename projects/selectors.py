from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import Http404

from core.jobs import job_models
from core.models import Job
from projects.access import roles_of
from projects.models import (
    ImportJob,
    Item,
    ItemOcr,
    ItemVariant,
    Membership,
    OcrJob,
    Project,
    Role,
    Stage,
    VariantSource,
)


def project_stage_counts(*, project: Project) -> dict[str, int]:
    rows = Item.objects.filter(project=project).values("stage").annotate(n=Count("id"))
    return {r["stage"]: r["n"] for r in rows}


def workflow_stage_counts(*, project: Project) -> list[tuple[str, int]]:
    """(stage label, items in annotation at that stage) of a multi-stage workflow, in order
    (MemeBench: explanations to write, conversions by the model, QC to do); empty for one stage."""
    workflow = project.get_workflow()
    if len(workflow.stages) < 2:
        return []
    rows = (
        Item.objects.filter(project=project, stage=Stage.ANNOTATING)
        .values("workflow_stage")
        .annotate(n=Count("id"))
        .order_by()
    )
    counts = {r["workflow_stage"]: r["n"] for r in rows}
    return [(s.label, counts.get(s.index, 0)) for s in workflow.stages]


def memberships_for_user(*, user):
    return (
        Membership.objects.filter(user=user, is_active=True).select_related("project").order_by("project__name", "role")
    )


def ocr_overview(*, project: Project) -> dict:
    """What the import page says about OCR: how many items were read, painted, uploaded."""
    items = Item.objects.filter(project=project, duplicate_of__isnull=True)
    read = ItemOcr.objects.filter(item__project=project)
    variants = ItemVariant.objects.filter(item__project=project, kind="textfree")
    return {
        "wanted": project.ocr_on_import,
        "items": items.count(),
        "read": read.count(),
        "unreadable": read.exclude(error="").count(),
        "texts_filled": items.filter(text_from_ocr=True).count(),
        "variants": variants.count(),
        "uploaded": variants.filter(source=VariantSource.UPLOADED).count(),
        "jobs": list(OcrJob.objects.filter(project=project).select_related("created_by")[:3]),
    }


def import_jobs_for_project(*, project: Project, limit: int = 20):
    return ImportJob.objects.filter(project=project).select_related("created_by")[:limit]


def job_get_for_project(*, user, project: Project, kind: str, job_id) -> Job:
    """A job of any kind of ``project``, for a member whose role may read that kind (404 for
    unknown kinds and other projects' jobs, 403 for other roles)."""
    model = next((m for m in job_models() if m.kind == kind), None)
    if model is None:
        raise Http404("No such kind of job")
    if not roles_of(user=user, project=project) & ({*model.readers, Role.LEAD}):
        raise PermissionDenied("Your role in this project does not allow this")
    try:
        return model.objects.select_related("created_by").get(project=project, pk=int(job_id))
    except (model.DoesNotExist, ValueError, TypeError, OverflowError):
        raise Http404("No such job") from None


def projects_led_by(*, user):
    """Projects the user leads (active lead membership): the "copy settings from" choices."""
    return (
        Project.objects.filter(memberships__user=user, memberships__role=Role.LEAD, memberships__is_active=True)
        .order_by("name")
        .distinct()
    )
