"""Live dashboard parts: items per stage, throughput by annotator and by day."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.db.models import Count, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from annotation.models import Annotation, Kind
from projects.models import Item, Project, Stage

SUBMITTED = Annotation.Status.SUBMITTED


PIPELINE = [
    (Stage.NEW, "Awaiting candidates"),
    (Stage.ANNOTATING, "Annotating"),
    (Stage.ADJUDICATION, "In adjudication"),
    (Stage.GOLD, "Gold"),
]


def pipeline_counts(*, project: Project) -> list[dict]:
    """Items per stage plus gold items with a submitted blind audit (two queries)."""
    counts = dict(Item.objects.filter(project=project).values_list("stage").annotate(n=Count("id")))
    audited = (
        Annotation.objects.filter(item__project=project, kind=Kind.AUDIT, status=SUBMITTED)
        .values("item_id")
        .distinct()
        .count()
    )
    rows = [{"stage": s.value, "label": label, "n": counts.get(s, 0)} for s, label in PIPELINE]
    rows.append({"stage": "audited", "label": "Audited (blind)", "n": audited})
    if counts.get(Stage.EXCLUDED):
        rows.append({"stage": "excluded", "label": "Excluded", "n": counts[Stage.EXCLUDED]})
    return rows


def throughput_by_annotator(*, project: Project) -> list[dict]:
    rows = (
        Annotation.objects.filter(item__project=project, kind=Kind.ANNOTATION, status=SUBMITTED)
        .values("annotator__username")
        .annotate(n=Count("id"), ms=Sum("time_spent_ms"))
        .order_by("-n", "annotator__username")
    )
    return [
        {
            "annotator": r["annotator__username"],
            "n": r["n"],
            "seconds_per_item": round((r["ms"] or 0) / 1000 / r["n"], 1) if r["n"] else None,
        }
        for r in rows
    ]


def throughput_by_day(*, project: Project, days: int = 30) -> list[dict]:
    """First submissions per day over the last ``days`` days, zero-filled."""
    today = timezone.localdate()
    start = today - timedelta(days=days - 1)
    rows = dict(
        Annotation.objects.filter(item__project=project, kind=Kind.ANNOTATION, first_submitted_at__date__gte=start)
        .annotate(day=TruncDate("first_submitted_at"))
        .values_list("day")
        .annotate(n=Count("id"))
        .order_by("day")
    )
    return [
        {"day": (start + timedelta(days=i)).isoformat(), "n": rows.get(start + timedelta(days=i), 0)}
        for i in range(days)
    ]


def usernames(*, ids: set[int]) -> dict[int, str]:

    return dict(get_user_model().objects.filter(pk__in=ids).values_list("id", "username")) if ids else {}
