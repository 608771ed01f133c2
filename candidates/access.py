"""Permission-checked fetchers for candidate objects (never fetched by bare id)."""

from __future__ import annotations

from django.http import Http404

from candidates.models import CandidateJob, Provider
from projects.models import Project


def provider_get_for_project(*, project: Project, provider_id) -> Provider:
    """``project`` must already be access-checked by the caller (project_get_for_user)."""
    try:
        return Provider.objects.get(project=project, pk=int(provider_id))
    except (Provider.DoesNotExist, ValueError, TypeError):
        raise Http404("No such provider") from None


def job_get_for_project(*, project: Project, job_id) -> CandidateJob:
    try:
        return CandidateJob.objects.get(project=project, pk=int(job_id))
    except (CandidateJob.DoesNotExist, ValueError, TypeError):
        raise Http404("No such candidate job") from None
