"""Caption metrics for MemeCap: BLEU-4, ROUGE-L, token-F1, and inter-annotator agreement.

MemeCap (seeds/memecap.txt, section 5.1 and Table 2) scores generated meme captions with
"BLEU, ROUGE and BERTScore [...] between the generated captions and human-written reference
captions"; test items carry 2-4 reference captions, train items one (section 3.2). BERTScore
needs model weights and is out of scope here.

Scale: every function returns a value in [0, 1], like the rest of this package; multiply by
100 to compare with MemeCap Table 2 (sacrebleu itself reports BLEU on 0-100).

References: ``references[i]`` is the list of reference captions of item i, any length >= 1
(variable counts). Empty strings are kept as (empty) references; an item with no reference
raises ``ValueError`` (nothing to score against).

Tokenization
------------
* BLEU: sacrebleu's ``13a`` tokenizer (mteval-v13a, sacrebleu's default, what its signature
  reports as ``tok:13a``), case-sensitive, like ``sacrebleu.corpus_bleu`` defaults. For
  Chinese or other CJK captions (MemeBench's 768 Chinese items) pass ``tokenize="zh"``:
  sacrebleu's built-in Chinese tokenizer (each CJK character a token, 13a for the rest).
  Not ``flores200``: it is a SentencePiece model that sacrebleu downloads on first use (no
  network on the workers, an extra ``sentencepiece`` dependency, and scores that depend on
  that model file), and ``zh`` is what sacrebleu itself picks for Chinese targets.
* ROUGE-L: rouge-score's default tokenizer, lowercase, no stemming (``use_stemmer=False``,
  also the default of Hugging Face ``evaluate``'s rouge). That tokenizer keeps only
  ``[a-z0-9]`` runs, so non-Latin text scores 0: pass ``tokenizer="concord"`` to use
  :func:`metrics.text.tokens` instead (NFKC, casefold, every CJK character a token).
* token-F1: :func:`metrics.text.token_f1` (SQuAD-style, its normalization and absence rule).

Multiple references
-------------------
* Corpus BLEU: sacrebleu's multi-reference BLEU (clipped n-gram counts against all references
  of the item, closest reference length), over all items at once.
* Sentence BLEU (per item, for per-item bootstraps and inspection): sacrebleu
  ``sentence_score`` with ``effective_order=True`` (sacrebleu's advice for sentence level).
  Its mean over items is *not* corpus BLEU; :func:`bleu_contributions` gives corpus BLEU a
  bootstrap CI by resampling items' sufficient statistics instead.
* ROUGE-L: ``RougeScorer.score_multi`` (rouge-score 0.1.2+: the reference with the highest
  F-measure is kept), F-measure; the corpus figure is the mean over items.
* token-F1: max over references; corpus figure is the mean over items.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from functools import lru_cache
from typing import Literal

import numpy as np
from rouge_score import rouge_scorer
from sacrebleu.metrics import BLEU

from metrics.resample import Contributions, Estimate, bootstrap_figures, mean_contributions
from metrics.text import token_f1, tokens

__all__ = [
    "corpus_bleu",
    "sentence_bleu",
    "sentence_bleu_scores",
    "bleu_contributions",
    "rouge_l",
    "rouge_l_scores",
    "token_f1_scores",
    "caption_scores",
    "item_caption_agreement",
    "caption_agreement_scores",
    "caption_agreement",
]

CaptionMetric = Literal["bleu", "rouge_l", "token_f1"]
_MAX_ORDER = 4  # BLEU-4


@lru_cache(maxsize=8)
def _bleu(tokenize: str, effective_order: bool) -> BLEU:
    return BLEU(tokenize=tokenize, effective_order=effective_order)


class _ConcordTokenizer:
    """rouge-score tokenizer protocol over :func:`metrics.text.tokens`."""

    def tokenize(self, text: str) -> list[str]:
        return tokens(text)


@lru_cache(maxsize=4)
def _rouge(tokenizer: str) -> rouge_scorer.RougeScorer:
    if tokenizer == "default":
        return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)
    if tokenizer == "concord":
        return rouge_scorer.RougeScorer(["rougeL"], tokenizer=_ConcordTokenizer())
    raise ValueError(f"unknown ROUGE tokenizer {tokenizer!r} (use 'default' or 'concord')")


def _check(hypotheses: Sequence[str], references: Sequence[Sequence[str]]) -> list[list[str]]:
    if isinstance(hypotheses, str):
        raise TypeError("hypotheses must be a sequence of strings, one per item")
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} reference lists")
    refs = []
    for i, (h, r) in enumerate(zip(hypotheses, references)):
        if not isinstance(h, str):
            raise TypeError(f"hypothesis {i} is not a string")
        if isinstance(r, str):
            raise TypeError(f"references[{i}] must be a list of captions, not one string")
        r = list(r)
        if not r or not all(isinstance(x, str) for x in r):
            raise ValueError(f"item {i} needs at least one reference caption (strings)")
        refs.append(r)
    return refs


def _streams(refs: list[list[str]]) -> list[list[str | None]]:
    """Per-item reference lists -> sacrebleu reference streams, None-padded (variable counts)."""
    width = max(len(r) for r in refs)
    return [[r[j] if j < len(r) else None for r in refs] for j in range(width)]


def corpus_bleu(hypotheses: Sequence[str], references: Sequence[Sequence[str]], *, tokenize: str = "13a") -> float:
    """Corpus BLEU-4 of one caption per item against all its references, in [0, 1].

    ``sacrebleu.corpus_bleu(hypotheses, streams).score / 100`` with sacrebleu's defaults
    (exp smoothing, 13a, case-sensitive), the references transposed into None-padded streams
    so each item keeps its own number of references. Empty corpus -> ``ValueError``.
    """
    refs = _check(hypotheses, references)
    if not refs:
        raise ValueError("no items")
    return _bleu(tokenize, False).corpus_score(list(hypotheses), _streams(refs)).score / 100.0


def sentence_bleu(hypothesis: str, references: Sequence[str], *, tokenize: str = "13a") -> float:
    """Sentence BLEU-4 of one caption against its references (effective order), in [0, 1]."""
    refs = _check([hypothesis], [references])[0]
    return _bleu(tokenize, True).sentence_score(hypothesis, refs).score / 100.0


def sentence_bleu_scores(
    hypotheses: Sequence[str], references: Sequence[Sequence[str]], *, tokenize: str = "13a"
) -> np.ndarray:
    """:func:`sentence_bleu` per item -> float64 array (usable with :func:`metrics.bootstrap.mean_ci`)."""
    refs = _check(hypotheses, references)
    bleu = _bleu(tokenize, True)
    return np.array([bleu.sentence_score(h, r).score / 100.0 for h, r in zip(hypotheses, refs)], dtype=np.float64)


def _bleu_stats(bleu: BLEU, hypothesis: str, references: list[str]) -> list[float]:
    s = bleu.sentence_score(hypothesis, references)
    return [float(s.sys_len), float(s.ref_len), *map(float, s.counts), *map(float, s.totals)]


def _bleu_from_sums(sums: np.ndarray) -> np.ndarray:
    out = np.empty(sums.shape[0])
    for r, row in enumerate(sums):
        sys_len, ref_len = row[0], row[1]
        correct = [round(x) for x in row[2 : 2 + _MAX_ORDER]]
        total = [round(x) for x in row[2 + _MAX_ORDER :]]
        if sys_len == 0 and ref_len == 0:
            out[r] = np.nan  # no item drawn
            continue
        out[r] = BLEU.compute_bleu(correct, total, round(sys_len), round(ref_len), smooth_method="exp").score / 100.0
    return out


def bleu_contributions(
    hypotheses: Sequence[str],
    references: Sequence[Sequence[str]],
    *,
    tokenize: str = "13a",
    subset: Sequence[bool] | np.ndarray | None = None,
) -> Contributions:
    """Corpus BLEU as a function of summed per-item sufficient statistics, for
    :func:`metrics.resample.bootstrap_figures`.

    Per item: hypothesis length, closest reference length, matched and total n-grams for
    n = 1..4 (sacrebleu's statistics; the closest reference length is chosen per item, so
    their sum is exactly what ``corpus_score`` sums). The statistic is sacrebleu's
    ``BLEU.compute_bleu`` (exp smoothing) on the weighted sums, so the point estimate equals
    :func:`corpus_bleu` and each resample is the corpus BLEU of the drawn items. Items outside
    ``subset`` contribute nothing; a resample with no item of the subset is undefined.
    """
    refs = _check(hypotheses, references)
    n = len(refs)
    mask = np.ones(n, dtype=bool) if subset is None else np.asarray(subset, dtype=bool)
    bleu = _bleu(tokenize, True)  # effective order only changes the score, not the statistics
    matrix = np.zeros((n, 2 + 2 * _MAX_ORDER))
    for i in np.nonzero(mask)[0]:
        matrix[i] = _bleu_stats(bleu, hypotheses[i], refs[i])
    return Contributions(matrix, _bleu_from_sums, int(mask.sum()), "corpus BLEU-4")


def rouge_l_scores(
    hypotheses: Sequence[str], references: Sequence[Sequence[str]], *, tokenizer: str = "default"
) -> np.ndarray:
    """ROUGE-L F-measure per item, max over its references (``score_multi``) -> float64 array."""
    refs = _check(hypotheses, references)
    scorer = _rouge(tokenizer)
    return np.array([scorer.score_multi(r, h)["rougeL"].fmeasure for h, r in zip(hypotheses, refs)], dtype=np.float64)


def rouge_l(hypotheses: Sequence[str], references: Sequence[Sequence[str]], *, tokenizer: str = "default") -> float:
    """Corpus ROUGE-L: mean over items of :func:`rouge_l_scores`, in [0, 1]."""
    scores = rouge_l_scores(hypotheses, references, tokenizer=tokenizer)
    if scores.size == 0:
        raise ValueError("no items")
    return float(scores.mean())


def token_f1_scores(hypotheses: Sequence[str], references: Sequence[Sequence[str]]) -> np.ndarray:
    """Max over references of :func:`metrics.text.token_f1` per item -> float64 array."""
    refs = _check(hypotheses, references)
    return np.array([max(token_f1(h, x) for x in r) for h, r in zip(hypotheses, refs)], dtype=np.float64)


def caption_scores(
    hypotheses: Sequence[str],
    references: Sequence[Sequence[str]],
    metric: CaptionMetric,
    *,
    tokenize: str = "13a",
    tokenizer: str = "default",
) -> np.ndarray:
    """Per-item scores of one metric: sentence BLEU, ROUGE-L or token-F1 (see above)."""
    if metric == "bleu":
        return sentence_bleu_scores(hypotheses, references, tokenize=tokenize)
    if metric == "rouge_l":
        return rouge_l_scores(hypotheses, references, tokenizer=tokenizer)
    if metric == "token_f1":
        return token_f1_scores(hypotheses, references)
    raise ValueError(f"unknown caption metric {metric!r}")


# ---------------------------------------------------------------------------------------
# Inter-annotator agreement on reference captions


def _segments(annotations: Mapping[Hashable, Sequence[str]]) -> list[tuple[str, list[str]]]:
    """(caption, the other annotators' captions) for every caption of every annotator."""
    by = {a: [c for c in caps if isinstance(c, str)] for a, caps in annotations.items()}
    if any(isinstance(caps, str) for caps in annotations.values()):
        raise TypeError("each annotator's captions must be a list of strings, not one string")
    by = {a: caps for a, caps in by.items() if caps}
    if len(by) < 2:
        return []
    return [(c, [x for b, caps in by.items() if b != a for x in caps]) for a, caps in by.items() for c in caps]


def item_caption_agreement(
    annotations: Mapping[Hashable, Sequence[str]],
    metric: CaptionMetric = "rouge_l",
    *,
    tokenize: str = "13a",
    tokenizer: str = "default",
) -> float | None:
    """Agreement between annotators' reference captions of one item, in [0, 1].

    ``annotations`` maps annotator -> their captions for the item (1-4 in MemeCap). Each
    caption of each annotator is scored, as a hypothesis, against all captions of the
    *other* annotators (multi-reference rules of the metric: sentence BLEU, ROUGE-L max over
    references, token-F1 max over references); the item's agreement is the unweighted mean
    over those captions, so an annotator with more captions weighs more. Annotators with no
    caption are ignored; None when fewer than two annotators have one.
    """
    segs = _segments(annotations)
    if not segs:
        return None
    hyps = [h for h, _ in segs]
    refs = [r for _, r in segs]
    return float(caption_scores(hyps, refs, metric, tokenize=tokenize, tokenizer=tokenizer).mean())


def caption_agreement_scores(
    items: Sequence[Mapping[Hashable, Sequence[str]]],
    metric: CaptionMetric = "rouge_l",
    *,
    tokenize: str = "13a",
    tokenizer: str = "default",
) -> np.ndarray:
    """:func:`item_caption_agreement` per item -> float64 array, NaN where undefined."""
    out = [item_caption_agreement(it, metric, tokenize=tokenize, tokenizer=tokenizer) for it in items]
    return np.array([np.nan if v is None else v for v in out], dtype=np.float64)


def caption_agreement_contributions(
    items: Sequence[Mapping[Hashable, Sequence[str]]],
    metric: CaptionMetric = "rouge_l",
    *,
    subset: Sequence[bool] | np.ndarray | None = None,
    tokenize: str = "13a",
    tokenizer: str = "default",
) -> Contributions:
    """The contributions of :func:`caption_agreement` (per item), to resample together with a
    report's other figures; items outside ``subset`` contribute nothing."""
    mask = np.ones(len(items), dtype=bool) if subset is None else np.asarray(subset, dtype=bool)
    if metric == "bleu":
        bleu = _bleu(tokenize, True)
        matrix = np.zeros((len(items), 2 + 2 * _MAX_ORDER))
        scored = 0
        for i in np.nonzero(mask)[0]:
            segs = _segments(items[i])
            scored += bool(segs)
            for h, r in segs:
                matrix[i] += _bleu_stats(bleu, h, r)
        return Contributions(matrix, _bleu_from_sums, scored, "caption agreement BLEU-4")
    if metric in ("rouge_l", "token_f1"):
        scores = np.full(len(items), np.nan)
        keep = np.nonzero(mask)[0].tolist()
        if keep:
            scores[keep] = caption_agreement_scores(
                [items[i] for i in keep], metric, tokenize=tokenize, tokenizer=tokenizer
            )
        return mean_contributions(np.nan_to_num(scores), ~np.isnan(scores))
    raise ValueError(f"unknown caption metric {metric!r}")


def caption_agreement(
    items: Sequence[Mapping[Hashable, Sequence[str]]],
    metric: CaptionMetric = "rouge_l",
    *,
    n: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    tokenize: str = "13a",
    tokenizer: str = "default",
) -> Estimate:
    """Caption agreement of a project with n and a bootstrap CI (SPEC: every figure has both).

    For ``"rouge_l"`` and ``"token_f1"``: the mean of :func:`item_caption_agreement` over the
    items with two or more annotators. For ``"bleu"``: corpus BLEU over every (caption,
    other annotators' captions) segment, items resampled with their segments, i.e. the
    inter-annotator analogue of :func:`corpus_bleu`. ``Estimate.n_items`` counts the items
    with two or more annotators; percentile CI over ``n`` item resamples
    (:func:`metrics.resample.bootstrap_figures`).
    """
    if not items:
        raise ValueError("no items")
    contrib = caption_agreement_contributions(items, metric, tokenize=tokenize, tokenizer=tokenizer)
    return bootstrap_figures({"agreement": contrib}, n=n, seed=seed, level=level)["agreement"]
