"""Candidate-blind audits: giving an auditor an audit annotation of a gold item."""

from __future__ import annotations

import logging

from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.models import (
    Annotation,
    Assignment,
    Kind,
)
from core.errors import Invalid
from projects.models import Item, Membership, Role

log = logging.getLogger(__name__)
Status = Annotation.Status


def annotation_audit_assign(*, auditor, item: Item) -> Annotation:
    """Give ``auditor`` a candidate-blind audit of ``item`` (idempotent; never expires).

    Refused when the auditor is not an auditor of the item's project, or annotated the item
    themselves (the audit would not be independent).
    """
    if not Membership.objects.filter(
        project_id=item.project_id, user=auditor, role=Role.AUDITOR, is_active=True
    ).exists():
        raise Invalid(f"{auditor} is not an auditor of this project.")
    if Annotation.objects.filter(item=item, annotator=auditor, kind=Kind.ANNOTATION, status=Status.SUBMITTED).exists():
        raise Invalid(f"{auditor} annotated this item and cannot audit it blind.")
    now = timezone.now()
    with transaction.atomic():
        annotation, _ = Annotation.objects.get_or_create(
            item=item,
            annotator=auditor,
            kind=Kind.AUDIT,
            defaults={"status": Status.DRAFT, "schema_version": item.project.schema_version},
        )
        try:
            with transaction.atomic():
                Assignment.objects.get_or_create(
                    annotation=annotation,
                    defaults={
                        "project_id": item.project_id,
                        "item": item,
                        "annotator": auditor,
                        "kind": Kind.AUDIT,
                        "status": Assignment.Status.ACTIVE,
                        "claimed_at": now,
                        "expires_at": None,
                    },
                )
        except IntegrityError:  # a concurrent call made it
            pass
    return annotation
