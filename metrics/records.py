"""Record-level evaluation of meme3w predictions: JRA and the Table 1 field scores.

Source: Meme3W "Metrics" (Eq. 13 and the three metric groups), Table 1 columns, Appendix B.1
("Malformed structured outputs are treated as invalid predictions"). SPEC section 3.

A record is a dict with the five schema fields ``label``, ``target_category``,
``target_entity``, ``text_mention``, ``visual_region`` (other keys, e.g. ``think`` or ids, are
ignored).

Absence and malformed values
----------------------------
Predictions come from models and are never trusted; every malformed value is treated as
*absent*, field by field, and nothing raises:

* a prediction that is not a dict -> every field absent and the label invalid;
* a missing key -> that field absent;
* ``label``: normalized with :func:`metrics.text.normalize`; ``"harmful"`` is harmful,
  ``"nonharmful"``/``"non harmful"`` (``"Non-harmful"`` etc.) is non-harmful, anything else
  (other strings, None, numbers) is *invalid*: it is never equal to the gold label (wrong for
  accuracy) and is not a harmful prediction (it can only be a false negative for F1);
* ``target_category``, ``target_entity``, ``text_mention``: a non-string, or a string that is
  absent under the text rule (None, blank, ``"the"``, ``"!!!"``) -> absent (None);
* ``visual_region``: ``None`` -> ``[]``; anything that is not a list of boxes of four finite
  numbers with ``0 <= x1 < x2 <= 1000`` and ``0 <= y1 < y2 <= 1000`` -> the whole field is
  absent (``[]``). One bad box voids the field rather than being dropped, because keeping the
  remaining boxes would change the enclosing rectangle in a way the model did not state.

Note the consequence (the paper's verifier, B.3, would instead fail the whole response): a
malformed optional field on a record whose gold field is absent counts as a correct absence.

Gold records are produced by our pipeline and *are* trusted: a gold value that is malformed by
the rules above raises ``ValueError`` instead of being scored silently. Gold ``label`` must be
harmful or non-harmful.

Which records each number uses (Meme3W "Metrics"): label accuracy and F1 over all records;
JRA and every target field over gold-harmful records only. Target fields are scored whatever
the predicted label (a non-harmful prediction carries absent fields and is scored as such).
All values are fractions in [0, 1] (the paper prints percentages); None when the set a value
is averaged over is empty.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from numbers import Real
from typing import Any

import numpy as np

from metrics.boxes import enclosing_iou_batch
from metrics.entity import Lexicon, _as_lexicon, f1_rel_batch
from metrics.text import exact_match_batch, is_absent, normalize, token_f1_batch

__all__ = ["HARMFUL", "NON_HARMFUL", "FIELDS", "jra", "jra_scores", "field_scores"]

HARMFUL = "harmful"
NON_HARMFUL = "non-harmful"
FIELDS = ("label", "target_category", "target_entity", "text_mention", "visual_region")

_LABELS = {"harmful": HARMFUL, "nonharmful": NON_HARMFUL, "non harmful": NON_HARMFUL}
_TEXT_FIELDS = ("target_category", "target_entity", "text_mention")


def _clean_label(value: object) -> str | None:
    return _LABELS.get(normalize(value)) if isinstance(value, str) else None


def _clean_text(value: object) -> str | None:
    if not isinstance(value, str) or is_absent(value):
        return None
    return value


def _clean_box(box: object) -> list[float] | None:
    if not isinstance(box, (list, tuple)) or len(box) != 4:
        return None
    if not all(isinstance(v, Real) and not isinstance(v, (bool, np.bool_)) for v in box):
        return None
    x1, y1, x2, y2 = (float(v) for v in box)
    if not all(math.isfinite(v) for v in (x1, y1, x2, y2)):
        return None
    if not (0.0 <= x1 < x2 <= 1000.0 and 0.0 <= y1 < y2 <= 1000.0):
        return None
    return [x1, y1, x2, y2]


def _clean_region(value: object) -> list[list[float]] | None:
    """Boxes, ``[]`` for an explicit absence, None if malformed."""
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        return None
    boxes = [_clean_box(b) for b in value]
    return None if any(b is None for b in boxes) else boxes  # type: ignore[return-value]


def _clean_pred(pred: object) -> dict[str, Any]:
    if not isinstance(pred, Mapping):
        return {
            "label": None,
            "target_category": None,
            "target_entity": None,
            "text_mention": None,
            "visual_region": [],
        }
    region = _clean_region(pred.get("visual_region"))
    return {
        "label": _clean_label(pred.get("label")),
        **{f: _clean_text(pred.get(f)) for f in _TEXT_FIELDS},
        "visual_region": [] if region is None else region,
    }


def _clean_gold(gold: object, index: int) -> dict[str, Any]:
    if not isinstance(gold, Mapping):
        raise ValueError(f"gold record {index} is not a dict")
    label = _clean_label(gold.get("label"))
    if label is None:
        raise ValueError(f"gold record {index}: invalid label {gold.get('label')!r}")
    out: dict[str, Any] = {"label": label}
    for f in _TEXT_FIELDS:
        value = gold.get(f)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"gold record {index}: {f} must be a string or None, got {value!r}")
        out[f] = _clean_text(value)
    region = _clean_region(gold.get("visual_region"))
    if region is None:
        raise ValueError(f"gold record {index}: malformed visual_region {gold.get('visual_region')!r}")
    out["visual_region"] = region
    return out


def _prepare(preds: Sequence[object], golds: Sequence[object]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    if len(preds) != len(golds):
        raise ValueError(f"{len(preds)} predictions for {len(golds)} gold records")
    return [_clean_pred(p) for p in preds], [_clean_gold(g, i) for i, g in enumerate(golds)]


def _field_arrays(
    preds: list[dict[str, Any]], golds: list[dict[str, Any]], lexicon: Mapping[str, str] | None
) -> dict[str, np.ndarray]:
    """Per-record field scores and presence agreement for already-cleaned records."""

    def col(records: list[dict[str, Any]], f: str) -> list[Any]:
        return [r[f] for r in records]

    out: dict[str, np.ndarray] = {}
    for f in ("target_category", "target_entity", "text_mention"):
        p, g = col(preds, f), col(golds, f)
        out[f + "_present_ok"] = np.array([(x is None) == (y is None) for x, y in zip(p, g)], dtype=bool)
    pc, gc = col(preds, "target_category"), col(golds, "target_category")
    out["category_em"] = exact_match_batch(pc, gc)
    out["entity_f1_rel"] = f1_rel_batch(col(preds, "target_entity"), col(golds, "target_entity"), lexicon)
    pm, gm = col(preds, "text_mention"), col(golds, "text_mention")
    out["mention_em"] = exact_match_batch(pm, gm)
    out["mention_f1"] = token_f1_batch(pm, gm)
    pr, gr = col(preds, "visual_region"), col(golds, "visual_region")
    out["visual_region_present_ok"] = np.array([(not x) == (not y) for x, y in zip(pr, gr)], dtype=bool)
    out["region_iou"] = enclosing_iou_batch(pr, gr)
    return out


def _jra_vector(
    preds: list[dict[str, Any]],
    golds: list[dict[str, Any]],
    lexicon: Mapping[str, str] | None,
    thresholds: Sequence[float],
) -> np.ndarray:
    if len(thresholds) != 4:
        raise ValueError("thresholds are (category, entity, mention, region)")
    tau_c, tau_e, tau_s, tau_b = (float(t) for t in thresholds)
    s = _field_arrays(preds, golds, lexicon)
    label_ok = np.array([p["label"] == HARMFUL for p in preds], dtype=bool)
    # Each field needs its score over its threshold AND the same presence as gold: "for a
    # field that is absent in the gold record, the prediction must also indicate absence"
    # (Eq. 13 text). The explicit presence test keeps that rule even with a threshold of 0.
    correct = (
        label_ok
        & s["target_category_present_ok"]
        & (s["category_em"] >= tau_c)
        & s["target_entity_present_ok"]
        & (s["entity_f1_rel"] >= tau_e)
        & s["text_mention_present_ok"]
        & (s["mention_f1"] >= tau_s)
        & s["visual_region_present_ok"]
        & (s["region_iou"] >= tau_b)
    )
    return correct.astype(np.float64)


def _harmful_subset(
    preds: list[dict[str, Any]], golds: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    keep = [i for i, g in enumerate(golds) if g["label"] == HARMFUL]
    return [preds[i] for i in keep], [golds[i] for i in keep]


def jra_scores(
    preds: Sequence[object],
    golds: Sequence[object],
    lexicon: Mapping[str, str] | None = None,
    thresholds: Sequence[float] = (1, 0.7, 0.7, 0.5),
) -> np.ndarray:
    """Per-record JRA correctness (1.0/0.0) for the gold-harmful records, in input order.

    The per-instance vector behind :func:`jra`, for :func:`metrics.bootstrap.paired_ci`
    (Table 15 resamples "test instances", i.e. these records). Same arguments as ``jra``.
    """
    p, g = _prepare(preds, golds)
    p, g = _harmful_subset(p, g)
    lex = None if lexicon is None else _as_lexicon(lexicon)
    return _jra_vector(p, g, lex, thresholds)


def jra(
    preds: Sequence[object],
    golds: Sequence[object],
    lexicon: Mapping[str, str] | None = None,
    thresholds: Sequence[float] = (1, 0.7, 0.7, 0.5),
) -> float | None:
    """Joint Record Accuracy (Meme3W Eq. 13) over the gold-harmful records.

    ``JRA = 1/|H| * sum over gold-harmful i of 1[predicted label is harmful] * prod over
    f in (c, e, s, B) of 1[S_f(pred_f, gold_f) >= tau_f]`` with ``(S_c, S_e, S_s, S_B) =
    (EM, F1_rel, F1_tok, enclosing-rectangle IoU)`` and ``thresholds = (tau_c, tau_e, tau_s,
    tau_B)``, default ``(1, 0.7, 0.7, 0.5)`` as in the paper. A field absent in gold must be
    absent in the prediction (and vice versa). ``lexicon`` canonicalizes entities before
    F1_rel. Returns a fraction, or None when no gold record is harmful. Malformed prediction
    values count as absent (module docstring).
    """
    scores = jra_scores(preds, golds, lexicon, thresholds)
    return float(scores.mean()) if scores.size else None


def _mean(x: np.ndarray) -> float | None:
    return float(x.mean()) if x.size else None


def field_scores(
    preds: Sequence[object],
    golds: Sequence[object],
    lexicon: Mapping[str, str] | None = None,
) -> dict[str, float | int | None]:
    """The Meme3W Table 1 columns for one system, as fractions.

    Keys: ``n`` (records), ``n_harmful`` (gold-harmful records); over all records:
    ``label_acc`` and ``label_f1`` (F1 of the *harmful* class; the paper says only "F1", but
    with 438 harmful of 1,063 test memes several Table 1 rows, e.g. Gemma-4 at 78.46 acc /
    74.24 F1, are unreachable for macro or weighted F1 and consistent with binary F1); over
    gold-harmful records: ``jra`` (default thresholds), ``category_em``, ``entity_f1_rel``
    (mean F1_rel), ``mention_em``, ``mention_f1`` (means), ``region_iou50`` and
    ``region_iou75`` (share with enclosing-rectangle IoU >= 0.5 / 0.75; absent/absent counts
    as a match). ``label_f1`` is None when there is no harmful record in gold or prediction;
    harmful-subset values are None when no gold record is harmful.
    """
    p_all, g_all = _prepare(preds, golds)
    lex: Lexicon | None = None if lexicon is None else _as_lexicon(lexicon)  # type: ignore[assignment]

    pred_harmful = np.array([p["label"] == HARMFUL for p in p_all], dtype=bool)
    gold_harmful = np.array([g["label"] == HARMFUL for g in g_all], dtype=bool)
    label_ok = np.array([p["label"] == g["label"] for p, g in zip(p_all, g_all)], dtype=bool)
    tp = int(np.count_nonzero(pred_harmful & gold_harmful))
    fp = int(np.count_nonzero(pred_harmful & ~gold_harmful))
    fn = int(np.count_nonzero(~pred_harmful & gold_harmful))

    p_h, g_h = _harmful_subset(p_all, g_all)
    s = _field_arrays(p_h, g_h, lex)
    return {
        "n": len(g_all),
        "n_harmful": len(g_h),
        "label_acc": _mean(label_ok.astype(np.float64)),
        "label_f1": (2 * tp / (2 * tp + fp + fn)) if (tp + fp + fn) else None,
        "jra": _mean(_jra_vector(p_h, g_h, lex, (1, 0.7, 0.7, 0.5))),
        "category_em": _mean(s["category_em"]),
        "entity_f1_rel": _mean(s["entity_f1_rel"]),
        "mention_em": _mean(s["mention_em"]),
        "mention_f1": _mean(s["mention_f1"]),
        "region_iou50": _mean((s["region_iou"] >= 0.5).astype(np.float64)),
        "region_iou75": _mean((s["region_iou"] >= 0.75).astype(np.float64)),
    }
