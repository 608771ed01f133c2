"""Agreement reports from the database: the items compared, filters, the cache key, and the
report as a release ships it (``agreement_report_for_export``: JSON-serializable, deterministic,
no timestamps, no user names). Writes (cache rows) are in quality.services."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from datetime import UTC, date, datetime

import orjson
from django.conf import settings
from django.db.models import Count, Max, Q, TextField
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone

from adjudication.models import LexiconVersion
from adjudication.services import lexicon_current
from annotation.models import Annotation, Kind
from projects.models import Item, Project, Stage
from quality import agreement, analytics
from quality.agreement import Unit
from quality.models import AgreementReport

SUBMITTED = Annotation.Status.SUBMITTED
DEFAULT_FILTERS = {
    "source_dataset": "",
    "language": "",
    "category": "",
    "date_from": "",
    "date_to": "",
    "scope": agreement.DEFAULT_SCOPE,
}


def sync_max_annotations(*, project: Project | None = None) -> int:
    """Above this many submitted annotations a report is computed by a Celery job, not in the
    request (bench/quality.py: 3,000 two-annotator annotations take well under a second; with
    three or more annotators per item the pairwise/alpha bootstrap costs ~5x more per annotation)."""
    limit = int(getattr(settings, "QUALITY_SYNC_MAX_ANNOTATIONS", 3000))
    return limit if project is None or project.annotators_per_item <= 2 else limit // 5


# ---------------------------------------------------------------------------- filters and keys


def filter_key(filters: dict) -> str:
    canonical = {k: filters.get(k, v) or v for k, v in DEFAULT_FILTERS.items()}
    return hashlib.sha256(json.dumps(canonical, sort_keys=True).encode()).hexdigest()


def data_fingerprint(*, project: Project) -> str:
    """Changes whenever anything the agreement report reads changes: submissions and
    re-submissions (kind "annotation"), items (count, exclusions), lexicon, schema. Draft
    autosaves do not change it. Three aggregate queries."""
    ann = Annotation.objects.filter(item__project=project, kind=Kind.ANNOTATION, status=SUBMITTED).aggregate(
        n=Count("id"),
        top=Max("id"),
        last=Max("submitted_at"),
    )
    items = Item.objects.filter(project=project).aggregate(
        n=Count("id"),
        excluded=Count("id", filter=Q(stage=Stage.EXCLUDED)),
        top=Max("id"),
    )
    lexicon = LexiconVersion.objects.filter(project=project).aggregate(v=Max("version"))["v"]
    payload = [
        agreement.REPORT_VERSION,
        ann,
        items,
        lexicon,
        project.schema_version,
        project.annotators_per_item,
        project.workflow,
    ]
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def filter_options(*, project: Project) -> dict:
    """Values the filter form offers: source datasets, languages, category options per field."""
    rows = Item.objects.filter(project=project).values_list("source_dataset", "language").distinct()
    datasets = sorted({d for d, _ in rows if d})
    languages = sorted({lang for _, lang in rows if lang})
    categories = []
    for spec in project.get_schema().fields:
        if spec.get("choices"):
            categories.append(
                (spec.get("label") or spec["name"], [(f"{spec['name']}={c}", c) for c in spec["choices"]])
            )
    return {"source_datasets": datasets, "languages": languages, "categories": categories}


# ---------------------------------------------------------------------------- data for agreement


def _local_date(ts: datetime | None, tz=None) -> date | None:
    """The day of ``ts`` in ``tz`` (default: the current time zone; pass it when converting many:
    looking it up costs more than the conversion)."""
    return ts.astimezone(tz or timezone.get_current_timezone()).date() if ts is not None else None


def _timestamp(text: str | None) -> datetime | None:
    """A timestamp cast to text by the database: PostgreSQL's "2026-03-02 10:00:00.5+00" (the
    connection's time zone is UTC) or SQLite's naive UTC "2026-03-02 10:00:00.500000". Texts of
    one database compare like their instants (same zone and layout), so the latest slot is the
    largest text, and only that one is parsed."""
    if text is None:
        return None
    ts = datetime.fromisoformat(text)
    return ts if ts.tzinfo is not None else ts.replace(tzinfo=UTC)


def report_units(*, project: Project, filters: dict | None = None, stage=None) -> list[Unit]:
    """Items with two or more submitted annotations (kind "annotation") and their values by slot.

    Slots: the first ``annotators_per_item`` submissions in order of first submission (the ones
    adjudication.services.item_route compares). Excluded items are left out. Filters: source
    dataset and language of the item; ``category`` = "field=value": at least one annotator chose
    that value (pre-adjudication data has no single truth); date range on the day the item's
    last compared annotation was first submitted (when its pair became complete). One query.
    """
    f = {**DEFAULT_FILTERS, **(filters or {})}
    qs = Annotation.objects.filter(item__project=project, kind=Kind.ANNOTATION, status=SUBMITTED).exclude(
        item__stage=Stage.EXCLUDED
    )
    # In a workflow of stages each stage's records are compared among themselves (its fields).
    cap = project.annotators_per_item if stage is None else stage.annotators_range()[1]
    if stage is not None:
        qs = qs.filter(stage=stage.index)
    if f["source_dataset"]:
        qs = qs.filter(item__source_dataset=f["source_dataset"])
    if f["language"]:
        qs = qs.filter(item__language=f["language"])
    # Values as JSON text decoded by orjson and one timestamp as text, parsed once per item (the
    # latest of its compared slots): Django's JSONField and psycopg's timestamp loaders were
    # two thirds of a report's time at 200k items (bench/scale.py).
    rows = (
        qs.order_by("item_id", "first_submitted_at", "id")
        .annotate(
            values_text=Cast("values", TextField()),
            when_text=Cast(Coalesce("first_submitted_at", "submitted_at"), TextField()),
        )
        .values_list("item_id", "annotator_id", "values_text", "when_text")
    )
    grouped: dict[int, list[tuple]] = defaultdict(list)
    loads = orjson.loads
    for item_id, annotator_id, values, when in rows.iterator(chunk_size=20_000):
        grouped[item_id].append((annotator_id, (loads(values) if values else None) or {}, when))
    cat_field, cat_value = (f["category"].split("=", 1) + [""])[:2] if f["category"] else ("", "")
    date_from = date.fromisoformat(f["date_from"]) if f["date_from"] else None
    date_to = date.fromisoformat(f["date_to"]) if f["date_to"] else None
    tz = timezone.get_current_timezone()
    units = []
    for item_id in sorted(grouped):
        slots = grouped[item_id][:cap]
        if len(slots) < 2:
            continue
        completed = _timestamp(max((s[2] for s in slots if s[2] is not None), default=None))
        day = _local_date(completed, tz)
        if date_from and (day is None or day < date_from):
            continue
        if date_to and (day is None or day > date_to):
            continue
        if cat_field:
            chosen = [s[1].get(cat_field) for s in slots]
            if not any(v == cat_value or (isinstance(v, list) and cat_value in v) for v in chosen):
                continue
        units.append(
            Unit(
                item_id=item_id,
                values=tuple(s[1] for s in slots),
                annotators=tuple(s[0] for s in slots),
                completed_at=completed,
            )
        )
    return units


def agreement_report_build(*, project: Project, filters: dict | None = None, progress=None) -> dict:
    """Compute the agreement report and the dashboard analytics from the database (no caching).

    ``result["agreement"]`` holds no timestamps and no user names (exports and researchers);
    ``result["dashboard"]`` is for leads (annotator ids in the confusion-matrix pairs).
    """
    f = {**DEFAULT_FILTERS, **(filters or {})}
    schema = project.get_schema()
    workflow = project.get_workflow()
    lexicon_version, lexicon = lexicon_current(project=project)
    scope = f["scope"]
    if workflow.multi:
        # One report per stage over that stage's records and fields (MemeCap: the meme
        # captions of round 2 are compared among round-2 annotators), shown as one.
        parts = [
            (workflow.stage_schema(st.index), report_units(project=project, filters=f, stage=st))
            for st in workflow.stages
        ]
    else:
        parts = [(schema, report_units(project=project, filters=f))]
    results, per_part = [], []
    for part_schema, part_units in parts:
        part = agreement.agreement_figures(part_schema, part_units, lexicon=lexicon, scope=scope, progress=progress)
        per_part.append((part, part_units))
        results += part
    units = [u for _, part_units in parts for u in part_units]
    report = {
        "report_version": agreement.REPORT_VERSION,
        "schema_version": project.schema_version,
        "lexicon_version": lexicon_version,
        "annotators_per_item": project.annotators_per_item,
        "filters": {k: f[k] for k in DEFAULT_FILTERS},
        "scope": scope,
        "scope_description": agreement.SCOPES[scope],
        "n_items": len({u.item_id for u in units}),
        "n_annotations": sum(len(u.values) for u in units),
        "max_slots": agreement.slot_count(units),
        "method": {
            "raters": "two annotations per item: the two annotations; more: annotator pairs (people) over the items "
            "both annotated, then averaged (AHA-Memes 3.4), plus Krippendorff's alpha",
            "items": "the first annotators_per_item submitted annotations of each item with two or more",
            "bootstrap": agreement.method_text(),
            "resamples": agreement.RESAMPLES,
            "entity_lexicon": "project lexicon, current version",
        },
        "headline": agreement.headline(results),
        "fields": [agreement.field_result_dict(r, scope) for r in results],
    }
    dashboard = {
        "over_time": _merged_over_time(
            [analytics.agreement_over_time(part, part_units) for part, part_units in per_part]
        ),
        "confusions": [c for ps, pu in parts for c in analytics.confusions(ps, pu)],
        "histograms": analytics.histograms(results),
        "worst_items": analytics.worst_items(results),
    }
    return {"agreement": report, "dashboard": dashboard}


def _merged_over_time(parts: list[dict]) -> dict:
    """Weekly series of several stages on one time axis (a stage's missing weeks are gaps)."""
    if len(parts) == 1:
        return parts[0]
    weeks = sorted({w for part in parts for w in part["weeks"]})
    series = []
    for part in parts:
        for line in part["series"]:
            by_week = {p["week"]: p for p in line["points"]}
            points = [by_week.get(w, {"week": w, "value": None, "n": 0}) for w in weeks]
            series.append({**line, "points": points})
    return {"weeks": weeks, "series": series}


def cached_report(*, project: Project, filters: dict, fingerprint: str) -> AgreementReport | None:
    return AgreementReport.objects.filter(
        project=project, filter_key=filter_key(filters), fingerprint=fingerprint
    ).first()


def latest_done_report(*, project: Project, filters: dict) -> AgreementReport | None:
    return (
        AgreementReport.objects.filter(
            project=project, filter_key=filter_key(filters), status=AgreementReport.Status.DONE
        )
        .order_by("-finished_at", "-id")
        .first()
    )


def submitted_annotation_count(*, project: Project) -> int:
    return Annotation.objects.filter(item__project=project, kind=Kind.ANNOTATION, status=SUBMITTED).count()


def agreement_report_for_export(*, project: Project) -> dict:
    """The project's agreement report (all items, default scope) for a dataset release.

    Deterministic: fixed bootstrap seeds, values rounded to 6 digits, no timestamps, no user
    names. Served from the cache when the data is unchanged, else computed here (exports run
    in a worker). Empty projects give a report with ``n_items`` 0 and null figures.
    """
    fp = data_fingerprint(project=project)
    row = cached_report(project=project, filters=DEFAULT_FILTERS, fingerprint=fp)
    if row is not None and row.status == AgreementReport.Status.DONE and row.result:
        return json.loads(json.dumps(row.result["agreement"]))
    return agreement_report_build(project=project, filters=DEFAULT_FILTERS)["agreement"]
