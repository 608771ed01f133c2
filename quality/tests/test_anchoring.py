"""Anchoring analytics: takes and edits per hidden model from the stored provenance, by field
and by annotator, and each model's own scores against gold."""

from __future__ import annotations

from candidates.factories import PROVIDER_NAMES, candidates_create
from candidates.models import Candidate
from candidates.selectors import candidate_id_for_letter, candidates_for_annotator
from quality.anchoring import anchoring_report
from quality.factories import annotate_items
from quality.tests.conftest import ZORG, rec

REPLIES = [
    rec(cat="group background", entity=ZORG, mention=ZORG, region=[[100, 100, 400, 400]]),  # Alpha
    rec(cat="gender", entity="Zorgians", mention="Zorg", region=[]),  # Beta
    rec("non-harmful"),  # Gamma
]


def letter_of(item, user, provider_name):
    for cand in candidates_for_annotator(item=item, user=user):
        cid = candidate_id_for_letter(item=item, user=user, letter=cand.letter)
        if Candidate.objects.get(pk=cid).provider.name == provider_name:
            return cand.letter
    raise AssertionError(provider_name)


def test_takes_and_edits_per_model_field_and_annotator(project, six_items, annotator_a, annotator_b, lead):
    items = six_items[:2]
    for item in items:
        candidates_create(item, REPLIES)
    final = rec(cat="group background", entity="Zorg people", mention=ZORG, region=[[100, 100, 400, 400]])

    def provenance(item, k):
        if k == 1:
            return {}  # annotator_b writes everything
        alpha = letter_of(item, annotator_a, PROVIDER_NAMES[0])
        beta = letter_of(item, annotator_a, PROVIDER_NAMES[1])
        # label, category, mention, region unchanged from Alpha; entity from Beta, then edited.
        return {
            "label": {"letter": alpha},
            "target_category": {"letter": alpha},
            "text_mention": {"letter": alpha},
            "visual_region": {"letter": alpha},
            "target_entity": {"letter": beta},
        }

    annotate_items(project, items, [annotator_a, annotator_b], lambda item, k: final, provenance)
    report = anchoring_report(project=project)
    models = {m["provider"]: m for m in report["models"]}
    alpha = {f["field"]: f for f in models[PROVIDER_NAMES[0]]["fields"]}
    beta = {f["field"]: f for f in models[PROVIDER_NAMES[1]]["fields"]}
    # 2 items x 2 annotators = 4 submitted annotations saw each model's candidate for each field.
    assert alpha["label"] == {
        "field": "label",
        "offered": 4,
        "taken": 2,
        "edited": 0,
        "take_rate": 0.5,
        "edit_rate": 0.0,
    }
    assert alpha["target_entity"]["taken"] == 0
    assert beta["target_entity"] == {
        "field": "target_entity",
        "offered": 4,
        "taken": 2,
        "edited": 2,
        "take_rate": 0.5,
        "edit_rate": 1.0,
    }
    assert models[PROVIDER_NAMES[2]]["total"]["taken"] == 0
    total = models[PROVIDER_NAMES[0]]["total"]
    ci = total.pop("take_rate_ci")
    assert total == {"offered": 20, "taken": 8, "edited": 0, "take_rate": 0.4, "edit_rate": 0.0}
    assert ci[0] <= 0.4 <= ci[1]
    # 8 of 20 offered values from one model, none from the others, over 12 annotations: the
    # CIs overlap (issue 19.5), so no "annotators lean most on ..." claim.
    assert report["most_taken"] is None and "cannot tell" in report["most_taken_note"]
    by = {a["annotator"]: {m["provider"]: m for m in a["models"]} for a in report["by_annotator"]}
    assert by["annotator_a"][PROVIDER_NAMES[0]]["taken"] == 8 and by["annotator_b"][PROVIDER_NAMES[0]]["taken"] == 0
    own = {o["field"]: o for o in report["own_values"]}
    assert own["target_entity"] == {"field": "target_entity", "with_candidates": 4, "own": 2, "own_rate": 0.5}

    # The two items became gold (identical annotations): each model scored with the Table 1 columns.
    gold = {r["provider"]: r["scores"]["gold"] for r in report["gold_scores"]["rows"]}
    assert report["n_gold"] == 2
    assert gold[PROVIDER_NAMES[0]]["label_acc"] == 1.0 and gold[PROVIDER_NAMES[0]]["region_iou75"] == 1.0
    assert gold[PROVIDER_NAMES[2]]["label_acc"] == 0.0 and gold[PROVIDER_NAMES[2]]["jra"] == 0.0
    assert gold[PROVIDER_NAMES[1]]["category_em"] == 0.0
    # Alpha's entity "people from Planet Zorg" vs gold "Zorg people": F1_rel 2*2/(4+2) = 0.667 < 0.7.
    assert gold[PROVIDER_NAMES[0]]["entity_f1_rel"] == round(2 / 3, 6)
    assert gold[PROVIDER_NAMES[0]]["jra"] == 0.0 and gold[PROVIDER_NAMES[0]]["jra_ci"] == [0.0, 0.0]


def test_no_candidates_no_models(project, annotated):
    report = anchoring_report(project=project)
    assert report["models"] == [] and report["most_taken"] is None and report["n_annotations"] == 12


def test_lean_claim_only_when_the_cis_separate():
    import numpy as np

    from quality.anchoring import _lean_claim

    info = {1: {"name": "m1"}, 2: {"name": "m2"}, 3: {"name": "m3"}}
    rng = np.random.default_rng(0)
    n = 400
    offered = np.ones((n, 3))
    clear = np.column_stack([rng.random(n) < 0.6, rng.random(n) < 0.1, rng.random(n) < 0.1]).astype(float)
    models = [{"provider": f"m{i}", "total": {}} for i in (1, 2, 3)]
    matrix = np.column_stack([clear[:, 0], offered[:, 0], clear[:, 1], offered[:, 1], clear[:, 2], offered[:, 2]])
    assert _lean_claim(models, [1, 2, 3], info, matrix)["provider"] == "m1"
    close = np.column_stack([rng.random(40) < 0.10, rng.random(40) < 0.10, rng.random(40) < 0.09]).astype(float)
    matrix = np.column_stack([close[:, 0], np.ones(40), close[:, 1], np.ones(40), close[:, 2], np.ones(40)])
    claim = _lean_claim(models, [1, 2, 3], info, matrix)
    assert claim["provider"] is None and "cannot tell" in claim["note"]
