"""Annotator welfare: the content warning and the blur preference."""

from __future__ import annotations

import logging

from django.utils import timezone

from annotation.models import (
    Annotation,
    AnnotatorPreference,
)
from projects.models import Project

log = logging.getLogger(__name__)
Status = Annotation.Status


# --------------------------------------------------------------------------- welfare


def content_warning_accept(*, user, project: Project, blur_images: bool | None = None) -> AnnotatorPreference:
    pref, _ = AnnotatorPreference.objects.get_or_create(user=user, project=project)
    pref.content_warning_accepted_at = pref.content_warning_accepted_at or timezone.now()
    if blur_images is not None:
        pref.blur_images = blur_images
    # The warning page shows the guideline: starting means having been shown this version.
    pref.guideline_seen_version = max(pref.guideline_seen_version, project.guideline_version)
    pref.save(update_fields=["content_warning_accepted_at", "blur_images", "guideline_seen_version"])
    return pref


def guideline_seen(*, user, project: Project, version: int) -> AnnotatorPreference:
    """The annotator read guideline ``version`` (at most the current one): the "guideline changed"
    notice goes away until the next version."""
    pref, _ = AnnotatorPreference.objects.get_or_create(user=user, project=project)
    version = min(int(version), project.guideline_version)
    if version > pref.guideline_seen_version:
        pref.guideline_seen_version = version
        pref.save(update_fields=["guideline_seen_version"])
    return pref


def annotator_preference_update(
    *, user, project: Project, blur_images: bool | None = None, auto_advance: bool | None = None
) -> AnnotatorPreference:
    """Change the given settings (None: leave as it is)."""
    pref, _ = AnnotatorPreference.objects.get_or_create(user=user, project=project)
    changed = []
    if blur_images is not None:
        pref.blur_images = bool(blur_images)
        changed.append("blur_images")
    if auto_advance is not None:
        pref.auto_advance = bool(auto_advance)
        changed.append("auto_advance")
    if changed:
        pref.save(update_fields=changed)
    return pref
