"""Agreement reports from annotations made through the services: figures and CIs equal what
metrics/ computes on the same values; filters, caching, recompute jobs, exports."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from adjudication.services import lexicon_current
from metrics.agreement import cohen_kappa
from metrics.bootstrap import percentile_interval, resample_indices
from metrics.boxes import enclosing_iou
from metrics.entity import f1_rel
from metrics.text import token_f1
from quality import reports
from quality.models import AgreementReport
from quality.reports import agreement_report_for_export
from quality.services import agreement_report_current, agreement_report_request
from quality.tests.conftest import PAIRS

BOTH_HARMFUL = [i for i, (a, b) in enumerate(PAIRS) if a["label"] == b["label"] == "harmful"]


def figures(report):
    return {(f["field"], x["key"]): x for f in report["fields"] for x in f["figures"]}


def recomputed(subset: list[int], stat, n_units: int = len(PAIRS)) -> list[float]:
    """The straightforward bootstrap on the report's shared resamples: each resample draws the
    report's items; the figure uses the drawn items of its subset (repeats included)."""
    chosen = set(subset)
    values = []
    for idx in resample_indices(n_units, 1000, 0):
        drawn = [int(i) for i in idx if int(i) in chosen]
        v = stat(drawn) if drawn else None
        values.append(np.nan if v is None else v)
    return [round(x, 6) for x in percentile_interval(np.array(values), 0.95)]


def test_figures_and_cis_equal_metrics_on_the_same_annotations(project, annotated):
    report = agreement_report_for_export(project=project)
    figs = figures(report)
    assert report["n_items"] == 6 and report["n_annotations"] == 12 and report["scope"] == "both"

    a = [p[0]["label"] for p in PAIRS]
    b = [p[1]["label"] for p in PAIRS]
    assert figs[("label", "kappa")]["value"] == round(cohen_kappa(a, b), 6)
    everything = list(range(len(PAIRS)))
    assert figs[("label", "kappa")]["ci"] == recomputed(
        everything, lambda d: cohen_kappa([a[i] for i in d], [b[i] for i in d])
    )
    assert figs[("label", "kappa")]["n"] == 6

    pairs = [PAIRS[i] for i in BOTH_HARMFUL]
    ca, cb = [p[0]["target_category"] for p in pairs], [p[1]["target_category"] for p in pairs]
    assert figs[("target_category", "kappa")]["value"] == round(cohen_kappa(ca, cb), 6)
    cat_a = {i: PAIRS[i][0]["target_category"] for i in BOTH_HARMFUL}
    cat_b = {i: PAIRS[i][1]["target_category"] for i in BOTH_HARMFUL}
    assert figs[("target_category", "kappa")]["ci"] == recomputed(
        BOTH_HARMFUL, lambda d: cohen_kappa([cat_a[i] for i in d], [cat_b[i] for i in d])
    )
    assert figs[("target_category", "kappa")]["n"] == len(BOTH_HARMFUL) == 4

    _, lexicon = lexicon_current(project=project)
    ent = [f1_rel(p[0]["target_entity"], p[1]["target_entity"], lexicon) for p in pairs]
    assert figs[("target_entity", "mean")]["value"] == round(np.mean(ent), 6)
    ent_of = dict(zip(BOTH_HARMFUL, ent))
    assert figs[("target_entity", "mean")]["ci"] == recomputed(
        BOTH_HARMFUL, lambda d: float(np.mean([ent_of[i] for i in d]))
    )
    assert figs[("target_entity", "share_0.7")]["value"] == round(np.mean([e >= 0.7 for e in ent]), 6)

    men = [token_f1(p[0]["text_mention"], p[1]["text_mention"]) for p in pairs]
    assert figs[("text_mention", "mean")]["value"] == round(np.mean(men), 6)
    men_of = dict(zip(BOTH_HARMFUL, men))
    assert figs[("text_mention", "mean")]["ci"] == recomputed(
        BOTH_HARMFUL, lambda d: float(np.mean([men_of[i] for i in d]))
    )

    ious = [enclosing_iou(p[0]["visual_region"], p[1]["visual_region"]) for p in pairs]
    hit = [float(i >= 0.75) for i in ious]
    assert figs[("visual_region", "share_0.75")]["value"] == round(np.mean(hit), 6) == 0.75
    hit_of = dict(zip(BOTH_HARMFUL, hit))
    assert figs[("visual_region", "share_0.75")]["ci"] == recomputed(
        BOTH_HARMFUL, lambda d: float(np.mean([hit_of[i] for i in d]))
    )
    assert figs[("visual_region", "share_0.75")]["resamples"] == 1000 == report["method"]["resamples"]
    assert figs[("visual_region", "mean")]["value"] == round(np.mean(ious), 6)
    assert [h["field"] for h in report["headline"]] == [
        "target_category",
        "target_entity",
        "text_mention",
        "visual_region",
    ]


def test_export_is_byte_identical_and_free_of_names_and_times(project, annotated, annotator_a):
    first = json.dumps(agreement_report_for_export(project=project), sort_keys=True)
    AgreementReport.objects.all().delete()  # recomputed from scratch: still the same bytes
    assert json.dumps(agreement_report_for_export(project=project), sort_keys=True) == first
    assert annotator_a.username not in first
    assert re.search(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:", first) is None  # no timestamp anywhere


def test_filters_narrow_the_items(project, annotated, tmp_path, annotator_a, annotator_b):
    from projects.factories import items_create
    from quality.factories import annotate_items
    from quality.tests.conftest import rec

    extra = items_create(project, tmp_path / "x", 2, start=50)
    from projects.models import Item

    Item.objects.filter(pk__in=[i.pk for i in extra]).update(source_dataset="other", language="de")
    annotate_items(project, extra, [annotator_a, annotator_b], lambda item, k: rec(cat="gender"))
    assert len(reports.report_units(project=project)) == 8
    assert len(reports.report_units(project=project, filters={"source_dataset": "other"})) == 2
    assert len(reports.report_units(project=project, filters={"language": "de"})) == 2
    # category: at least one annotator chose it (items 1 and the two new ones)
    assert [
        u.item_id for u in reports.report_units(project=project, filters={"category": "target_category=gender"})
    ] == [annotated[1].pk, *[i.pk for i in extra]]
    from django.utils import timezone

    today = timezone.localdate().isoformat()
    assert len(reports.report_units(project=project, filters={"date_from": today, "date_to": today})) == 8
    assert reports.report_units(project=project, filters={"date_to": "2000-01-01"}) == []


def test_cache_is_keyed_by_data_and_a_new_submission_makes_it_stale(
    project, annotated, lead, settings, django_assert_max_num_queries, tmp_path, annotator_a, annotator_b
):
    filters = dict(reports.DEFAULT_FILTERS)
    first = agreement_report_current(project=project, filters=filters, user=lead)
    assert first["row"].status == "done" and not first["stale"]
    with django_assert_max_num_queries(8):  # served from the cache row: no recomputation
        again = agreement_report_current(project=project, filters=filters, user=lead)
    assert again["row"].pk == first["row"].pk

    from projects.factories import items_create
    from quality.factories import annotate_items
    from quality.tests.conftest import rec

    annotate_items(
        project, items_create(project, tmp_path / "y", 1, start=70), [annotator_a, annotator_b], lambda item, k: rec()
    )
    settings.QUALITY_SYNC_MAX_ANNOTATIONS = 0  # "large project": no computation in the request
    stale = agreement_report_current(project=project, filters=filters, user=lead)
    assert stale["stale"] and stale["result"]["agreement"]["n_items"] == 6 and stale["job"] is None


def test_recompute_job_publishes_the_report(project, annotated, lead, settings, django_capture_on_commit_callbacks):
    settings.QUALITY_SYNC_MAX_ANNOTATIONS = 0
    filters = dict(reports.DEFAULT_FILTERS)
    state = agreement_report_current(project=project, filters=filters, user=lead)
    assert state["result"] is None and state["job"] is None
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        row, enqueued = agreement_report_request(project=project, filters=filters, user=lead)
    assert enqueued and len(callbacks) == 1
    row.refresh_from_db()
    assert row.status == "done" and row.progress_done == row.progress_total == 6  # 5 fields + the bootstrap
    assert row.result["agreement"]["n_items"] == 6
    # Same data, same filters: deduplicated, unless forced.
    assert agreement_report_request(project=project, filters=filters, user=lead) == (row, False)
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        _, enqueued = agreement_report_request(project=project, filters=filters, user=lead, force=True)
    assert enqueued and len(callbacks) == 1
    assert AgreementReport.objects.filter(project=project).count() == 1


def test_task_options_reached_celery():
    from quality.tasks import agreement_report_task

    assert agreement_report_task.name == "quality.compute_agreement_report"
    assert agreement_report_task.acks_late is True and agreement_report_task.reject_on_worker_lost is True
    assert agreement_report_task.max_retries == 3
    assert agreement_report_task.soft_time_limit == 540 and agreement_report_task.time_limit == 600


def test_task_is_idempotent(project, annotated, lead):
    from quality.services import agreement_report_compute
    from quality.tasks import agreement_report_task

    row = AgreementReport.objects.create(
        project=project,
        filters=reports.DEFAULT_FILTERS,
        filter_key=reports.filter_key(reports.DEFAULT_FILTERS),
        fingerprint=reports.data_fingerprint(project=project),
    )
    assert agreement_report_task.delay(row.pk).get() == "done"
    row.refresh_from_db()
    finished = row.finished_at
    assert agreement_report_compute(report_id=row.pk) is None  # redelivery: not claimed, untouched
    row.refresh_from_db()
    assert row.finished_at == finished
    assert agreement_report_task.delay(999999).get() == "not claimed"


def test_a_failing_computation_is_recorded(project, annotated, lead, monkeypatch):
    from quality import reports, services

    def boom(**kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(services.reports, "agreement_report_build", boom)
    state = agreement_report_current(project=project, filters=dict(reports.DEFAULT_FILTERS), user=lead)
    assert state["failed"] is not None and "disk on fire" in state["failed"].error and state["result"] is None


def test_project_without_annotations_gives_an_empty_report(project):
    report = agreement_report_for_export(project=project)
    assert report["n_items"] == 0
    assert all(x["value"] is None for f in report["fields"] for x in f["figures"])


@pytest.mark.parametrize("preset", ["aha"])
def test_three_annotator_project_reports_pairs_and_alpha(preset, make_user, tmp_path):
    from projects.factories import items_create, project_with_members
    from quality.factories import annotate_items

    users = [make_user(f"aha{i}") for i in range(3)]
    project = project_with_members("aha1", preset=preset, annotator=users)
    items = items_create(project, tmp_path / "aha", 4)
    hateful = {
        "is_hateful": "Hateful",
        "hateful_type": ["Mocking"],
        "targeted_categories": ["religion"],
        "non_hateful_type": [],
    }
    values = [
        [hateful, hateful, {**hateful, "hateful_type": ["Mocking", "Slurs"]}],
        [hateful, {**hateful, "targeted_categories": ["race"]}, hateful],
        [{"is_hateful": "Not-Hateful", "hateful_type": [], "targeted_categories": [], "non_hateful_type": ["Humor"]}]
        * 3,
        [
            hateful,
            {
                "is_hateful": "Not-Hateful",
                "hateful_type": [],
                "targeted_categories": [],
                "non_hateful_type": ["Sarcasm"],
            },
            hateful,
        ],
    ]
    index = {it.pk: i for i, it in enumerate(items)}
    annotate_items(project, items, users, lambda item, k: values[index[item.pk]][k])
    report = agreement_report_for_export(project=project)
    figs = figures(report)
    assert report["max_slots"] == 3
    assert ("is_hateful", "alpha") in figs and ("hateful_type", "alpha") in figs
    from metrics.agreement import macro_pairwise_kappa

    both = [v for v in values if all(x["is_hateful"] == "Hateful" for x in v)]
    slots = [[set(v[s]["hateful_type"]) for v in both] for s in range(3)]
    from projects.presets import AHA_HATEFUL_TYPES

    assert figs[("hateful_type", "kappa")]["value"] == round(macro_pairwise_kappa(slots, AHA_HATEFUL_TYPES), 6)
