"""MemeBench VIKR checklist scoring with two LLM judges (seeds/memebench-vikr.txt).

Each item's reference explanation is a checklist of 1-4 binary requirements per layer: Visual
(V), Identity (I), Knowledge (K), Reasoning (R). The paper's rules, implemented as stated:

* **Two judges, intersection**: "an item passes only when both judges agree" -- a checklist
  requirement passes only when *both* judges pass it ("Dimension scores aggregate from these
  intersection decisions").
* **Layer score** ``d in {0, 1}`` "is set to 1 only if all its items are satisfied".
* **Success** = V * I * K * R: 1 exactly when every annotated requirement passes.
* **Three-of-four** sensitivity variant (Appendix B.2): 1 when at least three layers pass.
* Calibration: Cohen's kappa on Success of each judge alone and of the intersection against
  human labels (paper: 0.78 / 0.74 single, 0.81 intersection, 0.84 between two humans), and
  Spearman's rho between two leaderboards (paper: 0.99 between the single-judge boards).

Input shapes: ``checklists[i]`` maps each layer to the requirement ids of item i (the
reference, e.g. ``{"V": ["v1", "v2"], "I": ["i1"], ...}``); ``judge[i]`` maps each layer to
``{requirement id: verdict}`` as parsed from that judge's reply.

Malformed-input policy (stated once, applied everywhere):

* Judge side -- **missing or malformed verdicts fail**. A requirement the judge gave no
  verdict for, a layer or a whole item missing from the judge's output (``None``), or a
  verdict that is not a boolean (``"yes"``, ``1``, ``None``) counts as *not passed*: a judge
  that did not say "pass" did not pass it. Verdicts for ids that are not in the reference
  checklist are ignored (they cannot make anything pass).
* Reference side -- a malformed checklist raises ``ValueError``: a missing layer, a layer
  with no requirements (VIKR has 1-4 per layer; an empty layer would pass vacuously) or a
  duplicated id (``TypeError`` if it is not a mapping). That is a data error for the QC stage, not a judgement to score.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from metrics.agreement import cohen_kappa
from metrics.bootstrap import percentile_interval, resample_indices
from metrics.resample import DEFAULT_RESAMPLES, Estimate, bootstrap_figures, mean_contributions

__all__ = [
    "LAYERS",
    "requirement_passes",
    "layer_scores",
    "VikrScores",
    "vikr_scores",
    "vikr_summary",
    "success_kappas",
    "leaderboard_spearman",
    "leaderboard_spearman_ci",
]

LAYERS: tuple[str, ...] = ("V", "I", "K", "R")

Checklist = Mapping[str, Sequence[Hashable]]
JudgeOutput = Mapping[str, Mapping[Hashable, object] | None] | None


def _passed(verdict: object) -> bool:
    # Only a real boolean True passes; anything else is "the judge did not say pass".
    return isinstance(verdict, (bool, np.bool_)) and bool(verdict)


def _check_checklist(checklist: Checklist) -> None:
    if not isinstance(checklist, Mapping):
        raise TypeError("a checklist maps each layer (V, I, K, R) to its requirement ids")
    for layer in LAYERS:
        ids = checklist.get(layer)
        if ids is None or isinstance(ids, (str, bytes)) or len(ids) == 0:
            raise ValueError(f"checklist layer {layer!r} is missing or empty (VIKR has 1-4 requirements per layer)")
        if len(set(ids)) != len(ids):
            raise ValueError(f"checklist layer {layer!r} repeats a requirement id")


def _layer_verdicts(judge: JudgeOutput, layer: str) -> Mapping[Hashable, object]:
    if not isinstance(judge, Mapping):
        return {}
    got = judge.get(layer)
    return got if isinstance(got, Mapping) else {}


def requirement_passes(checklist: Checklist, *judges: JudgeOutput) -> dict[str, list[bool]]:
    """Per layer, per requirement (checklist order): passed by *every* given judge.

    With two judges this is the paper's intersection; with one it is that judge alone (for
    the single-judge calibration figures). Missing/malformed verdicts fail (module docstring).
    """
    if not judges:
        raise ValueError("need at least one judge")
    _check_checklist(checklist)
    out = {}
    for layer in LAYERS:
        per_judge = [_layer_verdicts(j, layer) for j in judges]
        out[layer] = [all(_passed(v.get(rid)) for v in per_judge) for rid in checklist[layer]]
    return out


def layer_scores(checklist: Checklist, *judges: JudgeOutput) -> dict[str, int]:
    """``{layer: 1 if every requirement of the layer passes else 0}`` for one item."""
    return {layer: int(all(p)) for layer, p in requirement_passes(checklist, *judges).items()}


@dataclass(frozen=True)
class VikrScores:
    """Per-item decisions: ``layers[i, j]`` for layer ``LAYERS[j]``, Success, three-of-four."""

    layers: np.ndarray  # (items, 4) int8
    success: np.ndarray  # (items,) int8
    three_of_four: np.ndarray  # (items,) int8

    def means(self) -> dict[str, float]:
        """Per-layer means, Success and the three-of-four share (NaN for no items)."""
        if self.success.size == 0:
            return {**{layer: float("nan") for layer in LAYERS}, "Success": float("nan"), "3of4": float("nan")}
        out = {layer: float(self.layers[:, j].mean()) for j, layer in enumerate(LAYERS)}
        out["Success"] = float(self.success.mean())
        out["3of4"] = float(self.three_of_four.mean())
        return out


def vikr_scores(checklists: Sequence[Checklist], *judges: Sequence[JudgeOutput]) -> VikrScores:
    """Layer scores, Success and three-of-four per item, from one or more judges' verdicts.

    ``judges`` are parallel to ``checklists`` (one output per item; ``None`` = the judge
    returned nothing for that item, which fails every requirement). Two judges = the paper's
    rule; one judge = that judge's own board.
    """
    if not judges:
        raise ValueError("need at least one judge")
    for j in judges:
        if len(j) != len(checklists):
            raise ValueError(f"a judge has {len(j)} outputs for {len(checklists)} items")
    layers = np.zeros((len(checklists), len(LAYERS)), dtype=np.int8)
    for i, checklist in enumerate(checklists):
        scores = layer_scores(checklist, *(j[i] for j in judges))
        layers[i] = [scores[layer] for layer in LAYERS]
    passed = layers.sum(axis=1)
    return VikrScores(layers, (passed == len(LAYERS)).astype(np.int8), (passed >= 3).astype(np.int8))


def vikr_summary(
    scores: VikrScores, *, n: int = DEFAULT_RESAMPLES, seed: int = 0, level: float = 0.95
) -> dict[str, Estimate]:
    """Means of V, I, K, R, Success and three-of-four with percentile CIs over one shared
    item bootstrap (:func:`metrics.resample.bootstrap_figures`)."""
    if scores.success.size == 0:
        raise ValueError("no items")
    figures = {layer: mean_contributions(scores.layers[:, j].astype(np.float64)) for j, layer in enumerate(LAYERS)}
    figures["Success"] = mean_contributions(scores.success.astype(np.float64))
    figures["3of4"] = mean_contributions(scores.three_of_four.astype(np.float64))
    return bootstrap_figures(figures, n=n, seed=seed, level=level)


def success_kappas(human: Sequence[int], boards: Mapping[str, Sequence[int]]) -> dict[str, float | None]:
    """Cohen's kappa on Success (0/1) of each judging scheme against human labels.

    ``boards`` e.g. ``{"gemini": s1, "gpt": s2, "intersection": s12}`` with the
    ``success`` arrays of :func:`vikr_scores` on the human-labelled calibration items, in
    the same order as ``human``. :func:`metrics.agreement.cohen_kappa` (None when undefined).
    """
    h = [int(x) for x in human]
    out = {}
    for name, s in boards.items():
        if len(s) != len(h):
            raise ValueError(f"{name}: {len(s)} decisions for {len(h)} human labels")
        out[name] = cohen_kappa(h, [int(x) for x in s])
    return out


def leaderboard_spearman(board_a: Mapping[Hashable, float], board_b: Mapping[Hashable, float]) -> float | None:
    """Spearman's rho between two leaderboards (model -> score) over their common models.

    ``scipy.stats.spearmanr``: ties get the average of their ranks (mid-ranks) and rho is
    Pearson's correlation of the ranks, so tied scores are neither broken arbitrarily nor
    dropped. Models on only one board are left out. None when fewer than two common models
    or when either board is constant over them (rho undefined).
    """
    common = [m for m in board_a if m in board_b]
    if len(common) < 2:
        return None
    a = np.array([float(board_a[m]) for m in common])
    b = np.array([float(board_b[m]) for m in common])
    if np.all(a == a[0]) or np.all(b == b[0]):
        return None
    rho = stats.spearmanr(a, b).statistic
    return float(rho)


def leaderboard_spearman_ci(
    per_item_a: np.ndarray, per_item_b: np.ndarray, *, n: int = DEFAULT_RESAMPLES, seed: int = 0, level: float = 0.95
) -> tuple[float, float] | None:
    """Percentile bootstrap CI of Spearman's rho between two leaderboards, resampling items.

    ``per_item_a[s, i]``: submission s's score on item i under board A (e.g. judge 1's Success
    0/1), ``per_item_b`` the same under board B, on the same items. Each resample draws the
    items (``metrics.bootstrap.resample_indices``), takes every submission's mean on both
    boards and their Spearman rho (:func:`leaderboard_spearman`); resamples where rho is
    undefined (a constant board) are dropped. None with fewer than two submissions or when no
    resample defines rho.
    """
    a = np.asarray(per_item_a, dtype=np.float64)
    b = np.asarray(per_item_b, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError("both boards need the same (submissions, items) shape")
    if a.shape[0] < 2 or a.shape[1] == 0:
        return None
    rhos = []
    for idx in resample_indices(a.shape[1], n=n, seed=seed):
        ma, mb = a[:, idx].mean(axis=1), b[:, idx].mean(axis=1)
        rho = leaderboard_spearman(dict(enumerate(ma)), dict(enumerate(mb)))
        if rho is not None and np.isfinite(rho):
            rhos.append(rho)
    return percentile_interval(rhos, level) if rhos else None
