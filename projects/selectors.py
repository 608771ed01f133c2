from __future__ import annotations

from django.db.models import Count

from projects.models import ImportJob, Item, Membership, Project


def project_stage_counts(*, project: Project) -> dict[str, int]:
    rows = Item.objects.filter(project=project).values("stage").annotate(n=Count("id"))
    return {r["stage"]: r["n"] for r in rows}


def memberships_for_user(*, user):
    return Membership.objects.filter(user=user).select_related("project").order_by("project__name", "role")


def import_jobs_for_project(*, project: Project, limit: int = 20):
    return ImportJob.objects.filter(project=project).select_related("created_by")[:limit]
