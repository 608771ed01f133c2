from __future__ import annotations

import numpy as np
import pytest
import sacrebleu
from rouge_score import rouge_scorer

from metrics import captions
from metrics.bootstrap import resample_indices
from metrics.resample import bootstrap_figures
from metrics.text import token_f1

HYPS = [
    "the poster is happy that the weekend is finally here",
    "student hates studying for exams at night",
    "people pretend to work when the boss walks in",
]
REFS = [
    ["the meme poster is happy that it is the weekend", "poster loves weekends"],
    ["the student does not want to study for exams"],
    [
        "employees pretend to be busy when the boss comes",
        "workers look busy for the boss",
        "nobody works until the boss shows up",
    ],
]


def test_corpus_bleu_equals_sacrebleu_with_variable_references() -> None:
    streams = [[r[j] if j < len(r) else None for r in REFS] for j in range(3)]
    ref = sacrebleu.corpus_bleu(HYPS, streams).score / 100
    assert captions.corpus_bleu(HYPS, REFS) == pytest.approx(ref, abs=1e-12)
    # one reference per item == sacrebleu with one stream
    one = [r[:1] for r in REFS]
    assert captions.corpus_bleu(HYPS, one) == pytest.approx(
        sacrebleu.corpus_bleu(HYPS, [[r[0] for r in REFS]]).score / 100, abs=1e-12
    )
    # more references can only help clipped matches and the closest length
    assert captions.corpus_bleu(HYPS, REFS) >= captions.corpus_bleu(HYPS, one)
    # hand case: identical caption -> 1.0; no shared word -> 0.0
    assert captions.corpus_bleu(["a cat sits on the mat today"], [["a cat sits on the mat today"]]) == pytest.approx(
        1.0
    )
    assert captions.corpus_bleu(["zzz yyy"], [["a cat sits on the mat"]]) == 0.0
    assert captions.corpus_bleu(["猫 在 垫子 上"], [["猫在垫子上"]], tokenize="zh") == pytest.approx(
        sacrebleu.corpus_bleu(["猫 在 垫子 上"], [["猫在垫子上"]], tokenize="zh").score / 100, abs=1e-12
    )


def test_sentence_bleu_and_bootstrap_of_corpus_bleu() -> None:
    for h, r in zip(HYPS, REFS):
        ref = sacrebleu.sentence_bleu(h, r, smooth_method="exp", use_effective_order=True).score / 100
        assert captions.sentence_bleu(h, r) == pytest.approx(ref, abs=1e-12)
    assert np.allclose(
        captions.sentence_bleu_scores(HYPS, REFS), [captions.sentence_bleu(h, r) for h, r in zip(HYPS, REFS)]
    )
    c = captions.bleu_contributions(HYPS, REFS)
    assert c.point() == pytest.approx(captions.corpus_bleu(HYPS, REFS), abs=1e-12)
    est = bootstrap_figures({"bleu": c}, n=30, seed=1)["bleu"]
    for idx, got in zip(resample_indices(3, 30, 1), est.resampled):
        expected = captions.corpus_bleu([HYPS[i] for i in idx], [REFS[i] for i in idx])
        assert got == pytest.approx(expected, abs=1e-12)


def test_rouge_l_is_score_multi_max_over_references() -> None:
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    per_item = captions.rouge_l_scores(HYPS, REFS)
    for h, r, got in zip(HYPS, REFS, per_item):
        assert got == pytest.approx(scorer.score_multi(r, h)["rougeL"].fmeasure, abs=1e-15)
        assert got == pytest.approx(max(scorer.score(x, h)["rougeL"].fmeasure for x in r), abs=1e-15)
    assert captions.rouge_l(HYPS, REFS) == pytest.approx(per_item.mean())
    # hand case: LCS "a b d" of "a b c d" vs "a b d e": P = R = 3/4
    assert captions.rouge_l(["a b c d"], [["a b d e", "x"]]) == pytest.approx(0.75)
    # rouge-score's tokenizer drops non-ASCII text; the concord tokenizer scores CJK per character
    assert captions.rouge_l(["猫在垫子上"], [["猫在垫子上"]]) == 0.0
    assert captions.rouge_l(["猫在垫子上"], [["猫在垫子上"]], tokenizer="concord") == 1.0
    with pytest.raises(ValueError):
        captions.rouge_l(HYPS, REFS, tokenizer="nltk")


def test_token_f1_max_over_references_and_input_rules() -> None:
    got = captions.token_f1_scores(HYPS, REFS)
    assert got.tolist() == [max(token_f1(h, x) for x in r) for h, r in zip(HYPS, REFS)]
    assert captions.token_f1_scores(["black women"], [["women", "women black"]]).tolist() == [1.0]
    with pytest.raises(ValueError):
        captions.token_f1_scores(["x"], [[]])
    with pytest.raises(ValueError):
        captions.corpus_bleu(["x", "y"], [["x"]])
    with pytest.raises(TypeError):
        captions.corpus_bleu(["x"], ["x"])
    with pytest.raises(ValueError):
        captions.caption_scores(["x"], [["x"]], "meteor")  # type: ignore[arg-type]


def test_inter_annotator_caption_agreement() -> None:
    item = {
        "ann1": ["the boss is coming", "look busy"],
        "ann2": ["everyone looks busy when the boss comes"],
        "ann3": [],
    }
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    expected = np.mean(
        [
            scorer.score_multi(["everyone looks busy when the boss comes"], "the boss is coming")["rougeL"].fmeasure,
            scorer.score_multi(["everyone looks busy when the boss comes"], "look busy")["rougeL"].fmeasure,
            scorer.score_multi(["the boss is coming", "look busy"], "everyone looks busy when the boss comes")[
                "rougeL"
            ].fmeasure,
        ]
    )
    assert captions.item_caption_agreement(item) == pytest.approx(expected, abs=1e-15)
    assert captions.item_caption_agreement({"a": ["x y"], "b": ["x y"]}, "token_f1") == 1.0
    assert captions.item_caption_agreement({"a": ["x y"], "b": []}) is None  # one annotator with captions
    with pytest.raises(TypeError):
        captions.item_caption_agreement({"a": "x y", "b": ["x"]})
    items = [
        item,
        {"a": ["cats rule"], "b": ["cats rule the house"]},
        {"a": ["only one"]},
        {"a": ["dogs are loyal"], "b": ["loyal dogs"], "c": ["dogs"]},
    ]
    scores = captions.caption_agreement_scores(items, "rouge_l")
    assert np.isnan(scores[2]) and not np.isnan(scores[[0, 1, 3]]).any()
    est = captions.caption_agreement(items, "rouge_l", n=200)
    assert est.n_items == 3 and est.value == pytest.approx(np.nanmean(scores))
    assert est.ci[0] <= est.value <= est.ci[1]
    # BLEU form: corpus BLEU over (caption, other annotators' captions) segments
    est_bleu = captions.caption_agreement(items, "bleu", n=50)
    segs = [s for it in items for s in captions._segments(it)]
    ref = sacrebleu.corpus_bleu(
        [h for h, _ in segs], [[r[j] if j < len(r) else None for _, r in segs] for j in range(3)]
    )
    assert est_bleu.value == pytest.approx(ref.score / 100, abs=1e-12)
