"""Agreement reports from the database: the items compared, filters, the cache key, and the
report as a release ships it (``agreement_report_for_export``: JSON-serializable, deterministic,
no timestamps, no user names). Writes (cache rows) are in quality.services."""

from __future__ import annotations

import hashlib
import json
from array import array
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta

import numpy as np
import orjson
from django.conf import settings
from django.db import connection, connections
from django.db.models import BigIntegerField, Count, Max, Q, TextField
from django.db.models.expressions import RawSQL
from django.db.models.fields.json import KeyTransform
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone

from adjudication.models import LexiconVersion
from adjudication.services import lexicon_current
from annotation.models import Annotation, Kind
from core.streams import stream, streaming_connection
from lib.gcpause import gc_paused
from lib.memory import release_free_memory
from projects.models import Item, Project, Stage
from quality import agreement, analytics
from quality.agreement import Column, Unit, UnitTable
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


def _report_annotations(*, project: Project, f: dict, stage=None):
    """The submitted annotations a report compares, ordered by item then first submission
    (slots), and the number of slots per item (``cap``)."""
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
    return qs.order_by("item_id", "first_submitted_at", "id"), cap


def _category_filter(f: dict) -> tuple[str, str]:
    return tuple((f["category"].split("=", 1) + [""])[:2]) if f["category"] else ("", "")


def _category_holds(value, cat_value: str) -> bool:
    return value == cat_value or (isinstance(value, list) and cat_value in value)


def report_units(*, project: Project, filters: dict | None = None, stage=None) -> list[Unit]:
    """Items with two or more submitted annotations (kind "annotation") and their values by slot.

    Slots: the first ``annotators_per_item`` submissions in order of first submission (the ones
    adjudication.services.item_route compares). Excluded items are left out. Filters: source
    dataset and language of the item; ``category`` = "field=value": at least one annotator chose
    that value (pre-adjudication data has no single truth); date range on the day the item's
    last compared annotation was first submitted (when its pair became complete). One query.
    The report itself reads the same units as columns (:func:`report_table`).
    """
    f = {**DEFAULT_FILTERS, **(filters or {})}
    qs, cap = _report_annotations(project=project, f=f, stage=stage)
    # Values as JSON text decoded by orjson and one timestamp as text, parsed once per item (the
    # latest of its compared slots): Django's JSONField and psycopg's timestamp loaders were
    # two thirds of a report's time at 200k items (bench/scale.py).
    rows = qs.annotate(
        values_text=Cast("values", TextField()),
        when_text=Cast(Coalesce("first_submitted_at", "submitted_at"), TextField()),
    ).values_list("item_id", "annotator_id", "values_text", "when_text")
    grouped: dict[int, list[tuple]] = defaultdict(list)
    loads = orjson.loads
    for item_id, annotator_id, values, when in stream(rows, 20_000):
        grouped[item_id].append((annotator_id, (loads(values) if values else None) or {}, when))
    cat_field, cat_value = _category_filter(f)
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
        if cat_field and not any(_category_holds(s[1].get(cat_field), cat_value) for s in slots):
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


class _Ids:
    """A growing buffer of database ids: int32 (half the memory of int64: at 1M items the
    read's item and annotator ids per record were 32 MB) until one does not fit, then int64."""

    def __init__(self):
        self.buf = array("i")

    def extend(self, ids) -> None:
        ids = ids if isinstance(ids, (list, tuple)) else list(ids)  # read twice on a widening
        start = len(self.buf)
        try:
            self.buf.extend(ids)
        except OverflowError:
            del self.buf[start:]  # the ids appended before the one that did not fit
            self.buf = array("q", self.buf)
            self.buf.extend(ids)

    def array(self) -> np.ndarray:
        """The ids so far (the buffer itself, no copy)."""
        return np.frombuffer(self.buf, dtype=np.int32 if self.buf.typecode == "i" else np.int64)


class _Codes:
    """Stored values of one field, one code per distinct key (JSON text), decoded once each."""

    def __init__(self, decode):
        self.index: dict = {}
        self.raw: list = []
        self.decode = decode
        # int32 in one growing buffer: half the memory of intp, and no copy to join parts.
        self.parts = array("i")

    def add(self, keys: list) -> None:
        index, raw = self.index, self.raw
        for key in dict.fromkeys(keys):
            if key not in index:
                index[key] = len(raw)
                raw.append(self.decode(key))
        self.parts.extend(map(index.__getitem__, keys))

    def codes(self) -> np.ndarray:
        """Every code, once, after the last ``add``: the chunks and the text index are let go
        (the table keeps only ``raw``; at 1M items they were ~250 MB more while the report ran)."""
        out = np.frombuffer(self.parts, dtype=np.int32)  # the buffer itself, no copy
        # The narrowest type that holds every code and -1 (an empty slot): a field of a few
        # distinct values (a label, a category) is one byte per record, not four (at 1M items
        # 24 MB less over the whole report; bench/scale.py).
        for narrow in (np.int8, np.int16):
            if len(self.raw) <= np.iinfo(narrow).max:
                out = out.astype(narrow)
                break
        self.parts, self.index = array("i"), {}
        return out


def _fetch_chunks(rows, size: int = 20_000):
    """The rows of a ``values_list`` queryset in lists of ``size``, straight from a server-side
    cursor (PostgreSQL; SQLite: a plain one): the queryset iterator's per-row Python was a
    third of the read at 50k items (bench/scale.py)."""
    sql, params = rows.query.sql_with_params()
    names = list(rows.query.values_select) + list(rows.query.annotation_select)
    with streaming_connection(rows.db) as alias, connections[alias].chunked_cursor() as cursor:
        cursor.execute(sql, params)
        if [d[0] for d in cursor.description] != names[: len(cursor.description)] or len(names) != len(
            cursor.description
        ):
            raise RuntimeError(f"unexpected columns {[d[0] for d in cursor.description]}, expected {names}")
        while chunk := cursor.fetchmany(size):
            yield chunk


#: No completion time (a record without a submission time), below every real one.
NO_TIME = agreement.NO_TIME
EPOCH = agreement.EPOCH


def _micros_of_texts(texts) -> np.ndarray:
    """Microseconds since the epoch of timestamps the database cast to text (SQLite)."""
    return np.fromiter(
        (NO_TIME if t is None else (_timestamp(t) - EPOCH) // timedelta(microseconds=1) for t in texts),
        np.int64,
        len(texts),
    )


def _json_or_none(text: str | None):
    return None if text is None else orjson.loads(text)


def report_table(
    *,
    project: Project,
    filters: dict | None = None,
    stage=None,
    fields: list[str],
    in_sql: bool | None = None,
    only_items: np.ndarray | None = None,
    times: bool = True,
) -> UnitTable:
    """The units of :func:`report_units` as columns (quality.agreement.UnitTable) of ``fields``.

    No per-record dict: on PostgreSQL (``in_sql``, the default there) each field is read by the
    database as its own JSON text (``values -> 'field'``) and decoded once per distinct text;
    elsewhere (SQLite) each record's values are decoded and split into the same columns.
    Grouping into slots and the filters run on arrays; completion times stay int64 until
    read. ``only_items``: the units of these item ids only (a release's released items), so
    no second, filtered copy of every column is built (UnitTable.take). Each column is built
    once (the table keeps it) and its per-record codes let go then. ``times=False``: no
    completion times are kept (every unit undated; a release's agreement.json never reads
    them: 24 MB less at 1M items); a date filter then cannot apply.
    """
    if not times and ((filters or {}).get("date_from") or (filters or {}).get("date_to")):
        raise ValueError("a date filter needs the completion times (times=True)")
    table = _read_table(project, filters, stage, fields, in_sql, only_items, times)
    release_free_memory()  # the rows read: at 1M items ~130 MB of free heap kept in the RSS
    return table


def _read_table(project, filters, stage, fields, in_sql, only_items, times: bool = True) -> UnitTable:
    f = {**DEFAULT_FILTERS, **(filters or {})}
    qs, cap = _report_annotations(project=project, f=f, stage=stage)
    cat_field, cat_value = _category_filter(f)
    names = list(dict.fromkeys([*fields, *([cat_field] if cat_field else [])]))
    if in_sql is None:
        in_sql = connection.vendor == "postgresql"
    if in_sql:
        # Microseconds since the epoch, exact (EXTRACT is numeric on PostgreSQL 14+, which
        # Django 5.2 requires): one int64 per record instead of a string (at 1M aha items the
        # strings were ~250 MB and their comparisons a second).
        when = RawSQL(
            'CAST(EXTRACT(EPOCH FROM COALESCE("annotation_annotation"."first_submitted_at", '
            '"annotation_annotation"."submitted_at")) * 1000000 AS bigint)',
            (),
            output_field=BigIntegerField(),
        )
        texts = {f"f{j}": Cast(KeyTransform(name, "values"), TextField()) for j, name in enumerate(names)}
        rows = qs.annotate(when_us=when, **texts).values_list("item_id", "annotator_id", "when_us", *texts)
        columns = {name: _Codes(_json_or_none) for name in names}
    else:
        when = Cast(Coalesce("first_submitted_at", "submitted_at"), TextField())
        rows = qs.annotate(when_text=when, values_text=Cast("values", TextField())).values_list(
            "item_id", "annotator_id", "when_text", "values_text"
        )
        columns = {name: _Codes(orjson.loads) for name in names}
    # Growing int64 buffers, viewed as arrays at the end (parts and their joined copies were
    # ~100 MB at the peak of a 1M-item read).
    item_buf, annotator_buf, when_buf = _Ids(), _Ids(), array("q")
    for k, chunk in enumerate(_fetch_chunks(rows)):
        if k % 16 == 15:
            # The chunks' rows interleave with the kept codes in the heap, whose free pages
            # then stay in the RSS (at 1M items the read peaked ~160 MB above what it keeps).
            release_free_memory()
        cols = list(zip(*chunk))
        item_buf.extend(cols[0])
        annotator_buf.extend(cols[1])
        if times and in_sql:
            when_buf.extend(NO_TIME if t is None else t for t in cols[2])
        elif times:
            when_buf.frombytes(_micros_of_texts(cols[2]).tobytes())
        if in_sql:
            for name, keys in zip(names, cols[3:]):
                columns[name].add(list(keys))
        else:
            loads = orjson.loads
            records = [(loads(v) if v else None) or {} for v in cols[3]]
            for name in names:
                columns[name].add([orjson.dumps(r.get(name)) for r in records])
    items, people = item_buf.array(), annotator_buf.array()
    codes = {name: col.codes() for name, col in columns.items()}

    # Slots: the first `cap` records of each item (rows are ordered by item, then submission).
    starts = np.flatnonzero(np.r_[True, items[1:] != items[:-1]]) if items.size else np.zeros(0, dtype=np.intp)
    counts = np.minimum(np.diff(np.r_[starts, items.size]), cap)
    keep = counts >= 2
    starts, counts = starts[keep], counts[keep]
    unit_items = items[starts]
    del items, item_buf, keep  # the per-record ids (the units' are kept)
    width = int(counts.max()) if counts.size else 0
    filled = np.arange(width)[None, :] < counts[:, None]
    record = np.where(filled, starts.astype(np.int32)[:, None] + np.arange(width, dtype=np.int32), np.int32(-1))
    # Completion: the latest time of the compared slots (microseconds; NO_TIME: none).
    if times:
        when_buf.append(NO_TIME)
        stamps = np.frombuffer(when_buf, dtype=np.int64)
        latest = np.full(len(starts), NO_TIME, dtype=np.int64)
        for s in range(width):
            np.maximum(latest, stamps[record[:, s]], out=latest)  # -1 -> the trailing NO_TIME
        del stamps
    else:
        latest = None  # read by a date filter only, which report_table refuses without times
    del when_buf

    ok = np.ones(len(starts), dtype=bool) if only_items is None else np.isin(unit_items, only_items)
    date_from = date.fromisoformat(f["date_from"]) if f["date_from"] else None
    date_to = date.fromisoformat(f["date_to"]) if f["date_to"] else None
    if date_from or date_to:
        tz = timezone.get_current_timezone()
        days = [_local_date(ts, tz) for ts in agreement.datetimes_of_micros(latest)]
        ok &= np.fromiter(
            (
                day is not None and (not date_from or day >= date_from) and (not date_to or day <= date_to)
                for day in days
            ),
            dtype=bool,
            count=len(days),
        )
    if cat_field:
        holds = np.array([_category_holds(v, cat_value) for v in columns[cat_field].raw] + [False])
        ok &= holds[np.where(filled, codes[cat_field][np.maximum(record, 0)], np.intp(len(holds) - 1))].any(axis=1)
    record, counts = record[ok], counts[ok]
    filled = filled[ok]
    at = np.maximum(record, 0)
    del record

    empty = ~filled

    def slots(per_record: np.ndarray) -> np.ndarray:
        out = per_record[at]  # (units, slots), -1 in the empty slots: no second copy for np.where
        out[empty] = -1
        return out

    def column(name: str) -> Column:
        if name not in codes:
            raise KeyError(f"field {name!r} was not read (report_table fields), or was built already")
        return Column(slots(codes.pop(name)), columns.pop(name).raw)

    # Without times every unit is undated: one NO_TIME seen as a column (no memory).
    completed = latest[ok] if times else np.broadcast_to(np.int64(NO_TIME), (int(ok.sum()),))
    return UnitTable(unit_items[ok], slots(people), counts, completed, column)


def _field_names(schema) -> list[str]:
    return [spec["name"] for spec in schema.fields]


def report_table_all_fields(*, project: Project, only_items: np.ndarray | None = None, times: bool = True) -> UnitTable:
    """:func:`report_table` of every field of the project's schema, default filters (a
    release's agreement.json: the units of its released items, ``only_items``, no times)."""
    return report_table(project=project, fields=_field_names(project.get_schema()), only_items=only_items, times=times)


def _distinct_items(tables: list[UnitTable]) -> int:
    """Items over the report's tables (a unit is one item of one table: the stages of a
    multi-stage workflow may share items, one table's never repeat; a sort of 1M ids was ~1 s)."""
    if len(tables) == 1:
        return len(tables[0])
    return int(np.unique(np.concatenate([t.item_ids for t in tables])).size) if tables else 0


@gc_paused()
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
        stages = [(workflow.stage_schema(st.index), st) for st in workflow.stages]
    else:
        stages = [(schema, None)]
    parts = [
        (part_schema, report_table(project=project, filters=f, stage=st, fields=_field_names(part_schema)))
        for part_schema, st in stages
    ]
    results, per_part = [], []
    for part_schema, part_units in parts:
        part = agreement.agreement_figures(part_schema, part_units, lexicon=lexicon, scope=scope, progress=progress)
        per_part.append((part, part_units))
        results += part
    tables = [table for _, table in parts]
    report = {
        "report_version": agreement.REPORT_VERSION,
        "schema_version": project.schema_version,
        "lexicon_version": lexicon_version,
        "annotators_per_item": project.annotators_per_item,
        "filters": {k: f[k] for k in DEFAULT_FILTERS},
        "scope": scope,
        "scope_description": agreement.SCOPES[scope],
        "n_items": _distinct_items(tables),
        "n_annotations": int(sum(t.counts.sum() for t in tables)),
        "max_slots": max((agreement.slot_count(t) for t in tables), default=0),
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
