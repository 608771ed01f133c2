"""metrics.evaluation: the standalone scorer equals the package's metrics, scikit-learn and
sacrebleu, follows the paper's rules for missing and malformed predictions, and reports bad
input line by line."""

from __future__ import annotations

import io
import json
import random

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn.metrics import f1_score, recall_score

from metrics import evaluation as ev
from metrics.bootstrap import mean_ci, paired_ci
from metrics.boxes import enclosing_iou
from metrics.captions import corpus_bleu, rouge_l_scores, token_f1_scores
from metrics.entity import TABLE8_LEXICON, f1_rel
from metrics.records import field_scores, jra, jra_scores
from metrics.tests.strategies import FAST, int_box, mixed_text, optional_mixed_text, region
from metrics.text import normalize, token_f1, tokens

HARMFUL_ONLY = {"field": "label", "in": ["harmful"]}
CATEGORIES = ["group background", "religion and caste", "gender", "health condition"]
#: The plan projects.evaluation builds for the meme3w preset (projects/tests check it is).
MEME3W_PLAN = {
    "format": ev.PLAN_FORMAT,
    "version": 1,
    "fields": [
        {"name": "label", "kind": "choice", "choices": ["harmful", "non-harmful"], "positive": "harmful"},
        {"name": "target_category", "kind": "choice", "choices": CATEGORIES, "subset": HARMFUL_ONLY},
        {"name": "target_entity", "kind": "entity", "subset": HARMFUL_ONLY},
        {"name": "text_mention", "kind": "span", "subset": HARMFUL_ONLY},
        {"name": "visual_region", "kind": "boxes", "subset": HARMFUL_ONLY},
    ],
    "composites": [
        {
            "name": "jra",
            "kind": "jra",
            "label": "label",
            "positive": "harmful",
            "fields": [["target_category", 1.0], ["target_entity", 0.7], ["text_mention", 0.7], ["visual_region", 0.5]],
        }
    ],
    "breakdowns": ["source_dataset", "gold.target_category"],
}
ENTITIES = ["women", "woman", "Muslim people", "Muslims", "Black women", "immigrants", "refugees", None]
MENTIONS = ["the women", "women", "Muslims", "all immigrants", "immigrants here", None]
BOXES = [[], [[100, 100, 300, 400]], [[110, 100, 300, 400]], [[0, 0, 500, 500], [600, 600, 900, 900]]]


def random_record(rng: random.Random) -> dict:
    if rng.random() < 0.4:
        return {"label": "non-harmful", "target_category": None, "target_entity": None, "text_mention": None,
                "visual_region": []}  # fmt: skip
    return {
        "label": "harmful",
        "target_category": rng.choice(CATEGORIES),
        "target_entity": rng.choice(ENTITIES[:-1]),
        "text_mention": rng.choice(MENTIONS),
        "visual_region": rng.choice(BOXES),
    }


def golds_of(records: list[dict], **extra) -> list[dict]:
    return [{"item_id": i + 1, "gold": r, "source_dataset": "ds" + str(i % 2), **extra} for i, r in enumerate(records)]


def figures(plan, golds, preds, lexicon=None) -> dict[str, float | None]:
    return {f.name: f.value() for f in ev.score(plan, golds, preds, lexicon=lexicon).figures}


# ---------------------------------------------------------------------------------- copies


@FAST
@given(optional_mixed_text, optional_mixed_text)
def test_text_rules_equal_metrics_text(a, b) -> None:
    assert ev.normalize(a) == normalize(a)
    assert ev.tokens(a) == tokens(a)
    assert ev.token_f1(a, b) == token_f1(a, b)


@FAST
@given(st.sampled_from(ENTITIES + ["Jews", "Jewish people", "LGBTQ community"]), mixed_text)
def test_entity_rule_equals_f1_rel(a, b) -> None:
    lex = ev.normalize_lexicon(TABLE8_LEXICON)
    assert ev._f1_tokens(ev._canonical_tokens(a, lex), ev._canonical_tokens(b, lex)) == f1_rel(a, b, TABLE8_LEXICON)


@FAST
@given(region(int_box()), region(int_box()))
def test_box_rule_equals_enclosing_iou(a, b) -> None:
    assert ev.enclosing_iou(a, b) == pytest.approx(enclosing_iou(a, b), abs=1e-15)


# ---------------------------------------------------------------------------------- meme3w


def test_meme3w_figures_equal_metrics_records() -> None:
    rng = random.Random(7)
    gold = [random_record(rng) for _ in range(400)]
    pred = [random_record(rng) if rng.random() < 0.5 else dict(g) for g in gold]
    pred = [{**p, "target_entity": rng.choice(ENTITIES)} if p["label"] == "harmful" else p for p in pred]
    got = figures(MEME3W_PLAN, golds_of(gold), pred, TABLE8_LEXICON)
    ref = field_scores(pred, gold, TABLE8_LEXICON)
    pairs = {
        "label.acc": "label_acc",
        "label.f1": "label_f1",
        "jra": "jra",
        "target_category.acc": "category_em",
        "target_entity.f1_rel": "entity_f1_rel",
        "text_mention.em": "mention_em",
        "text_mention.f1": "mention_f1",
        "visual_region.iou50": "region_iou50",
        "visual_region.iou75": "region_iou75",
    }
    for mine, theirs in pairs.items():
        assert got[mine] == pytest.approx(ref[theirs], abs=1e-12), mine
    assert got["jra"] == pytest.approx(jra(pred, gold, TABLE8_LEXICON), abs=1e-12)
    # label F1 is the harmful class's binary F1 (sklearn), recall likewise
    y = [g["label"] for g in gold]
    yh = [p["label"] for p in pred]
    assert got["label.f1"] == pytest.approx(f1_score(y, yh, pos_label="harmful"), abs=1e-12)
    assert got["label.recall"] == pytest.approx(recall_score(y, yh, pos_label="harmful"), abs=1e-12)
    assert got["label.macro_f1"] == pytest.approx(f1_score(y, yh, average="macro"), abs=1e-12)


def test_jra_hand_computed_with_lexicon() -> None:
    box = [100, 100, 300, 400]
    gold = [
        {"label": "harmful", "target_category": "gender", "target_entity": "women", "text_mention": "women",
         "visual_region": [box]},
        {"label": "harmful", "target_category": "religion and caste", "target_entity": "Muslim people",
         "text_mention": None, "visual_region": []},
        {"label": "non-harmful"},
    ]  # fmt: skip
    pred = [
        {"label": "Harmful", "target_category": "Gender", "target_entity": "woman", "text_mention": "the women",
         "visual_region": [[110, 100, 300, 400]]},
        {"label": "harmful", "target_category": "religion_and_caste", "target_entity": "Muslims"},
        {"label": "non-harmful"},
    ]  # fmt: skip
    got = figures(MEME3W_PLAN, golds_of(gold), pred, TABLE8_LEXICON)
    assert got["jra"] == 1.0
    assert got["label.acc"] == 1.0
    assert figures(MEME3W_PLAN, golds_of(gold), pred)["jra"] == 0.0  # without the lexicon


def test_missing_prediction_is_wrong_everywhere() -> None:
    gold = [{"label": "non-harmful"}, {"label": "harmful", "target_category": "gender", "target_entity": "women"}]
    got = figures(MEME3W_PLAN, golds_of(gold), [None, None])
    assert got["label.acc"] == 0.0
    assert got["jra"] == 0.0
    assert got["target_category.acc"] == 0.0
    # a missing target field on a gold-absent field is still wrong (missing != absent)
    assert got["text_mention.f1"] == 0.0
    assert got["visual_region.iou50"] == 0.0


def test_malformed_field_is_wrong_and_counted_but_the_rest_is_scored() -> None:
    gold = [{"label": "harmful", "target_category": "gender", "target_entity": "women", "text_mention": None,
             "visual_region": []}]  # fmt: skip
    pred = [{"label": "harmful", "target_category": "gender", "target_entity": "women", "text_mention": 42,
             "visual_region": [[5, 5, 1, 1]]}]  # fmt: skip
    scored = ev.score(MEME3W_PLAN, golds_of(gold), pred)
    got = {f.name: f.value() for f in scored.figures}
    assert got["target_category.acc"] == 1.0
    assert got["target_entity.f1_rel"] == 1.0
    assert got["text_mention.f1"] == 0.0  # metrics.records would call this a correct absence
    assert got["visual_region.iou50"] == 0.0
    assert got["jra"] == 0.0
    assert {k: int(v.sum()) for k, v in scored.malformed.items()}["visual_region"] == 1
    # a field a reply parser removed as malformed carries the marker: wrong as well
    marked = [{**pred[0], "text_mention": None, "visual_region": [], "target_entity": {ev.MALFORMED_KEY: "x"}}]
    got = figures(MEME3W_PLAN, golds_of(gold), marked)
    assert got["target_entity.f1_rel"] == 0.0 and got["jra"] == 0.0 and got["text_mention.f1"] == 1.0


# ---------------------------------------------------------------------------------- multi-label, captions


AHA_PLAN = {
    "fields": [
        {"name": "is_hateful", "kind": "choice", "choices": ["Hateful", "Not-Hateful"], "positive": "Hateful"},
        {"name": "hateful_type", "kind": "multichoice", "choices": ["Mocking", "Slurs", "Contempt", "Other"],
         "subset": {"field": "is_hateful", "in": ["Hateful"]}},
    ]
}  # fmt: skip


def test_multilabel_macro_and_micro_f1_equal_sklearn() -> None:
    rng = random.Random(3)
    labels = AHA_PLAN["fields"][1]["choices"]
    gold = [{"is_hateful": "Hateful", "hateful_type": rng.sample(labels[:3], rng.randint(1, 2))} for _ in range(200)]
    pred = [{"is_hateful": "Hateful", "hateful_type": rng.sample(labels, rng.randint(0, 2))} for _ in range(200)]
    got = figures(AHA_PLAN, golds_of(gold), pred)

    def matrix(rows):
        return np.array([[lab in r["hateful_type"] for lab in labels] for r in rows], dtype=int)

    y, yh = matrix(gold), matrix(pred)
    present = [j for j in range(len(labels)) if y[:, j].any() or yh[:, j].any()]
    assert got["hateful_type.macro_f1"] == pytest.approx(
        f1_score(y, yh, average="macro", labels=present, zero_division=0), abs=1e-12
    )
    assert got["hateful_type.micro_f1"] == pytest.approx(f1_score(y, yh, average="micro", zero_division=0), abs=1e-12)


CAPTION_PLAN = {"fields": [{"name": "meme_caption", "kind": "text", "references": True}]}


def test_caption_metrics_equal_sacrebleu_and_rouge_score_against_all_references() -> None:
    refs = [
        ["The poster hates Mondays.", "Mondays are the worst for the poster."],
        ["Cats rule the house."],
        ["Students fear exams", "Exams are scary", "Nobody likes exams"],
    ]
    hyps = ["The poster really hates Mondays", "The cat rules the home.", "exams are scary for students"]
    golds = golds_of([{"meme_caption": r} for r in refs])
    got = figures(CAPTION_PLAN, golds, [{"meme_caption": h} for h in hyps])
    assert got["meme_caption.bleu4"] == pytest.approx(corpus_bleu(hyps, refs), abs=1e-12)
    assert got["meme_caption.rouge_l"] == pytest.approx(float(rouge_l_scores(hyps, refs).mean()), abs=1e-12)
    assert got["meme_caption.token_f1"] == pytest.approx(float(token_f1_scores(hyps, refs).mean()), abs=1e-12)
    # one reference only would score lower: all references are used
    single = figures(
        CAPTION_PLAN, golds_of([{"meme_caption": [r[-1]]} for r in refs]), [{"meme_caption": h} for h in hyps]
    )
    assert single["meme_caption.rouge_l"] < got["meme_caption.rouge_l"]


# ---------------------------------------------------------------------------------- bootstrap


def test_mean_ci_and_paired_ci_equal_metrics_bootstrap() -> None:
    rng = random.Random(11)
    gold = [random_record(rng) for _ in range(300)]
    a = [random_record(rng) if rng.random() < 0.4 else dict(g) for g in gold]
    b = [random_record(rng) if rng.random() < 0.6 else dict(g) for g in gold]
    sa = ev.score(MEME3W_PLAN, golds_of(gold), a).by_name()
    sb = ev.score(MEME3W_PLAN, golds_of(gold), b).by_name()
    per_a, per_b = jra_scores(a, gold), jra_scores(b, gold)
    assert ev.figure_ci(sa["jra"]) == pytest.approx(list(mean_ci(per_a, n=ev.RESAMPLES, seed=ev.SEED)), abs=1e-12)
    diff = ev.paired_difference(sa["jra"], sb["jra"])
    assert diff["difference"] == pytest.approx(per_a.mean() - per_b.mean(), abs=1e-12)
    assert diff["ci"] == pytest.approx(list(paired_ci(per_a, per_b, n=ev.PAIRED_RESAMPLES, seed=ev.SEED)), abs=1e-12)


def test_ratio_figure_ci_brackets_the_value_and_is_deterministic() -> None:
    rng = random.Random(5)
    gold = [random_record(rng) for _ in range(300)]
    pred = [random_record(rng) for _ in gold]
    f1 = ev.score(MEME3W_PLAN, golds_of(gold), pred).by_name()["label.f1"]
    ci = ev.figure_ci(f1)
    assert ci[0] < f1.value() < ci[1]
    assert ci == ev.figure_ci(f1)
    # the paired difference of a figure with itself is exactly 0 in every resample
    same = ev.paired_difference(f1, f1)
    assert same["difference"] == 0.0 and same["ci"] == [0.0, 0.0]


def test_breakdowns_by_source_and_gold_category() -> None:
    gold = [random_record(random.Random(i)) for i in range(60)]
    summary = ev.summarize(ev.score(MEME3W_PLAN, golds_of(gold), gold), breakdowns=MEME3W_PLAN["breakdowns"])
    assert set(summary["breakdowns"]["source_dataset"]) == {"ds0", "ds1"}
    by_cat = summary["breakdowns"]["gold.target_category"]
    assert set(by_cat) <= set(CATEGORIES) and by_cat
    assert all(v["jra"]["value"] == 1.0 for v in by_cat.values())
    n_harmful = sum(1 for g in gold if g["label"] == "harmful")
    assert sum(v["jra"]["n"] for v in by_cat.values()) == n_harmful == summary["figures"]["jra"]["n"]


# ---------------------------------------------------------------------------------- reading


def index_of(n=4) -> ev.GoldIndex:
    records = [
        {"item_id": i, "source_id": f"src-{i}", "split": "test" if i <= n else "train", "gold": {"label": "harmful"}}
        for i in range(1, n + 3)
    ]
    return ev.GoldIndex(records, "test")


def read(text: str | bytes, **kw) -> ev.Reading:
    data = text.encode() if isinstance(text, str) else text
    plan = {**MEME3W_PLAN, "release": {"project": "demo", "version": 2}}
    return ev.read_predictions(ev.iter_lines(io.BytesIO(data)), plan=plan, index=index_of(), **kw)


def test_reading_reports_each_problem_by_line() -> None:
    lines = [
        json.dumps({"item_id": 1, "label": "harmful"}),
        "{not json",
        json.dumps({"item_id": 99, "label": "harmful"}),
        json.dumps({"item_id": 1, "label": "non-harmful"}),
        json.dumps({"source_id": "src-2", "label": "harmful", "visual_region": "everywhere"}),
        json.dumps({"item_id": 5, "label": "harmful"}),
        json.dumps([1, 2]),
        "",
        json.dumps({"label": "harmful"}),
    ]
    r = read("\n".join(lines) + "\n")
    assert not r.refused
    c = r.counts
    assert (c["matched"], c["missing"], c["duplicate"], c["unknown"], c["other_split"]) == (2, 2, 1, 1, 1)
    assert (c["extra"], c["unreadable"], c["no_id"], c["blank"]) == (2, 2, 1, 1)
    assert r.malformed_fields["visual_region"] == 1
    by_line = {p["line"]: p["problem"] for p in r.problems}
    assert by_line[2].startswith("not JSON")
    assert "names no item" in by_line[3]
    assert "again" in by_line[4]
    assert "visual_region" in by_line[5] and "scored as wrong" in by_line[5]
    assert "another split" in by_line[6]
    assert by_line[7] == "not a JSON object"
    assert "no item_id" in by_line[9]
    assert r.predictions[0] == {"label": "harmful"}  # the first line for item 1 is kept
    assert r.predictions[2] is None and r.predictions[3] is None


def test_file_for_another_release_is_refused() -> None:
    header = json.dumps({"concord_release": {"project": "demo", "version": 1}})
    r = read(header + "\n" + json.dumps({"item_id": 1, "label": "harmful"}) + "\n")
    assert "for demo v1, not demo v2" in r.refused
    assert all(p is None for p in r.predictions)
    ok = read(json.dumps({"concord_release": {"project": "demo", "version": 2}}) + "\n" + '{"item_id": 1}\n')
    assert not ok.refused and ok.counts["matched"] == 1
    other = read(json.dumps({"item_id": 1234, "label": "harmful"}) + "\n")
    assert "no line names an item of this split" in other.refused


def test_fifty_megabytes_of_garbage_are_refused_with_a_reason() -> None:
    garbage = np.random.default_rng(0).integers(0, 256, size=50 << 20, dtype=np.uint8).tobytes()
    r = read(garbage)
    assert r.refused
    assert "hold no prediction" in r.refused
    assert len(r.problems) <= ev.MAX_LISTED_PROBLEMS
    big = read(garbage, max_bytes=1 << 20)
    assert big.refused


def test_reading_a_long_line_is_a_problem_not_a_crash() -> None:
    long = json.dumps({"item_id": 1, "target_entity": "x" * (ev.MAX_LINE_BYTES + 10)})
    r = read(long + "\n" + json.dumps({"item_id": 2, "label": "harmful"}) + "\n")
    assert r.counts["unreadable"] == 1 and r.counts["matched"] == 1


# ---------------------------------------------------------------------------------- offline


def test_release_evaluate_and_cli_on_a_release_folder(tmp_path, capsys) -> None:
    rng = random.Random(1)
    records = []
    for i in range(1, 41):
        records.append({"item_id": i, "source_id": f"s{i}", "split": "test" if i % 4 else "train",
                        "source_dataset": "d", "gold": random_record(rng)})  # fmt: skip
    (tmp_path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "evaluation.json").write_text(json.dumps(MEME3W_PLAN))
    (tmp_path / "lexicon.json").write_text(json.dumps({"version": 1, "entries": TABLE8_LEXICON}))
    preds = tmp_path / "preds.jsonl"
    preds.write_text("".join(json.dumps({"item_id": r["item_id"], **r["gold"]}) + "\n" for r in records[:20]))
    result = ev.release_evaluate(tmp_path, preds, split="test")
    assert result["report"]["counts"]["matched"] == 15
    assert result["report"]["counts"]["other_split"] == 5
    test_records = [r for r in records if r["split"] == "test"]
    golds = [r["gold"] for r in test_records]
    predicted = [r["gold"] if r["item_id"] <= 20 else None for r in test_records]
    assert result["figures"]["label.acc"]["value"] == pytest.approx(
        sum(p is not None for p in predicted) / len(golds), abs=1e-12
    )
    assert ev.main([str(preds), "--release", str(tmp_path), "--split", "test"]) == 0
    out = capsys.readouterr().out
    assert "jra" in out and "missing" in out


def test_iter_lines_keeps_memory_bounded_and_lines_intact() -> None:
    data = b"a\n" + b"x" * 5000 + b"\nbc\n\nlast"
    lines = list(ev.iter_lines(io.BytesIO(data), max_line=100, chunk=7))
    assert lines == [b"a\n", b"x" * 101, b"bc\n", b"\n", b"last"]
    assert list(ev.iter_lines(io.BytesIO(b"one\ntwo\n"), chunk=2)) == [b"one\n", b"two\n"]
