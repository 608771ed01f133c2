"""Scoring a model's predictions against a release's gold (SPEC section 6): one file, no Django.

This module is both the scorer behind Concord's leaderboard and the ``evaluate.py`` that every
release ships (the release build copies this file verbatim), so the numbers a researcher
recomputes offline are the leaderboard's, bit for bit. It therefore imports only the standard
library, numpy, sacrebleu and rouge-score; the text, entity and box rules are restated here from
``metrics.text``, ``metrics.entity`` and ``metrics.boxes`` and ``metrics/tests/test_evaluation.py``
checks them against those modules (and ``metrics.records.jra`` / ``field_scores``,
``metrics.bootstrap.paired_ci``, scikit-learn, sacrebleu) so the copies cannot drift.

Offline use, inside an unpacked release::

    python evaluate.py predictions.jsonl --split test

What is scored is described by the release's ``evaluation.json`` (the *plan*): one entry per
schema field, built by the field-type registry (``FieldType.evaluation``) with the preset's
composites (Meme3W JRA) and binary labels. A plan field::

    {"name": "label", "kind": "choice", "choices": [...], "positive": "harmful",
     "subset": null | {"field": "label", "in": ["harmful"]}, "references": false}

Rules (Meme3W "Metrics", Appendix B.1 "Malformed structured outputs are treated as invalid
predictions"):

* a gold item without a prediction line is *missing*: every field is wrong (paper rule);
* a field of the wrong shape is *malformed*: that field is wrong on that item (even where gold
  is absent), counted per field, and the rest of the line is scored;
* a key left out of a line means "absent" (a non-harmful prediction may omit target fields);
* each field is scored over the items where its gold ``visible_if`` condition holds (Meme3W:
  target fields and JRA over gold-harmful items; labels over all items).

A plan of ``"kind": "checklist_judges"`` (MemeBench VIKR, seeds/memebench-vikr.txt) scores a
model's free-text ``explanation`` through the decisions of LLM judges stored next to it in each
line: ``{"item_id": ..., "explanation": "...", "judgements": [{"V1": "pass", "I1": "fail", ...},
{...}]}`` (one object per judge, in slot order, mapping every checklist item id of the item's
gold to ``"pass"`` / ``"fail"``; ``null`` or a left-out id = no decision = fail). The rules: an
item passes only when every judge of the plan (``"judges": 2``) passes it; a layer scores 1 only
when all its items pass; Success = all layers; the three-of-four variant = at least three
layers; each judge alone gives the same figures under ``judge1.*``, ``judge2.*``. A missing line
or a malformed ``judgements`` value fails every layer of the item. Concord's leaderboard writes
these lines itself (a submission's judged predictions, downloadable), so its figures are
recomputed offline by this file from them.

Every figure comes with ``n`` (items it averages over) and a percentile bootstrap 95% CI
(``RESAMPLES`` resamples of items, seed ``SEED``); two submissions compare by a paired bootstrap
(``PAIRED_RESAMPLES``, the paper's Table 15: 10,000).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from rouge_score import rouge_scorer
from sacrebleu.metrics import BLEU

PLAN_FORMAT = "concord-evaluation-plan"
PLAN_VERSION = 1
RESAMPLES = 1000
PAIRED_RESAMPLES = 10000
SEED = 0
LEVEL = 0.95
#: Reading limits: a line longer than this is a problem of its own; a file larger than
#: MAX_BYTES, or one whose first MAX_LEADING_PROBLEMS lines hold no prediction, is refused.
MAX_LINE_BYTES = 1 << 20
MAX_BYTES = 64 << 20
MAX_LEADING_PROBLEMS = 1000
#: Problems listed by line in a report (all are counted).
MAX_LISTED_PROBLEMS = 200
MAX_TEXT = 20_000
MAX_LIST = 200
JRA_THRESHOLDS = (1.0, 0.7, 0.7, 0.5)
#: Marker of a field that a reply parser removed as malformed (any dict is malformed for
#: every kind, so the field is scored as wrong and counted).
MALFORMED_KEY = "__malformed__"

#: Appended to every release's README (exports.build.release).
README_SECTION = """
## Evaluation

Score a model's predictions (JSONL, one object per item: `item_id` or `source_id`, and the
schema fields) against this release's gold with the leaderboard's own code (needs numpy,
sacrebleu and rouge-score):

    python evaluate.py predictions.jsonl --split test

`evaluation.json` says what is scored; a missing prediction and a malformed field count as
wrong; every figure is printed with its bootstrap 95% CI and n.

When `evaluation.json` says `"kind": "checklist_judges"` (MemeBench VIKR) a line holds the
model's `explanation` and the LLM judges' decisions per checklist item, `"judgements":
[{"V1": "pass", ...}, {...}]`: the leaderboard's judged predictions of a submission (download
them from its page) reproduce its V, I, K, R, Success and three-of-four figures here.
"""

# ---------------------------------------------------------------------------------- text
# Restated from metrics.text (normalize / tokens / token_f1 / exact_match).

ARTICLES = frozenset({"a", "an", "the"})
_ASCII_PUNCT_DELETE = str.maketrans(
    "", "", "".join(c for c in map(chr, range(128)) if unicodedata.category(c).startswith("P"))
)


@lru_cache(maxsize=1)
def _punctuation_delete_table() -> dict[int, None]:
    return {cp: None for cp in range(sys.maxunicode + 1) if unicodedata.category(chr(cp)).startswith("P")}


_CJK_RE = re.compile(
    "(["
    "\u1100-\u11ff\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3038-\u303b\u3040-\u30ff\u3130-\u318f"
    "\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7ff\uf900-\ufaff\U00020000-\U0003ffff"
    "])"
)


def _words(s: str) -> list[str]:
    if s.isascii():
        s = s.lower().translate(_ASCII_PUNCT_DELETE)
    else:
        s = unicodedata.normalize("NFKC", s).casefold()
        s = unicodedata.normalize("NFKC", s).translate(_punctuation_delete_table())
    return [w for w in s.split() if w not in ARTICLES]


def _split_cjk(words: list[str]) -> list[str]:
    out: list[str] = []
    for w in words:
        if w.isascii() or _CJK_RE.search(w) is None:
            out.append(w)
        else:
            out.extend(p for p in _CJK_RE.split(w) if p)
    return out


def normalize(s: str | None) -> str:
    return "" if s is None else " ".join(_words(s))


def tokens(s: str | None) -> list[str]:
    return [] if s is None else _split_cjk(_words(s))


def _f1_tokens(ta: list[str], tb: list[str]) -> float:
    if not ta or not tb:
        return 1.0 if not ta and not tb else 0.0
    counts: dict[str, int] = {}
    for t in tb:
        counts[t] = counts.get(t, 0) + 1
    same = 0
    for t in ta:
        c = counts.get(t, 0)
        if c:
            counts[t] = c - 1
            same += 1
    return 0.0 if same == 0 else 2.0 * same / (len(ta) + len(tb))


def token_f1(a: str | None, b: str | None) -> float:
    return _f1_tokens(tokens(a), tokens(b))


# ---------------------------------------------------------------------------------- entities
# Restated from metrics.entity (canonicalize / f1_rel with a variant -> canonical lexicon).


def normalize_lexicon(lexicon: Mapping[str, str] | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for variant, canonical in (lexicon or {}).items():
        key, value = normalize(variant), normalize(canonical)
        if key and value:
            out[key] = value
    return out


def _canonical_tokens(s: str | None, lex: Mapping[str, str]) -> list[str]:
    n = normalize(s)
    if not n:
        return []
    return _split_cjk(lex.get(n, n).split(" "))


# ---------------------------------------------------------------------------------- boxes
# Restated from metrics.boxes (enclosing_iou: IoU of the minimum enclosing rectangles).


def _enclosing(boxes: list[list[float]]) -> tuple[float, float, float, float] | None:
    if not boxes:
        return None
    if len(boxes) == 1:
        x1, y1, x2, y2 = boxes[0]
        return (x1, y1, x2, y2)
    return (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )


def _iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    area_a = (a[2] - a[0]) * (a[3] - a[1])
    area_b = (b[2] - b[0]) * (b[3] - b[1])
    iw = min(a[2], b[2]) - max(a[0], b[0])
    ih = min(a[3], b[3]) - max(a[1], b[1])
    inter = iw * ih if iw > 0 and ih > 0 else 0.0
    union = area_a + area_b - inter
    if union <= 0:
        return 1.0 if a == b else 0.0
    return inter / union


def enclosing_iou(a: list[list[float]], b: list[list[float]]) -> float:
    ea, eb = _enclosing(a), _enclosing(b)
    if ea is None or eb is None:
        return 1.0 if ea is None and eb is None else 0.0
    return _iou(ea, eb)


# ---------------------------------------------------------------------------------- values


class _Invalid:
    """A malformed or missing prediction: wrong whatever gold is."""

    __slots__ = ("reason",)

    def __init__(self, reason: str):
        self.reason = reason

    def __repr__(self) -> str:
        return f"Invalid({self.reason!r})"


MISSING = _Invalid("missing")


def _fold(s: str) -> str:
    return " ".join(s.strip().casefold().replace("_", " ").replace("-", " ").split())


@lru_cache(maxsize=1 << 16)
def _blank(value: str) -> bool:
    return not tokens(value)


def _text_or_none(value: Any) -> Any:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > MAX_TEXT or "\x00" in value:
        return _Invalid("must be text")
    return None if _blank(value) else value


def _clean_choice(spec: dict, value: Any) -> Any:
    if value is None:
        return None
    if not isinstance(value, str):
        return _Invalid(f"must be one of: {', '.join(spec['choices'])}")
    if value in spec["choices"]:
        return value
    folded = {_fold(c): c for c in spec["choices"]}
    key = _fold(value)
    if key in folded:
        return folded[key]
    if not key:
        return None
    return _Invalid(f"{value[:60]!r} is not one of: {', '.join(spec['choices'])}")


def _clean_multichoice(spec: dict, value: Any) -> Any:
    if value is None:
        return frozenset()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or len(value) > MAX_LIST or not all(isinstance(v, str) for v in value):
        return _Invalid("must be a list of options")
    chosen = [_clean_choice(spec, v) for v in value]
    bad = [v for v, c in zip(value, chosen) if isinstance(c, _Invalid)]
    if bad:
        return _Invalid(f"unknown option(s): {', '.join(b[:40] for b in bad[:5])}")
    return frozenset(c for c in chosen if c is not None)


_NUMBER = (int, float)


def _clean_box(box: Any) -> list | None:
    # Exact types: a bool is not a coordinate; NaN and infinities fail the range test.
    if type(box) not in (list, tuple) or len(box) != 4:
        return None
    x1, y1, x2, y2 = box
    if type(x1) not in _NUMBER or type(y1) not in _NUMBER or type(x2) not in _NUMBER or type(y2) not in _NUMBER:
        return None
    if not (0 <= x1 < x2 <= 1000 and 0 <= y1 < y2 <= 1000):
        return None
    return [x1, y1, x2, y2]


def _clean_boxes(spec: dict, value: Any) -> Any:
    if value is None or (type(value) is list and not value):
        return []
    if not isinstance(value, (list, tuple)) or len(value) > MAX_LIST:
        return _Invalid("must be a list of boxes [x1, y1, x2, y2]")
    boxes = []
    for b in value:
        c = _clean_box(b)
        if c is None:
            return _Invalid("each box must be [x1, y1, x2, y2] in [0, 1000] with x1 < x2 and y1 < y2")
        boxes.append(c)
    return boxes


def _clean_textlist(spec: dict, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or len(value) > MAX_LIST or not all(isinstance(v, str) for v in value):
        return _Invalid("must be a list of texts")
    return _text_or_none(" ".join(value)) if value else None


def _clean_pairlist(spec: dict, value: Any) -> Any:
    if value is None:
        return None
    parts = spec.get("parts") or ["vehicle", "meaning"]
    if not isinstance(value, list) or len(value) > MAX_LIST:
        return _Invalid("must be a list of pairs")
    texts = []
    for entry in value:
        if not isinstance(entry, dict) or not all(isinstance(entry.get(p), (str, type(None))) for p in parts):
            return _Invalid("each pair must be an object {" + ", ".join(parts) + "} of texts")
        texts.extend(entry.get(p) or "" for p in parts)
    return _text_or_none(" ".join(texts)) if texts else None


_CLEAN: dict[str, Callable[[dict, Any], Any]] = {
    "choice": _clean_choice,
    "multichoice": _clean_multichoice,
    "entity": lambda spec, v: _text_or_none(v),
    "span": lambda spec, v: _text_or_none(v),
    "text": lambda spec, v: _text_or_none(v),
    "textlist": _clean_textlist,
    "pairlist": _clean_pairlist,
    "boxes": _clean_boxes,
    "explanation": lambda spec, v: _text_or_none(v),
    "judgements": lambda spec, v: _clean_judgements(spec, v),
}


def clean_value(spec: dict, value: Any) -> Any:
    """A predicted value as it is scored: the clean value, or an ``_Invalid`` (malformed)."""
    if isinstance(value, dict):
        return _Invalid(str(value.get(MALFORMED_KEY) or "malformed")[:200])
    return _CLEAN[spec["kind"]](spec, value)


def _gold_values(spec: dict, value: Any) -> list[Any]:
    """Gold as a list of references (one, or all kept references of a references field).

    Gold comes from the release and is trusted; a value the rules refuse counts as absent."""
    clean = _CLEAN[spec["kind"]]
    if not (spec.get("references") and isinstance(value, list)):
        c = clean(spec, value)
        return [_absent_of(spec) if isinstance(c, _Invalid) else c]
    out = []
    for v in value:
        c = clean(spec, v)
        out.append(_absent_of(spec) if isinstance(c, _Invalid) else c)
    return out


def _memo_cleaner(spec: dict, clean: Callable[[dict, Any], Any]) -> Callable[[Any], Any]:
    """``clean(spec, value)`` memoized on text and None values (labels, categories and
    entities repeat across items; lists are cleaned each time)."""
    cache: dict[Any, Any] = {}

    def run(value: Any) -> Any:
        if value is None or type(value) is str:
            try:
                return cache[value]
            except KeyError:
                out = cache[value] = clean(spec, value)
                return out
        return clean(spec, value)

    return run


def _absent_of(spec: dict) -> Any:
    return {"multichoice": frozenset(), "boxes": []}.get(spec["kind"])


def _is_absent(value: Any) -> bool:
    return value is None or value == [] or value == frozenset()


# ---------------------------------------------------------------------------------- judges
# MemeBench VIKR: checklists from gold, verdicts of the judges (metrics.checklist states the
# same rules over booleans; metrics/tests/test_evaluation.py checks the two agree).

CHECKLIST_JUDGES = "checklist_judges"
LAYER_TITLES = {"V": "Visual", "I": "Identity", "K": "Knowledge", "R": "Reasoning"}
PASS, FAIL = "pass", "fail"
_PASS_WORDS = frozenset({"pass", "passed", "yes", "true", "1", "satisfied", "met"})
_FAIL_WORDS = frozenset({"fail", "failed", "no", "false", "0", "not satisfied", "unsatisfied", "not met"})


def checklist_items(value: Any) -> list[dict]:
    """A gold checklist as ``[{id, text, link?}]``: a checklist value, or a list of references
    (a staged workflow's kept values: the last one is the final checklist). Entries without a
    text id are dropped, a repeated id is kept once."""
    if isinstance(value, list) and value and all(isinstance(v, list) for v in value):
        value = value[-1]
    if not isinstance(value, list):
        return []
    out, seen = [], set()
    for entry in value:
        if not isinstance(entry, dict):
            continue
        rid = entry.get("id")
        if not isinstance(rid, str) or not rid.strip() or rid in seen:
            continue
        seen.add(rid)
        out.append(entry)
    return out


def verdict(value: Any) -> bool | None:
    """A judge's decision on one checklist item: True (pass), False (fail), None (no decision,
    which scores as fail)."""
    if value is True or value is False:
        return bool(value)
    if isinstance(value, str):
        v = " ".join(value.strip().strip(".!").casefold().split())
        if v in _PASS_WORDS:
            return True
        if v in _FAIL_WORDS:
            return False
    return None


def _clean_judgements(spec: dict, value: Any) -> Any:
    if value is None:
        return None
    judges = int(spec.get("judges") or 2)
    if not isinstance(value, list) or len(value) > judges:
        return _Invalid(f"judgements must be a list of at most {judges} objects {{item id: pass|fail}}")
    out = []
    for decisions in value:
        if decisions is None:
            out.append({})
            continue
        if not isinstance(decisions, dict) or len(decisions) > MAX_LIST:
            return _Invalid("each judge's judgements must be an object {item id: pass|fail}")
        out.append({str(k): verdict(v) for k, v in decisions.items()})
    return tuple(out)


def judged_layers(plan: dict, golds: list[dict], predictions: list[dict | None]) -> tuple[np.ndarray, np.ndarray]:
    """``(passes, valid)``: ``passes[j, i, l]`` is True when judge j passed every checklist item
    of layer l of gold item i (the intersection over judges is ``passes.all(axis=0)``);
    ``valid[i]`` when every layer of item i's gold has at least one item (VIKR has 1-4)."""
    layers = plan["layers"]
    k = int(plan.get("judges") or 2)
    spec = {"kind": "judgements", "judges": k}
    ids = [[[e["id"] for e in checklist_items((g.get("gold") or {}).get(field))] for _, field in layers] for g in golds]
    valid = np.array([all(layer_ids for layer_ids in row) for row in ids], dtype=bool)
    passes = np.zeros((k, len(golds), len(layers)), dtype=bool)
    for i, pred in enumerate(predictions):
        if pred is None or not valid[i]:
            continue
        got = clean_value(spec, pred.get("judgements"))
        if got is None or isinstance(got, _Invalid):
            continue
        for j, decisions in enumerate(got):
            for li, layer_ids in enumerate(ids[i]):
                passes[j, i, li] = all(decisions.get(rid) is True for rid in layer_ids)
    return passes, valid


def _score_checklist_judges(plan: dict, golds: list[dict], predictions: list[dict | None]) -> Scored:
    passes, valid = judged_layers(plan, golds, predictions)
    letters = [letter for letter, _ in plan["layers"]]
    need = max(1, len(letters) - 1)

    def board(layer_pass: np.ndarray, prefix: str, who: str) -> list[Figure]:
        figs = [
            Figure(
                f"{prefix}{letter}",
                f"{LAYER_TITLES.get(letter, letter)} ({letter}){who}",
                valid,
                values=layer_pass[:, li].astype(np.float64),
            )
            for li, letter in enumerate(letters)
        ]
        count = layer_pass.sum(axis=1)
        figs.append(
            Figure(f"{prefix}success", f"Success{who}", valid, values=(count == len(letters)).astype(np.float64))
        )
        figs.append(
            Figure(
                f"{prefix}success_3of4",
                f"{need} of {len(letters)} layers{who}",
                valid,
                values=(count >= need).astype(np.float64),
            )
        )
        return figs

    figures = board(passes.all(axis=0), "", "")
    for j in range(passes.shape[0]):
        figures.extend(board(passes[j], f"judge{j + 1}.", f", judge {j + 1} alone"))
    missing = np.array([p is None for p in predictions], dtype=bool)
    spec = {"kind": "judgements", "judges": passes.shape[0]}
    malformed = {
        "explanation": np.array(
            [
                p is not None and isinstance(clean_value({"kind": "explanation"}, p.get("explanation")), _Invalid)
                for p in predictions
            ],
            dtype=bool,
        ),
        "judgements": np.array(
            [p is not None and isinstance(clean_value(spec, p.get("judgements")), _Invalid) for p in predictions],
            dtype=bool,
        ),
    }
    return Scored(figures, [g.get("item_id") for g in golds], golds, missing, malformed)


# ---------------------------------------------------------------------------------- figures


@dataclass
class Figure:
    """One number of the leaderboard, as per-item data the bootstrap can resample.

    ``kind == "mean"``: ``values[i]`` for the items in ``mask`` (the figure is their mean).
    Otherwise ``contrib`` is an (N, k) matrix of per-item contributions (zero outside
    ``mask``) and ``combine`` maps summed rows (r, k) to r figure values (F1, corpus BLEU).
    """

    name: str
    label: str
    mask: np.ndarray
    values: np.ndarray | None = None
    contrib: np.ndarray | None = None
    combine: Callable[[np.ndarray], np.ndarray] | None = None

    @property
    def n(self) -> int:
        return int(self.mask.sum())

    def value(self) -> float | None:
        if self.n == 0:
            return None
        if self.values is not None:
            return float(self.values[self.mask].mean())
        v = float(self.combine(self.contrib.sum(axis=0)[None, :])[0])
        return None if math.isnan(v) else v

    def item_scores(self) -> np.ndarray:
        """A per-item view for inspection (worst items): the mean values, or NaN."""
        if self.values is not None:
            return np.where(self.mask, self.values, np.nan)
        rows = self.combine(self.contrib)
        return np.where(self.mask, rows, np.nan)


def _f1_from(tp, fp, fn):
    den = 2 * tp + fp + fn
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, 2 * tp / np.where(den > 0, den, 1), np.nan)


def _combine_f1(sums: np.ndarray) -> np.ndarray:
    return _f1_from(sums[:, 0], sums[:, 1], sums[:, 2])


def _combine_recall(sums: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(sums[:, 1] > 0, sums[:, 0] / np.where(sums[:, 1] > 0, sums[:, 1], 1), np.nan)


def _combine_macro(sums: np.ndarray) -> np.ndarray:
    """Mean F1 over the labels present (in gold or prediction) in the resample."""
    tp, fp, fn = sums[:, 0::3], sums[:, 1::3], sums[:, 2::3]
    f1 = _f1_from(tp, fp, fn)
    with np.errstate(invalid="ignore"):
        present = ~np.isnan(f1)
        count = present.sum(axis=1)
        total = np.where(present, f1, 0.0).sum(axis=1)
        return np.where(count > 0, total / np.where(count > 0, count, 1), np.nan)


def _combine_micro(sums: np.ndarray) -> np.ndarray:
    return _f1_from(sums[:, 0::3].sum(axis=1), sums[:, 1::3].sum(axis=1), sums[:, 2::3].sum(axis=1))


def _label_counts(pred: list[frozenset], gold: list[frozenset], labels: Sequence[str], mask: np.ndarray) -> np.ndarray:
    out = np.zeros((len(gold), 3 * len(labels)))
    for i in np.nonzero(mask)[0]:
        p, g = pred[i], gold[i]
        for j, label in enumerate(labels):
            inp, ing = label in p, label in g
            out[i, 3 * j] = inp and ing
            out[i, 3 * j + 1] = inp and not ing
            out[i, 3 * j + 2] = ing and not inp
    return out


@lru_cache(maxsize=2)
def _bleu_metric() -> BLEU:
    # Effective order changes sentence scores only, not the statistics summed into corpus BLEU.
    return BLEU(tokenize="13a", effective_order=True)


@lru_cache(maxsize=2)
def _rouge_scorer() -> rouge_scorer.RougeScorer:
    return rouge_scorer.RougeScorer(["rougeL"], use_stemmer=False)


def _combine_bleu(sums: np.ndarray) -> np.ndarray:
    out = np.empty(sums.shape[0])
    for r, row in enumerate(sums):
        sys_len, ref_len = row[0], row[1]
        if sys_len == 0 and ref_len == 0:
            out[r] = np.nan
            continue
        correct = [round(x) for x in row[2:6]]
        total = [round(x) for x in row[6:10]]
        out[r] = BLEU.compute_bleu(correct, total, round(sys_len), round(ref_len), smooth_method="exp").score / 100.0
    return out


def _subset_mask(gold_by_field: dict[str, list[list[Any]]], subset: dict | None, n: int) -> np.ndarray:
    if not subset or subset["field"] not in gold_by_field:
        return np.ones(n, dtype=bool)
    allowed = set(subset.get("in") or [])
    return np.array([g[0] in allowed for g in gold_by_field[subset["field"]]], dtype=bool)


def _field_figures(
    spec: dict, preds: list[Any], golds: list[list[Any]], mask: np.ndarray, lex
) -> tuple[list[Figure], np.ndarray]:
    """The figures of one field and its primary per-item score (for composites)."""
    name, kind = spec["name"], spec["kind"]
    n = len(golds)
    invalid = np.array([isinstance(p, _Invalid) for p in preds], dtype=bool)
    g1 = [g[0] for g in golds]
    figs: list[Figure] = []
    if kind == "choice":
        correct = np.array([(not bad) and p == g for p, g, bad in zip(preds, g1, invalid)], dtype=np.float64)
        figs.append(Figure(f"{name}.acc", "accuracy", mask, values=correct))
        labels = list(spec["choices"])
        code = {c: j for j, c in enumerate(labels)}
        # -1: no class (absent, or an invalid prediction: never a positive of any class)
        pc = np.array([-1 if bad else code.get(p, -1) for p, bad in zip(preds, invalid)], dtype=np.int64)
        gc = np.array([code.get(g, -1) for g in g1], dtype=np.int64)
        counts = np.zeros((n, 3 * len(labels)))
        for j in range(len(labels)):
            ip, ig = (pc == j) & mask, (gc == j) & mask
            counts[:, 3 * j] = ip & ig
            counts[:, 3 * j + 1] = ip & ~ig
            counts[:, 3 * j + 2] = ig & ~ip
        positive = spec.get("positive")
        if positive in labels:
            j = labels.index(positive)
            c = counts[:, 3 * j : 3 * j + 3]
            figs.append(Figure(f"{name}.f1", f"F1 ({positive})", mask, contrib=c, combine=_combine_f1))
            rec = np.stack([c[:, 0], c[:, 0] + c[:, 2]], axis=1)
            figs.append(Figure(f"{name}.recall", f"recall ({positive})", mask, contrib=rec, combine=_combine_recall))
        figs.append(Figure(f"{name}.macro_f1", "macro-F1", mask, contrib=counts, combine=_combine_macro))
        return figs, correct
    if kind == "multichoice":
        labels = list(spec["choices"])
        pred_sets = [frozenset() if bad else p for p, bad in zip(preds, invalid)]
        exact = np.array([(not bad) and p == g for p, g, bad in zip(preds, g1, invalid)], dtype=np.float64)
        counts = _label_counts(pred_sets, g1, labels, mask)
        figs.append(Figure(f"{name}.exact", "exact set", mask, values=exact))
        figs.append(Figure(f"{name}.macro_f1", "macro-F1", mask, contrib=counts, combine=_combine_macro))
        figs.append(Figure(f"{name}.micro_f1", "micro-F1", mask, contrib=counts, combine=_combine_micro))
        return figs, exact
    if kind == "entity":
        cache: dict[str, list[str]] = {}

        def ct(s):
            if s is None:
                return []
            t = cache.get(s)
            if t is None:
                t = cache[s] = _canonical_tokens(s, lex)
            return t

        f1 = np.array(
            [
                0.0
                if bad
                else _f1_tokens(ct(p), ct(gs[0]))
                if len(gs) == 1
                else max(_f1_tokens(ct(p), ct(g)) for g in gs)
                for p, gs, bad in zip(preds, golds, invalid)
            ]
        )
        figs.append(Figure(f"{name}.f1_rel", "F1_rel", mask, values=f1))
        return figs, f1
    if kind == "boxes":
        iou = np.array(
            [0.0 if bad else max(enclosing_iou(p, g) for g in gs) for p, gs, bad in zip(preds, golds, invalid)]
        )
        figs.append(Figure(f"{name}.iou50", "IoU ≥ 0.5", mask, values=(iou >= 0.5).astype(np.float64)))
        figs.append(Figure(f"{name}.iou75", "IoU ≥ 0.75", mask, values=(iou >= 0.75).astype(np.float64)))
        figs.append(Figure(f"{name}.miou", "mean IoU", mask, values=iou))
        return figs, iou
    # Texts: token-F1 (max over references); spans add exact match; free texts add caption metrics.
    cache2: dict[str, tuple[list[str], str]] = {}

    def tn(s):
        if s is None:
            return [], ""
        t = cache2.get(s)
        if t is None:
            w = _words(s)
            t = cache2[s] = (_split_cjk(w), " ".join(w))
        return t

    f1 = np.array(
        [
            0.0
            if bad
            else _f1_tokens(tn(p)[0], tn(gs[0])[0])
            if len(gs) == 1
            else max(_f1_tokens(tn(p)[0], tn(g)[0]) for g in gs)
            for p, gs, bad in zip(preds, golds, invalid)
        ]
    )
    if kind == "span":
        em = np.array(
            [
                0.0
                if bad
                else float(tn(p)[1] == tn(gs[0])[1])
                if len(gs) == 1
                else max(float(tn(p)[1] == tn(g)[1]) for g in gs)
                for p, gs, bad in zip(preds, golds, invalid)
            ]
        )
        figs.append(Figure(f"{name}.em", "EM", mask, values=em))
        figs.append(Figure(f"{name}.f1", "token-F1", mask, values=f1))
        return figs, f1
    if kind == "text":
        # Caption metrics against every reference (MemeCap section 5.1): items without a
        # reference text are left out of them.
        refs = [[g for g in gs if isinstance(g, str)] for gs in golds]
        cmask = mask & np.array([bool(r) for r in refs], dtype=bool)
        bleu, rouge = _bleu_metric(), _rouge_scorer()
        stats = np.zeros((n, 10))
        rl = np.zeros(n)
        for i in np.nonzero(cmask)[0]:
            hyp = "" if invalid[i] or preds[i] is None else preds[i]
            s = bleu.sentence_score(hyp, refs[i])
            stats[i] = [s.sys_len, s.ref_len, *s.counts, *s.totals]
            rl[i] = rouge.score_multi(refs[i], hyp)["rougeL"].fmeasure
        figs.append(Figure(f"{name}.bleu4", "BLEU-4", cmask, contrib=stats, combine=_combine_bleu))
        figs.append(Figure(f"{name}.rouge_l", "ROUGE-L", cmask, values=rl))
        figs.append(Figure(f"{name}.token_f1", "token-F1", mask, values=f1))
        return figs, f1
    figs.append(Figure(f"{name}.token_f1", "token-F1", mask, values=f1))
    return figs, f1


# ---------------------------------------------------------------------------------- scoring


@dataclass
class Scored:
    figures: list[Figure]
    item_ids: list[Any]
    golds: list[dict]
    #: item index -> True when no prediction line named the item
    missing: np.ndarray
    malformed: dict[str, np.ndarray] = field(default_factory=dict)

    def by_name(self) -> dict[str, Figure]:
        return {f.name: f for f in self.figures}


def score(plan: dict, golds: list[dict], predictions: list[dict | None], *, lexicon: Mapping | None = None) -> Scored:
    """Per-item scores of every figure of the plan.

    ``golds``: gold records of the split (dicts with ``item_id`` and ``gold``: {field: value}).
    ``predictions``: aligned with ``golds``; None = no prediction (missing: every field wrong);
    a dict {field: raw value} otherwise (a key left out means absent).
    """
    if len(predictions) != len(golds):
        raise ValueError(f"{len(predictions)} predictions for {len(golds)} gold records")
    if plan.get("kind") == CHECKLIST_JUDGES:
        return _score_checklist_judges(plan, golds, predictions)
    lex = normalize_lexicon(lexicon)
    gold_values = [g.get("gold") or {} for g in golds]
    gold_by_field = {}
    for spec in plan["fields"]:
        if spec.get("references"):
            gold_by_field[spec["name"]] = [_gold_values(spec, g.get(spec["name"])) for g in gold_values]
            continue
        absent, clean = _absent_of(spec), _memo_cleaner(spec, _CLEAN[spec["kind"]])
        column = []
        for g in gold_values:
            c = clean(g.get(spec["name"]))
            column.append([absent if isinstance(c, _Invalid) else c])
        gold_by_field[spec["name"]] = column
    missing = np.array([p is None for p in predictions], dtype=bool)
    figures: list[Figure] = []
    primary: dict[str, np.ndarray] = {}
    presence: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    malformed: dict[str, np.ndarray] = {}
    choice_values: dict[str, np.ndarray] = {}
    for spec in plan["fields"]:
        name = spec["name"]
        clean = _memo_cleaner(spec, clean_value)
        preds = [MISSING if p is None else clean(p.get(name)) for p in predictions]
        gv = gold_by_field[name]
        mask = _subset_mask(gold_by_field, spec.get("subset"), len(golds))
        malformed[name] = np.array([isinstance(p, _Invalid) and p is not MISSING for p in preds], dtype=bool)
        if spec["kind"] == "choice":
            choice_values[name] = np.array(
                ["" if isinstance(p, _Invalid) or p is None else p for p in preds], dtype=object
            )
        figs, prim = _field_figures(spec, preds, gv, mask, lex)
        figures.extend(figs)
        primary[name] = prim
        presence[name] = (
            np.array([not isinstance(p, _Invalid) and not _is_absent(p) for p in preds], dtype=bool),
            np.array([not _is_absent(g[0]) for g in gv], dtype=bool),
        )
    for comp in plan.get("composites", []):
        if comp["kind"] != "jra":
            continue
        label = comp["label"]
        gold_label = np.array([g[0] == comp["positive"] for g in gold_by_field[label]], dtype=bool)
        ok = np.asarray(choice_values[label] == comp["positive"], dtype=bool)
        # Eq. 13: each field at or over its threshold AND the same presence as gold ("for a field
        # that is absent in the gold record, the prediction must also indicate absence").
        for fname, tau in comp["fields"]:
            pp, gp = presence[fname]
            ok &= (pp == gp) & (primary[fname] >= float(tau))
        figures.append(Figure(comp["name"], comp.get("title", "JRA"), gold_label, values=ok.astype(np.float64)))
    order = plan.get("order")
    if order:
        rank = {n: i for i, n in enumerate(order)}
        figures.sort(key=lambda f: rank.get(f.name, len(rank)))
    return Scored(figures, [g.get("item_id") for g in golds], golds, missing, malformed)


# ---------------------------------------------------------------------------------- bootstrap


def _bootstrap_means(values: np.ndarray, n: int, seed: int) -> np.ndarray:
    """metrics.bootstrap.bootstrap_means, restated (same draws, same numbers)."""
    rng = np.random.default_rng(seed)
    size = values.size
    means = np.empty(n)
    distinct, counts = np.unique(values, return_counts=True)
    if distinct.size * 8 <= size:
        pvals = counts / size
        offsets = distinct - distinct[0]
        chunk = max(1, (1 << 22) // distinct.size)
        for start in range(0, n, chunk):
            rows = min(chunk, n - start)
            draws = rng.multinomial(size, pvals, size=rows)
            means[start : start + rows] = distinct[0] + (draws @ offsets) / size
        return means
    chunk = max(1, (1 << 22) // size)
    for start in range(0, n, chunk):
        rows = min(chunk, n - start)
        idx = rng.integers(0, size, size=(rows, size))
        means[start : start + rows] = values[idx].mean(axis=1)
    return means


def _bootstrap_sums(contrib: np.ndarray, n: int, seed: int) -> np.ndarray:
    """Column sums of ``n`` resamples (with replacement) of the rows of ``contrib`` -> (n, k).

    Rows that repeat (0/1 counts, per-label tp/fp/fn) are drawn as one multinomial over the
    distinct rows, which is exact and O(n * distinct rows)."""
    rng = np.random.default_rng(seed)
    size, k = contrib.shape
    distinct, inverse = np.unique(contrib, axis=0, return_inverse=True)
    out = np.empty((n, k))
    if distinct.shape[0] * 8 <= size:
        pvals = np.bincount(inverse.ravel(), minlength=distinct.shape[0]) / size
        chunk = max(1, (1 << 22) // distinct.shape[0])
        for start in range(0, n, chunk):
            rows = min(chunk, n - start)
            out[start : start + rows] = rng.multinomial(size, pvals, size=rows) @ distinct
        return out
    chunk = max(1, (1 << 22) // (size * k))
    for start in range(0, n, chunk):
        rows = min(chunk, n - start)
        idx = rng.integers(0, size, size=(rows, size))
        out[start : start + rows] = contrib[idx].sum(axis=1)
    return out


def _interval(stats: np.ndarray, level: float) -> list[float] | None:
    stats = stats[np.isfinite(stats)]
    if stats.size == 0:
        return None
    alpha = (1.0 - level) / 2.0
    low, high = np.percentile(stats, [100.0 * alpha, 100.0 * (1.0 - alpha)])
    return [float(low), float(high)]


def figure_ci(fig: Figure, *, n: int = RESAMPLES, seed: int = SEED, level: float = LEVEL) -> list[float] | None:
    if fig.n == 0:
        return None
    if fig.values is not None:
        return _interval(_bootstrap_means(fig.values[fig.mask], n, seed), level)
    return _interval(fig.combine(_bootstrap_sums(fig.contrib[fig.mask], n, seed)), level)


def paired_difference(
    a: Figure, b: Figure, *, n: int = PAIRED_RESAMPLES, seed: int = SEED, level: float = LEVEL
) -> dict | None:
    """Difference a - b of one figure of two submissions on the same items, with the paired
    percentile bootstrap CI (the same resampled items for both; Meme3W Table 15). For a mean
    figure this is ``metrics.bootstrap.paired_ci`` of the per-item scores."""
    if a.n == 0 or not np.array_equal(a.mask, b.mask):
        return None
    va, vb = a.value(), b.value()
    if va is None or vb is None:
        return None
    if a.values is not None:
        ci = _interval(_bootstrap_means(a.values[a.mask] - b.values[b.mask], n, seed), level)
    else:
        k = a.contrib.shape[1]
        sums = _bootstrap_sums(np.hstack([a.contrib[a.mask], b.contrib[b.mask]]), n, seed)
        ci = _interval(a.combine(sums[:, :k]) - b.combine(sums[:, k:]), level)
    return {"difference": va - vb, "ci": ci, "n": a.n}


def _rounded(x: float | None) -> float | None:
    return None if x is None else float(x)


def summarize(scored: Scored, *, resamples: int = RESAMPLES, seed: int = SEED, breakdowns: Sequence[str] = ()) -> dict:
    """The figures as plain data: {name: {label, value, n, ci}}, plus per-group values."""
    figures = {}
    for f in scored.figures:
        figures[f.name] = {
            "label": f.label,
            "value": _rounded(f.value()),
            "n": f.n,
            "ci": figure_ci(f, n=resamples, seed=seed),
        }
    groups: dict[str, dict] = {}
    for dim in breakdowns:
        keys = [_group_key(g, dim) for g in scored.golds]
        by: dict[str, dict] = {}
        for key in sorted({k for k in keys if k is not None}):
            sel = np.array([k == key for k in keys], dtype=bool)
            by[key] = {}
            for f in scored.figures:
                sub = Figure(f.name, f.label, f.mask & sel, f.values, f.contrib, f.combine)
                by[key][f.name] = {
                    "value": _rounded(sub.value()),
                    "n": sub.n,
                    "ci": figure_ci(sub, n=resamples, seed=seed),
                }
        groups[dim] = by
    return {
        "figures": figures,
        "breakdowns": groups,
        "missing": int(scored.missing.sum()),
        "malformed_fields": {k: int(v.sum()) for k, v in scored.malformed.items()},
        "n_items": len(scored.golds),
        "resamples": resamples,
        "seed": seed,
    }


def _group_key(gold: dict, dim: str) -> str | None:
    if dim.startswith("gold."):
        value = (gold.get("gold") or {}).get(dim[5:])
    else:
        value = gold.get(dim)
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
        value = value[0]  # a staged workflow's one kept reference (VIKR language, domain)
    if value is None or value == "" or isinstance(value, (list, dict)):
        return None
    return str(value)


# ---------------------------------------------------------------------------------- reading


@dataclass
class Reading:
    """What a predictions file held, line by line (bounded: problems are counted, the first
    MAX_LISTED_PROBLEMS listed)."""

    predictions: list[dict | None]
    counts: dict[str, int]
    problems: list[dict]
    malformed_fields: dict[str, int]
    refused: str = ""
    header: dict | None = None

    def report(self) -> dict:
        return {
            "counts": dict(self.counts),
            "malformed_fields": dict(self.malformed_fields),
            "problems": list(self.problems),
            "problems_listed": len(self.problems),
            "refused": self.refused,
        }


class GoldIndex:
    """The gold records of one split, findable by item id or source id, plus the ids of the
    release's other splits (a line for one of those is reported as such, not as unknown)."""

    def __init__(self, records: Iterable[dict], split: str):
        self.split = split
        self.golds: list[dict] = []
        self.by_item: dict[str, int] = {}
        self.by_source: dict[str, int | None] = {}
        self.other_split: set[str] = set()
        for rec in records:
            item_key = str(rec.get("item_id"))
            if rec.get("split") != split:
                self.other_split.add(item_key)
                if rec.get("source_id"):
                    self.other_split.add("s:" + str(rec["source_id"]))
                continue
            i = len(self.golds)
            self.golds.append(rec)
            self.by_item[item_key] = i
            sid = rec.get("source_id")
            if sid:
                # A source id shared by two items cannot name one of them.
                self.by_source[str(sid)] = None if str(sid) in self.by_source else i

    @classmethod
    def from_jsonl(cls, path: Path, split: str) -> GoldIndex:
        def rows():
            with open(path, "rb") as fh:
                for line in fh:
                    if line.strip():
                        yield json.loads(line)

        return cls(rows(), split)

    def find(self, obj: dict) -> tuple[int | None, str]:
        """(index, "") or (None, why)."""
        item_id = obj.get("item_id")
        if item_id is not None and not isinstance(item_id, bool) and isinstance(item_id, (int, str)):
            key = str(item_id).strip()
            if key in self.by_item:
                return self.by_item[key], ""
            if key in self.other_split:
                return None, "other_split"
            return None, "unknown"
        source_id = obj.get("source_id")
        if isinstance(source_id, str) and source_id:
            if source_id in self.by_source:
                i = self.by_source[source_id]
                return (i, "") if i is not None else (None, "ambiguous")
            if "s:" + source_id in self.other_split:
                return None, "other_split"
            return None, "unknown"
        return None, "no_id"


_WHY = {
    "unknown": "names no item of this release",
    "other_split": "names an item of another split",
    "ambiguous": "its source_id is shared by several items: use item_id",
    "no_id": "has no item_id or source_id",
}


def read_predictions(
    lines: Iterable[bytes],
    *,
    plan: dict,
    index: GoldIndex,
    max_bytes: int = MAX_BYTES,
) -> Reading:
    """Read a JSONL predictions file (an iterable of raw lines, e.g. an open binary file).

    Streaming: memory holds the matched predictions and a bounded problem list, never the
    file. Optional first line ``{"concord_release": {"project": slug, "version": n}}``: a file
    for another release is refused. Each problem names its line.
    """
    fields = [f["name"] for f in plan["fields"]]
    cleaners = {f["name"]: _memo_cleaner(f, clean_value) for f in plan["fields"]}
    preds: list[dict | None] = [None] * len(index.golds)
    counts = dict.fromkeys(
        ("lines", "blank", "predictions", "matched", "duplicate", "unknown", "other_split", "unreadable", "no_id"), 0
    )
    malformed = dict.fromkeys(fields, 0)
    problems: list[dict] = []
    seen_bytes = 0
    expected = plan.get("release") or {}

    def problem(lineno: int, message: str) -> None:
        if len(problems) < MAX_LISTED_PROBLEMS:
            problems.append({"line": lineno, "problem": message})

    def done(refused: str = "", header=None) -> Reading:
        if refused:
            return Reading([None] * len(index.golds), counts, problems, malformed, refused, header)
        return Reading(preds, counts, problems, malformed, "", header)

    header = None
    for lineno, raw in enumerate(lines, start=1):
        counts["lines"] += 1
        seen_bytes += len(raw)
        if seen_bytes > max_bytes:
            return done(f"the file is larger than {max_bytes // (1 << 20)} MB")
        if counts["matched"] == 0 and counts["unreadable"] + counts["unknown"] >= MAX_LEADING_PROBLEMS:
            return done(f"the first {MAX_LEADING_PROBLEMS} lines hold no prediction for this release and split")
        if len(raw.rstrip(b"\r\n")) > MAX_LINE_BYTES:
            counts["unreadable"] += 1
            problem(lineno, f"line longer than {MAX_LINE_BYTES // 1024} KB")
            continue
        if not raw.strip():
            counts["blank"] += 1
            continue
        try:
            obj = json.loads(raw)
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            counts["unreadable"] += 1
            problem(lineno, f"not JSON ({str(exc)[:80]})")
            continue
        if not isinstance(obj, dict):
            counts["unreadable"] += 1
            problem(lineno, "not a JSON object")
            continue
        if "concord_release" in obj and counts["predictions"] == 0 and header is None:
            header = obj["concord_release"] if isinstance(obj["concord_release"], dict) else {}
            mismatch = [k for k in ("project", "version") if k in expected and k in header and header[k] != expected[k]]
            if mismatch:
                return done(
                    f"the file is for {header.get('project')} v{header.get('version')}, "
                    f"not {expected.get('project')} v{expected.get('version')}",
                    header,
                )
            continue
        counts["predictions"] += 1
        i, why = index.find(obj)
        if i is None:
            counts["no_id" if why in ("no_id", "ambiguous") else why] += 1
            problem(lineno, _WHY[why])
            continue
        if preds[i] is not None:
            counts["duplicate"] += 1
            problem(lineno, f"item {index.golds[i].get('item_id')} again: the first line for it is kept")
            continue
        body = obj.get("prediction") if isinstance(obj.get("prediction"), dict) else obj
        pred = {k: body[k] for k in fields if k in body}
        for k, v in pred.items():
            c = cleaners[k](v)
            if isinstance(c, _Invalid):
                malformed[k] += 1
                problem(lineno, f"{k}: {c.reason} (scored as wrong)")
        preds[i] = pred
        counts["matched"] += 1
    if index.golds and counts["matched"] == 0:
        return done("no line names an item of this split: is the file for another release or split?", header)
    counts["missing"] = sum(1 for p in preds if p is None)
    counts["extra"] = counts["unknown"] + counts["other_split"]
    return done(header=header)


def iter_lines(fh, *, max_line: int = MAX_LINE_BYTES, chunk: int = 1 << 16):
    """Lines of a binary file in bounded memory: a line longer than ``max_line`` is yielded cut
    to ``max_line + 1`` bytes (the reader reports it as too long) and the rest of it skipped."""
    pending = b""
    skipping = False
    while True:
        block = fh.read(chunk)
        if not block:
            break
        start = 0
        while True:
            nl = block.find(b"\n", start)
            if nl < 0:
                if not skipping:
                    pending += block[start:]
                    if len(pending) > max_line:
                        yield pending[: max_line + 1]
                        pending, skipping = b"", True
                break
            if skipping:
                skipping = False
            else:
                line = pending + block[start : nl + 1]
                yield line if len(line) <= max_line + 1 else line[: max_line + 1]
            pending = b""
            start = nl + 1
    if pending and not skipping:
        yield pending


# ---------------------------------------------------------------------------------- release files


def release_evaluate(release_dir: Path, predictions: Path, *, split: str = "test") -> dict:
    """Score a predictions file against an unpacked release: the offline leaderboard row."""
    plan = json.loads((release_dir / "evaluation.json").read_text(encoding="utf-8"))
    lexicon_file = release_dir / "lexicon.json"
    lexicon = json.loads(lexicon_file.read_text(encoding="utf-8")).get("entries") if lexicon_file.exists() else None
    index = GoldIndex.from_jsonl(release_dir / "records.jsonl", split)
    size = predictions.stat().st_size
    if size > MAX_BYTES:
        return {"refused": f"the file is larger than {MAX_BYTES // (1 << 20)} MB", "report": {}}
    with open(predictions, "rb") as fh:
        reading = read_predictions(iter_lines(fh), plan=plan, index=index)
    if reading.refused:
        return {"refused": reading.refused, "report": reading.report()}
    scored = score(plan, index.golds, reading.predictions, lexicon=lexicon)
    return {"split": split, "report": reading.report(), **summarize(scored, breakdowns=plan.get("breakdowns", []))}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Score a predictions JSONL file against this release's gold.")
    parser.add_argument("predictions", type=Path)
    parser.add_argument("--split", default="test")
    parser.add_argument("--release", type=Path, default=Path(__file__).resolve().parent, help="release folder")
    parser.add_argument("--json", action="store_true", help="print the full result as JSON")
    args = parser.parse_args(argv)
    result = release_evaluate(args.release, args.predictions, split=args.split)
    if args.json or "refused" in result:
        print(json.dumps(result, indent=2, ensure_ascii=False, sort_keys=True))
        return 1 if "refused" in result else 0
    counts = result["report"]["counts"]
    print(
        f"split {result['split']}: {result['n_items']} items, {counts['matched']} predicted, "
        f"{counts['missing']} missing, {counts['extra']} extra, {counts['duplicate']} duplicate, "
        f"malformed fields {sum(result['report']['malformed_fields'].values())}"
    )
    for name, fig in result["figures"].items():
        ci = fig["ci"]
        value = "—" if fig["value"] is None else f"{100 * fig['value']:.2f}"
        interval = f"[{100 * ci[0]:.2f}, {100 * ci[1]:.2f}]" if ci else ""
        print(f"{name:32s} {value:>8s} {interval:>18s}  n={fig['n']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
