"""The straightforward bootstrap: recompute a metrics.agreement function on data[idx].

Reference for metrics.resample (tests) and the "old" side of bench/agreement_scale.py. Each
function evaluates one figure on one resample ``idx`` (from
:func:`metrics.bootstrap.resample_indices`), restricted to the subset, with the plain-Python
definitions -- no weights, no contributions. Undefined -> NaN.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence

import numpy as np

from metrics.agreement import cohen_kappa, krippendorff_alpha, macro_pairwise_kappa, mean_pairwise_kappa
from metrics.resample import LabelRatings, Ratings

#: Stand-in for the ``None`` category inside krippendorff_alpha, where None means "missing".
NONE_VALUE = "(none)"
_MISSING = object()


def _nan(v: float | None) -> float:
    return float("nan") if v is None else float(v)


def _kept(idx: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    return idx if mask is None else idx[mask[idx]]


def mean(x: np.ndarray, mask: np.ndarray | None, idx: np.ndarray) -> float:
    kept = _kept(idx, mask)
    return float(np.mean(x[kept])) if kept.size else float("nan")


def share(x: np.ndarray, threshold: float, mask: np.ndarray | None, idx: np.ndarray) -> float:
    kept = _kept(idx, mask)
    return float(np.mean(x[kept] >= threshold)) if kept.size else float("nan")


def kappa(a: Sequence[Hashable], b: Sequence[Hashable], mask: np.ndarray | None, idx: np.ndarray) -> float:
    kept = _kept(idx, mask)
    return _nan(cohen_kappa([a[i] for i in kept], [b[i] for i in kept]))


def pairwise_kappa(items: Sequence[Mapping[Hashable, Hashable]], mask: np.ndarray | None, idx: np.ndarray) -> float:
    return _nan(mean_pairwise_kappa([items[i] for i in _kept(idx, mask)]))


def alpha_rows(ratings: Ratings) -> list[list[object]]:
    """Rows = raters, None = missing, the None category replaced by a stand-in value."""
    rows = ratings.by_rater(missing=_MISSING)
    return [[None if v is _MISSING else (NONE_VALUE if v is None else v) for v in r] for r in rows]


def alpha(rows: list[list[object]], mask: np.ndarray | None, idx: np.ndarray) -> float:
    kept = _kept(idx, mask)
    if len(rows) < 2:  # fewer than two people in the data: nothing is pairable
        return float("nan")
    return _nan(krippendorff_alpha([[r[i] for i in kept] for r in rows], "nominal"))


def macro_label_kappa(
    rows: list[list[object]], labels: Sequence[Hashable], mask: np.ndarray | None, idx: np.ndarray
) -> float:
    """``rows`` = :meth:`LabelRatings.by_rater` (the macro_pairwise_kappa annotations shape)."""
    kept = _kept(idx, mask)
    if len(rows) < 2:
        return float("nan")
    return _nan(macro_pairwise_kappa([[r[i] for i in kept] for r in rows], list(labels)))


def label_alpha(
    rows: list[list[object]], labels: Sequence[Hashable], mask: np.ndarray | None, idx: np.ndarray
) -> float:
    """Mean over labels of binary nominal krippendorff_alpha (quality.compute's mean_alpha)."""
    kept = _kept(idx, mask)
    if len(rows) < 2:
        return float("nan")
    sub = [[r[i] for i in kept] for r in rows]
    alphas = []
    for label in labels:
        binary = [[None if v is None else int(label in v) for v in r] for r in sub]
        a = krippendorff_alpha(binary, "nominal")
        if a is not None:
            alphas.append(a)
    return float(np.mean(alphas)) if alphas else float("nan")


def label_rows(ratings: LabelRatings) -> list[list[object]]:
    return ratings.by_rater()
