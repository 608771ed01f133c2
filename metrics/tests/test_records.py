from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, f1_score

from metrics.boxes import enclosing_iou
from metrics.entity import TABLE8_LEXICON, f1_rel
from metrics.records import field_scores, jra, jra_scores
from metrics.text import exact_match, token_f1


def harmful(category="gender", entity="women", mention=None, region=()):
    return {
        "label": "harmful",
        "target_category": category,
        "target_entity": entity,
        "text_mention": mention,
        "visual_region": [list(b) for b in region],
    }


NON_HARMFUL = {
    "label": "non-harmful",
    "target_category": None,
    "target_entity": None,
    "text_mention": None,
    "visual_region": [],
}
BOX = (100, 100, 300, 400)


def test_jra_hand_computed() -> None:
    golds = [
        harmful("gender", "women", "women", [BOX]),
        harmful("religion and caste", "Muslim people", None, []),
        harmful("group background", "immigrants", "immigrants", []),
        NON_HARMFUL,
        harmful("health condition", "disabled people", None, [BOX]),
    ]
    preds = [
        harmful("Gender", "woman", "the women", [(110, 100, 300, 400)]),  # all fields pass
        harmful("religion and caste", "Muslims", None, []),  # pass with lexicon only
        harmful("group background", "refugees", "immigrants", []),  # entity distinct
        harmful("gender", "women", "women", [BOX]),  # gold non-harmful: not in JRA
        {**NON_HARMFUL},  # label wrong
    ]
    assert jra_scores(preds, golds, TABLE8_LEXICON).tolist() == [1.0, 1.0, 0.0, 0.0]
    assert jra(preds, golds, TABLE8_LEXICON) == 0.5
    assert jra(preds, golds) == 0.0  # no lexicon: woman != women, Muslims != Muslim people


def test_jra_thresholds_are_category_entity_mention_region() -> None:
    # entity F1_rel 2/3 ("Black women" vs "women"), mention F1 0.8, region IoU 0.6.
    gold = harmful("gender", "Black women", "Saint Bernadette Soubirous", [(0, 0, 100, 100)])
    pred = harmful("gender", "women", "Bernadette Soubirous", [(0, 0, 100, 60)])
    assert jra([pred], [gold]) == 0.0  # default (1, 0.7, 0.7, 0.5): entity fails
    assert jra([pred], [gold], thresholds=(1, 0.6, 0.7, 0.5)) == 1.0  # 2nd = entity
    assert jra([pred], [gold], thresholds=(1, 0.7, 0.6, 0.5)) == 0.0
    assert jra([pred], [gold], thresholds=(1, 0.6, 0.9, 0.5)) == 0.0  # 3rd = mention (0.8)
    assert jra([pred], [gold], thresholds=(1, 0.6, 0.8, 0.6)) == 1.0  # 4th = region (0.6)
    assert jra([pred], [gold], thresholds=(1, 0.6, 0.8, 0.7)) == 0.0
    other_cat = harmful("religion and caste", "women", "Bernadette Soubirous", [(0, 0, 100, 60)])
    assert jra([other_cat], [gold], thresholds=(1, 0.6, 0.8, 0.6)) == 0.0  # 1st = category EM
    assert jra([other_cat], [gold], thresholds=(0, 0.6, 0.8, 0.6)) == 1.0
    with pytest.raises(ValueError):
        jra([pred], [gold], thresholds=(1, 0.7, 0.7))


def test_absent_in_gold_must_be_absent_in_prediction() -> None:
    gold = harmful("gender", "women", None, [])
    assert jra([harmful("gender", "women", None, [])], [gold]) == 1.0
    assert jra([harmful("gender", "women", "women", [])], [gold]) == 0.0  # hallucinated mention
    assert jra([harmful("gender", "women", None, [BOX])], [gold]) == 0.0  # hallucinated region
    # even with zero thresholds presence must match
    assert jra([harmful("gender", "women", "women", [BOX])], [gold], thresholds=(0, 0, 0, 0)) == 0.0
    gold2 = harmful("gender", "women", "women", [BOX])
    assert jra([harmful("gender", "women", None, [BOX])], [gold2], thresholds=(0, 0, 0, 0)) == 0.0
    assert jra([harmful("gender", "women", "women", [])], [gold2], thresholds=(0, 0, 0, 0)) == 0.0


def test_malformed_predictions_do_not_crash() -> None:
    gold = harmful("gender", "women", None, [])
    gold_full = harmful("gender", "women", "women", [BOX])
    cases = [
        (None, 0.0),
        ("harmful", 0.0),
        ({}, 0.0),
        ({"label": 1}, 0.0),
        ({"label": "Harmful", "target_category": "GENDER", "target_entity": "Women!"}, 1.0),  # missing keys = absent
        ({**harmful("gender", "women"), "visual_region": "none"}, 1.0),  # malformed -> []
        ({**harmful("gender", "women"), "visual_region": [[0, 0, 1200, 5]]}, 1.0),  # out of range
        ({**harmful("gender", "women"), "visual_region": [[5, 5, 1, 1]]}, 1.0),  # inverted
        ({**harmful("gender", "women"), "visual_region": [[0, 0, True, 5]]}, 1.0),  # bool coord
        ({**harmful("gender", "women"), "visual_region": [[0, 0, float("nan"), 5]]}, 1.0),
        ({**harmful("gender", "women"), "text_mention": 42}, 1.0),  # non-string -> absent
        ({**harmful("gender", "women"), "target_entity": ["women"]}, 0.0),
        ({**harmful("gender", "women"), "think": "...", "extra": 1}, 1.0),  # extra keys ignored
    ]
    for pred, expected in cases:
        assert jra([pred], [gold]) == expected, pred
    # a malformed region cannot match a present gold region
    assert jra([{**gold_full, "visual_region": [[0, 0, 1, 1], "x"]}], [gold_full]) == 0.0
    # JSON shapes only: a numpy array is not a box (malformed -> absent), but numpy numbers
    # inside a list/tuple are fine.
    assert jra([{**gold_full, "visual_region": (np.array(BOX),)}], [gold_full]) == 0.0
    assert jra([{**gold_full, "visual_region": [tuple(np.int64(v) for v in BOX)]}], [gold_full]) == 1.0


def test_label_variants() -> None:
    gold = [NON_HARMFUL, harmful()]
    preds = [{"label": "Non-Harmful"}, {"label": " HARMFUL ", "target_category": "gender", "target_entity": "women"}]
    s = field_scores(preds, gold)
    assert s["label_acc"] == 1.0 and s["label_f1"] == 1.0 and s["jra"] == 1.0


def test_invalid_gold_raises() -> None:
    with pytest.raises(ValueError):
        jra([NON_HARMFUL], [{"label": "maybe"}])
    with pytest.raises(ValueError):
        jra([NON_HARMFUL], [None])
    with pytest.raises(ValueError):
        jra([NON_HARMFUL], [{**harmful(), "visual_region": [[0, 0, 1]]}])
    with pytest.raises(ValueError):
        jra([NON_HARMFUL], [{**harmful(), "text_mention": 3}])
    with pytest.raises(ValueError):
        jra([NON_HARMFUL], [])


def test_no_gold_harmful() -> None:
    assert jra([NON_HARMFUL], [NON_HARMFUL]) is None
    assert jra([], []) is None
    s = field_scores([NON_HARMFUL], [NON_HARMFUL])
    assert s["label_acc"] == 1.0
    assert s["label_f1"] is None  # no harmful in gold or prediction
    assert s["jra"] is None and s["category_em"] is None and s["region_iou75"] is None
    assert s["n"] == 1 and s["n_harmful"] == 0


def test_field_scores_against_hand_and_sklearn() -> None:
    rng = np.random.default_rng(0)
    golds, preds = [], []
    for i in range(200):
        if rng.random() < 0.45:
            g = harmful(
                ["gender", "religion and caste"][i % 2],
                ["women", "Muslim people"][i % 2],
                "women" if i % 3 else None,
                [BOX] if i % 4 else [],
            )
        else:
            g = dict(NON_HARMFUL)
        r = rng.random()
        if r < 0.15:
            p = dict(NON_HARMFUL)
        elif r < 0.3:
            p = harmful("gender", "Black women", "the women", [(100, 100, 300, 250)])
        elif r < 0.35:
            p = {"label": "??"}
        else:
            p = dict(g)
        golds.append(g)
        preds.append(p)
    s = field_scores(preds, golds, TABLE8_LEXICON)

    y_true = [g["label"] for g in golds]
    y_pred = [p["label"] if p["label"] in ("harmful", "non-harmful") else "invalid" for p in preds]
    assert s["label_acc"] == pytest.approx(accuracy_score(y_true, y_pred))
    # F1 of the harmful class; an invalid label is a third class, never a harmful prediction.
    assert s["label_f1"] == pytest.approx(f1_score(y_true, y_pred, labels=["harmful"], average="micro"))

    h = [i for i, g in enumerate(golds) if g["label"] == "harmful"]
    assert s["n_harmful"] == len(h)

    def mean(xs):
        return float(np.mean(xs))

    def get(p, k, default=None):
        return p.get(k, default) if isinstance(p, dict) else default

    assert s["category_em"] == pytest.approx(
        mean([exact_match(get(preds[i], "target_category"), golds[i]["target_category"]) for i in h])
    )
    assert s["entity_f1_rel"] == pytest.approx(
        mean([f1_rel(get(preds[i], "target_entity"), golds[i]["target_entity"], TABLE8_LEXICON) for i in h])
    )
    assert s["mention_em"] == pytest.approx(
        mean([exact_match(get(preds[i], "text_mention"), golds[i]["text_mention"]) for i in h])
    )
    assert s["mention_f1"] == pytest.approx(
        mean([token_f1(get(preds[i], "text_mention"), golds[i]["text_mention"]) for i in h])
    )
    ious = [enclosing_iou(get(preds[i], "visual_region", []), golds[i]["visual_region"]) for i in h]
    assert s["region_iou50"] == pytest.approx(mean([v >= 0.5 for v in ious]))
    assert s["region_iou75"] == pytest.approx(mean([v >= 0.75 for v in ious]))
    assert s["jra"] == pytest.approx(jra(preds, golds, TABLE8_LEXICON))
    assert 0 < s["jra"] < s["label_acc"]
    with pytest.raises(ValueError):
        field_scores(preds[:-1], golds)


def test_field_scores_small_exact() -> None:
    golds = [harmful("gender", "women", "women", [BOX]), harmful("gender", "women", None, []), NON_HARMFUL, NON_HARMFUL]
    preds = [harmful("gender", "women", "the women", [(100, 100, 300, 300)]), NON_HARMFUL, harmful(), NON_HARMFUL]
    s = field_scores(preds, golds)
    # TP=1, FN=1, FP=1, TN=1
    assert s["label_acc"] == 0.5
    assert s["label_f1"] == 0.5
    assert s["category_em"] == 0.5  # second record: predicted non-harmful -> category absent
    assert s["entity_f1_rel"] == 0.5
    assert s["mention_em"] == 1.0 and s["mention_f1"] == 1.0  # "the women" == "women"; both absent
    assert s["region_iou50"] == 1.0  # IoU 200x200/200x300 = 0.667; and [] vs []
    assert s["region_iou75"] == 0.5
    assert s["jra"] == 0.5
