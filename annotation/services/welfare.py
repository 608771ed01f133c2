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
    pref.save(update_fields=["content_warning_accepted_at", "blur_images"])
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
