"""Candidate-blind audit: stratified, reproducible sampling; assignment to auditors who did not
annotate the item; the Table 9 report hand-checked on a tiny case; models re-scored."""

from __future__ import annotations

import pytest

from annotation.models import Annotation
from core.errors import Invalid
from quality import audits
from quality.audits import audit_report, audit_report_for_export
from quality.factories import annotate_items, audit_submit_all
from quality.models import AuditItem
from quality.services import audit_create
from quality.tests.conftest import ZORG, rec

GOLD = [
    rec(cat="group background", entity=ZORG, mention=ZORG, region=[[100, 100, 400, 400]]),
    rec(cat="gender", entity="Zorg women", mention="Zorg", region=[]),
    rec(cat="religion and caste", entity="Zorgians", mention=None, region=[[0, 0, 500, 500]]),
]
BLIND = [
    GOLD[0],
    rec(cat="gender", entity="women of Zorg", mention="Planet Zorg", region=[]),
    rec(cat="group background", entity="Zorgians", mention=None, region=[[0, 0, 500, 400]]),
]


@pytest.fixture
def gold3(project, tmp_path, annotator_a, annotator_b):
    """Three gold items (identical annotations become gold without review), one per stratum."""
    from projects.factories import items_create

    items = items_create(project, tmp_path / "g3", 3)
    index = {it.pk: i for i, it in enumerate(items)}
    annotate_items(project, items, [annotator_a, annotator_b], lambda item, k: GOLD[index[item.pk]])
    return items


def test_table9_hand_checked_on_three_items(project, gold3, lead, auditor):
    audit = audit_create(project=project, created_by=lead, size=3, seed=1)
    assert audit.audit_items.count() == 3 and {s["sampled"] for s in audit.strata} == {1}
    index = {it.pk: i for i, it in enumerate(gold3)}
    report = audit_report(audit=audit)
    assert report["progress"] == {"sampled": 3, "assigned": 3, "submitted": 0, "compared": 0}
    assert report["table9"]["mean"] is None

    audit_submit_all(audit, lambda item, gold: BLIND[index[item.pk]])
    report = audit_report(audit=audit)
    values = {r["field"]: r["value"] for r in report["table9"]["rows"]}
    # Category: gold (gb, gender, rc) vs blind (gb, gender, gb): p_o = 2/3, p_e = (1*2 + 1*1 + 1*0)/9 = 1/3,
    # kappa = (2/3 - 1/3) / (1 - 1/3) = 0.5. Entity: (1 + 0.8 + 1)/3 ("Zorg women" vs "women of Zorg":
    # 2*2/(2+3)). Mention: (1 + 2/3 + 1)/3 ("Zorg" vs "Planet Zorg": 2*1/(1+2); None/None = 1).
    # Region: IoU 1, absent/absent 1, 500x400 in 500x500 = 0.8 -> all >= 0.75.
    assert values == {
        "target_category": 0.5,
        "target_entity": round(2.8 / 3, 6),
        "text_mention": round((2 + 2 / 3) / 3, 6),
        "visual_region": 1.0,
    }
    assert report["table9"]["mean"] == round((0.5 + 2.8 / 3 + (2 + 2 / 3) / 3 + 1.0) / 4, 6) == 0.830556
    assert all(r["n"] == 3 for r in report["table9"]["rows"])
    assert report["progress"]["compared"] == 3


def test_models_are_rescored_against_blind_and_gold(project, gold3, lead, auditor):
    from candidates.factories import candidates_create

    index = {it.pk: i for i, it in enumerate(gold3)}
    for item in gold3:  # model 0 reproduces gold, model 1 reproduces the blind annotation
        candidates_create(item, [GOLD[index[item.pk]], BLIND[index[item.pk]]])
    audit = audit_create(project=project, created_by=lead, size=3, seed=1)
    audit_submit_all(audit, lambda item, gold: BLIND[index[item.pk]])
    models = audit_report(audit=audit)["models"]
    rows = {r["provider"]: r for r in models["rows"]}
    gold_faithful, blind_faithful = rows["SecretProviderAlpha"], rows["SecretProviderBeta"]
    assert gold_faithful["scores"]["gold"]["jra"] == 1.0 and blind_faithful["scores"]["blind"]["jra"] == 1.0
    # The blind record fails JRA against gold on item 2 (mention F1 2/3 < 0.7) and item 3 (category).
    assert blind_faithful["scores"]["gold"]["jra"] == round(1 / 3, 6)
    assert gold_faithful["rank"] == {"gold": 1, "blind": 2} and models["same_order"] is False
    assert gold_faithful["coverage"] == 3 and gold_faithful["model"] == "gpt-4o-hidden-model"


def test_sample_is_stratified_reproducible_and_avoids_the_items_annotators(
    project, lead, auditor, make_user, tmp_path, annotator_a, annotator_b
):
    from projects.factories import items_create
    from projects.services import membership_add

    second = make_user("auditor2")
    membership_add(project=project, user=second, role="auditor")
    membership_add(project=project, user=annotator_a, role="auditor")  # annotated everything: never eligible
    items = items_create(project, tmp_path / "s", 12)
    kinds = [GOLD[0]] * 6 + [GOLD[1]] * 4 + [GOLD[2]] * 2
    index = {it.pk: i for i, it in enumerate(items)}
    annotate_items(project, items, [annotator_a, annotator_b], lambda item, k: kinds[index[item.pk]])
    first = audit_create(project=project, created_by=lead, size=6, seed=42)
    again = audit_create(project=project, created_by=lead, size=6, seed=42)
    sample = sorted(first.audit_items.values_list("item_id", flat=True))
    assert sample == sorted(again.audit_items.values_list("item_id", flat=True))
    assert {s["key"]: s["sampled"] for s in first.strata} == {
        "target_category=gender|text_mention=present|visual_region=absent": 2,
        "target_category=group background|text_mention=present|visual_region=present": 3,
        "target_category=religion and caste|text_mention=absent|visual_region=present": 1,
    }
    assignees = list(first.audit_items.values_list("auditor__username", flat=True))
    assert set(assignees) == {"auditor", "auditor2"} and assignees.count("auditor") == 3  # balanced
    for ai in AuditItem.objects.filter(audit=first):
        assert not Annotation.objects.filter(item=ai.item, annotator=ai.auditor, kind="annotation").exists()
        assert ai.annotation.kind == "audit" and ai.annotation.annotator_id == ai.auditor_id
    other = audit_create(project=project, created_by=lead, size=6, seed=43)
    assert sorted(other.audit_items.values_list("item_id", flat=True)) != sample


def test_items_every_auditor_annotated_stay_unassigned_with_a_note(project, gold3, lead, annotator_a):
    from projects.models import Membership

    Membership.objects.filter(project=project, role="auditor").delete()
    from projects.services import membership_add

    membership_add(project=project, user=annotator_a, role="auditor")
    audit = audit_create(project=project, created_by=lead, size=3, seed=0)
    assert audit.audit_items.filter(auditor__isnull=True).count() == 3
    assert len(audit.notes) == 3 and "every auditor annotated" in audit.notes[0]


def test_bad_requests_get_clear_messages(project, lead, gold3, auditor):
    with pytest.raises(Invalid, match="at most 3"):
        audit_create(project=project, created_by=lead, size=200)
    with pytest.raises(Invalid, match="smaller than the 3 non-empty strata"):
        audit_create(project=project, created_by=lead, size=2)
    with pytest.raises(Invalid, match="at least 1"):
        audit_create(project=project, created_by=lead, size=0)
    from projects.models import Membership

    Membership.objects.filter(project=project, role="auditor").delete()
    with pytest.raises(Invalid, match="no auditor"):
        audit_create(project=project, created_by=lead, size=3)


def test_no_gold_yet(project, lead, auditor, annotated):
    from adjudication.models import GoldRecord

    GoldRecord.objects.all().delete()
    with pytest.raises(Invalid, match="no gold records yet"):
        audit_create(project=project, created_by=lead, size=1)


def test_only_untargeted_gold(project, lead, auditor, tmp_path, annotator_a, annotator_b):
    from projects.factories import items_create

    annotate_items(
        project, items_create(project, tmp_path / "nh", 2), [annotator_a, annotator_b], lambda i, k: rec("non-harmful")
    )
    with pytest.raises(Invalid, match="No gold item has a target"):
        audit_create(project=project, created_by=lead, size=1)
    audit = audit_create(project=project, created_by=lead, size=1, include_untargeted=True)
    assert audit.strata[0]["label"] == "no target category · text mention absent · visual region absent"


def test_audit_export_is_the_latest_audit_and_deterministic(project, gold3, lead, auditor):
    import json

    audit_create(project=project, created_by=lead, size=3, seed=5)
    latest = audit_create(project=project, created_by=lead, size=3, seed=6)
    export = audit_report_for_export(project=project)
    assert export["audit_id"] == latest.pk and export["seed"] == 6
    text = json.dumps(export, sort_keys=True)
    assert text == json.dumps(audit_report_for_export(project=project), sort_keys=True)
    assert auditor.username not in text and "created_at" not in text
    assert audits.audits_for_project(project=project).first().n_items == 3


def test_study_settings_choose_the_audit_strata_and_size(client_for, project, gold3, lead, auditor):
    """Issue 12: the strata fields and the default sample size come from the study settings."""
    project.audit_strata = ["target_category", "visual_region"]
    project.audit_sample_size = 3
    project.save()
    audit = audit_create(project=project, created_by=lead, size=3, seed=1)
    keys = {s["key"] for s in audit.strata}
    assert keys == {  # category x region present / absent: the grounding field counts by presence
        "target_category=group background|visual_region=present",
        "target_category=gender|visual_region=absent",
        "target_category=religion and caste|visual_region=present",
    }
    project.audit_sample_size = 2
    project.save()
    page = client_for(lead).get(f"/p/{project.slug}/quality/audits/").content.decode()
    assert 'name="size" value="2"' in page
