"""quality.reports.report_table: the report's units read as columns, in SQL (PostgreSQL: each
field as its own JSON text) and by decoding each record (the SQLite way), equal the units of
report_units (one dict per record, the straightforward read) on hostile data: missing keys,
JSON nulls, malformed values, empty records, items with one annotation or more than the
compared slots, undated submissions, drafts, audits and excluded items, every filter; and the
report built on either read is the same report."""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from django.db import connection

from annotation.models import Annotation, Kind
from projects.models import Item, Stage
from quality import agreement, reports
from quality.tests.test_agreement_columns import hostile_units


@pytest.fixture(params=["meme3w", "aha"])
def hostile(request, make_user, tmp_path):
    from projects.factories import items_create, project_with_members

    people = [make_user(f"hostile_{k}") for k in range(5)]
    project = project_with_members(f"h-{request.param}", preset=request.param, annotator=people)
    items = items_create(project, tmp_path / "h", 24)
    Item.objects.filter(pk=items[3].pk).update(stage=Stage.EXCLUDED)
    Item.objects.filter(pk__in=[i.pk for i in items[:8]]).update(source_dataset="other", language="de")
    units = hostile_units(project.get_schema(), len(items), seed=2)
    rng = np.random.default_rng(8)
    start = datetime(2026, 3, 1, 22, 30, tzinfo=UTC)
    rows = []
    for item, unit in zip(items, units):
        for k, values in enumerate(unit.values):
            first = start + timedelta(hours=int(rng.integers(0, 96)), microseconds=int(rng.integers(0, 10**6)))
            if rng.random() < 0.1:
                values = {}  # no field has a value
            elif rng.random() < 0.1:
                values = {**values, "label": None, "is_hateful": None}
            rows.append(
                Annotation(
                    item=item,
                    annotator=people[k],
                    kind=Kind.ANNOTATION,
                    status=Annotation.Status.SUBMITTED,
                    values=values,
                    first_submitted_at=None if rng.random() < 0.15 else first,
                    submitted_at=None if rng.random() < 0.1 else first + timedelta(hours=1),
                )
            )
        # noise the report never reads
        rows.append(Annotation(item=item, annotator=people[4], kind=Kind.AUDIT, status="submitted", values={}))
    Annotation.objects.bulk_create(rows)
    Annotation.objects.filter(item=items[5], annotator=people[1]).update(status=Annotation.Status.DRAFT)
    undated = next(i for i, u in enumerate(units) if i > 5 and len(u.values) >= 2)
    Annotation.objects.filter(item=items[undated]).update(first_submitted_at=None, submitted_at=None)
    return project


def _as_lists(table, names):
    counts = table.counts.tolist()
    out = {
        "item_ids": table.item_ids.tolist(),
        "counts": counts,
        "annotators": [row[:k] for row, k in zip(table.annotators.tolist(), counts)],
        "completed_at": table.completed_at,
    }
    for name in names:
        col = table.column(name)
        out[name] = [[col.raw[c] for c in row[:k]] for row, k in zip(col.codes.tolist(), counts)]
    return out


FILTERS = [
    {},
    {"source_dataset": "other"},
    {"language": "de"},
    {"category": "label=harmful"},
    {"category": "hateful_type=Mocking"},
    {"category": "is_hateful=Hateful", "date_from": "2026-03-02"},
    {"date_from": "2026-03-02", "date_to": "2026-03-03"},
    {"date_to": "2000-01-01"},
]


def test_report_table_equals_report_units(hostile):
    project = hostile
    names = reports._field_names(project.get_schema())
    reads = [False, True] if connection.vendor == "postgresql" else [False]
    sizes = []
    for filters in FILTERS:
        units = reports.report_units(project=project, filters=filters)
        sizes.append(len(units))
        expected = _as_lists(agreement.UnitTable.from_units(units), names)
        for in_sql in reads:
            table = reports.report_table(project=project, filters=filters, fields=names, in_sql=in_sql)
            assert _as_lists(table, names) == expected, (filters, in_sql)
    units = reports.report_units(project=project)
    assert 15 <= sizes[0] <= 23 and {len(u.values) for u in units} == {2, project.annotators_per_item}
    assert any(u.completed_at is None for u in units) and sizes[-1] == 0
    assert len(set(sizes)) >= 4  # the filters do filter
    with pytest.raises(KeyError):
        reports.report_table(project=project, fields=names[:1]).column(names[-1])
    # only_items (a release's released items): the units of those items, as if filtered after.
    keep = [u.item_id for u in units][::3] + [10**9]  # and an id no unit has
    expected = _as_lists(agreement.UnitTable.from_units([u for u in units if u.item_id in keep]), names)
    for in_sql in reads:
        table = reports.report_table(project=project, fields=names, in_sql=in_sql, only_items=np.array(keep))
        assert _as_lists(table, names) == expected, in_sql
        with pytest.raises(KeyError, match="built already"):
            table._build(names[0])  # each column is built once: its per-record codes are let go
        # without times (a release's agreement.json): the same units, every one undated
        undated = reports.report_table(
            project=project, fields=names, in_sql=in_sql, only_items=np.array(keep), times=False
        )
        assert _as_lists(undated, names) == {**expected, "completed_at": [None] * len(expected["item_ids"])}
    with pytest.raises(ValueError, match="date filter"):
        reports.report_table(project=project, fields=names, filters={"date_from": "2026-01-01"}, times=False)


def test_the_report_is_the_same_on_either_read(hostile, monkeypatch):
    project = hostile
    first = reports.agreement_report_build(project=project, filters={})
    monkeypatch.setattr(reports, "report_table", functools.partial(reports.report_table, in_sql=False))
    again = reports.agreement_report_build(project=project, filters={})
    assert again == first
    assert first["agreement"]["n_items"] >= 15
    # and the figures are those of agreement_figures on report_units' units
    units = reports.report_units(project=project)
    results = agreement.agreement_figures(project.get_schema(), units, lexicon={}, scope="both")
    assert first["agreement"]["fields"] == [agreement.field_result_dict(r, "both") for r in results]
