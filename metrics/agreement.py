"""Inter-annotator agreement: Cohen's kappa, per-label kappa, Krippendorff's alpha.

SPEC section 3; Meme3W Stage 2 ("Cohen's kappa = 0.908 for target category") and AHA
section 3.4 "Annotator Agreement" (per-subtype binary kappa, macro-averaged over subtypes and
the three annotator pairs: 0.91 / 0.75 / 0.67).

Two conventions for ``None``, chosen per input shape and kept consistent inside each:

* Single-choice sequences (:func:`cohen_kappa`): ``None`` is a category of its own, because
  for ``target_category`` "no category" (non-harmful) is an answer annotators can disagree on.
* Label-set sequences (:func:`per_label_kappa`, :func:`macro_pairwise_kappa`) and rating
  matrices (:func:`krippendorff_alpha`): ``None`` means *missing* (this annotator gave no
  annotation for the item). Items missing for either rater of a pair are left out of that
  pair. An annotated item with no label is an empty set ``set()``: it is kept and counts as
  "label absent" for every label.

Undefined statistics are returned as ``None`` (never NaN, never a silent 0): kappa when the
expected agreement is 1 (both raters used one and the same category for every item, or no
items), alpha when no item has two ratings or the expected disagreement is 0.

Labels are compared by ``==``/hash (``1``, ``1.0`` and ``True`` are one category; ``"Gender"``
and ``"gender"`` are two) -- callers normalize choice values first.
"""

from __future__ import annotations

import contextlib
from collections.abc import Hashable, Iterable, Mapping, Sequence
from itertools import combinations
from typing import Literal

import numpy as np
import scipy.sparse as sp

__all__ = [
    "cohen_kappa",
    "kappa_ci",
    "kappa_from_confusion",
    "confusion_matrix",
    "per_label_kappa",
    "macro_pairwise_kappa",
    "pairwise_kappas",
    "mean_pairwise_kappa",
    "krippendorff_alpha",
]

# Above this many categories the k x k confusion matrix is not materialized (memory); kappa is
# then computed from marginals and the diagonal, which is algebraically identical.
_DENSE_MAX_CATEGORIES = 1024


def _encode(a: Sequence[Hashable], b: Sequence[Hashable]) -> tuple[np.ndarray, np.ndarray, list[Hashable]]:
    """Integer codes for two label sequences over their joint category list."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.dtype.kind in "biu" and b.dtype.kind in "biu":
        a, b = a.ravel(), b.ravel()
        if a.size and min(a.min(), b.min()) >= 0 and max(a.max(), b.max()) < _DENSE_MAX_CATEGORIES:
            # Small non-negative integer codes are already an index: no sort, no hashing.
            k = int(max(a.max(), b.max())) + 1
            return a, b, list(range(k))
        both = np.concatenate([a, b])
        cats, inverse = np.unique(both, return_inverse=True)
        return inverse[: a.size], inverse[a.size :], cats.tolist()
    if isinstance(a, np.ndarray):
        a = a.tolist()
    if isinstance(b, np.ndarray):
        b = b.tolist()
    # dict.fromkeys runs in C and keeps first-seen order; hashing Python strings is cached,
    # so this is ~10x cheaper than np.unique's sort of an object array.
    index = dict.fromkeys(a)
    index.update(dict.fromkeys(b))
    codes = {v: i for i, v in enumerate(index)}
    get = codes.__getitem__
    ca = np.fromiter(map(get, a), dtype=np.intp, count=len(a))
    cb = np.fromiter(map(get, b), dtype=np.intp, count=len(b))
    return ca, cb, list(index)


def confusion_matrix(a: Sequence[Hashable], b: Sequence[Hashable]) -> tuple[np.ndarray, list[Hashable]]:
    """Counts ``C[i, j]`` of items rated category i by ``a`` and j by ``b`` -> (C, categories).

    Rows follow ``a`` (sklearn's ``y_true``), columns ``b``. ``None`` is a category. For
    small non-negative integer arrays the categories are ``range(max + 1)``, unused codes
    included (empty rows and columns change no kappa).
    """
    if len(a) != len(b):
        raise ValueError(f"rater sequences differ in length: {len(a)} != {len(b)}")
    ca, cb, cats = _encode(a, b)
    return _confusion_counts(ca, cb, len(cats)), cats


def _confusion_counts(ca: np.ndarray, cb: np.ndarray, k: int) -> np.ndarray:
    if k * k <= 64:
        # Few categories (labels, the four target categories + None): one uint8 key and k^2
        # count_nonzero passes beat bincount, which would first widen 1M keys to intp.
        key = ca.astype(np.uint8) * np.uint8(k) + cb.astype(np.uint8)
        counts = np.array([np.count_nonzero(key == j) for j in range(k * k)], dtype=np.int64)
    else:
        counts = np.bincount(ca.astype(np.intp) * k + cb, minlength=k * k)
    return counts.reshape(k, k)


def kappa_from_confusion(confusion: np.ndarray | Sequence[Sequence[float]]) -> float | None:
    """Cohen's kappa of a square confusion matrix of counts (or weights); None if undefined.

    Same arithmetic as ``sklearn.metrics.cohen_kappa_score`` (unweighted): ``1 - sum(W*C) /
    sum(W*E)`` with ``W = 1 - I`` and ``E = outer(col sums, row sums) / total``. Useful when a
    service aggregates the counts in SQL. None when the total is 0 or the expected
    disagreement is 0 (expected agreement 1).
    """
    cm = np.asarray(confusion, dtype=np.float64)
    if cm.ndim != 2 or cm.shape[0] != cm.shape[1]:
        raise ValueError(f"confusion matrix must be square, got shape {cm.shape}")
    sum0 = cm.sum(axis=0)
    sum1 = cm.sum(axis=1)
    total = sum0.sum()
    if total == 0:
        return None
    expected = np.outer(sum0, sum1) / total
    w = np.ones_like(cm)
    np.fill_diagonal(w, 0.0)
    denominator = (w * expected).sum()
    if denominator == 0:
        return None
    return float(1 - (w * cm).sum() / denominator)


def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float | None:
    """Cohen's kappa between two raters' single-choice labels over the same items.

    ``kappa = (p_o - p_e) / (1 - p_e)``; equals ``sklearn.metrics.cohen_kappa_score(a, b)``
    (to ~1e-15). ``None`` is an ordinary category. Returns None when undefined: no items, or
    expected agreement 1 (both raters constant on the same category; sklearn returns NaN).
    A constant rater against a varying one is defined and gives 0.0. A category used by only
    one rater is fine (it only adds off-diagonal mass). Raises ``ValueError`` on unequal
    lengths; labels must be hashable.

    Batch use: pass 1M-long lists (or integer numpy arrays: small non-negative codes are used
    directly) -- encoding is one dict pass, the matrix one counting pass. Source: Meme3W
    Stage 2 (category kappa 0.908), SPEC section 3.
    """
    if len(a) != len(b):
        raise ValueError(f"rater sequences differ in length: {len(a)} != {len(b)}")
    n = len(a)
    if n == 0:
        return None
    ca, cb, cats = _encode(a, b)
    k = len(cats)
    if k <= _DENSE_MAX_CATEGORIES:
        return kappa_from_confusion(_confusion_counts(ca, cb, k))
    # Many categories: sum(W*C) = n - trace and sum(W*E) = (n^2 - sum_i col_i*row_i) / n,
    # both exact in integers, so no k x k matrix is needed.
    agree = int(np.count_nonzero(ca == cb))
    rows = np.bincount(ca, minlength=k)
    cols = np.bincount(cb, minlength=k)
    expected_disagreement = (n * n - int(np.dot(rows, cols))) / n
    if expected_disagreement == 0:
        return None
    return float(1 - (n - agree) / expected_disagreement)


def kappa_ci(
    a: Sequence[Hashable],
    b: Sequence[Hashable],
    n: int = 10000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float] | None:
    """Percentile bootstrap CI of :func:`cohen_kappa` over resampled items -> ``(low, high)``.

    Resampling N items with replacement and rebuilding the confusion matrix is exactly one
    multinomial draw of N over the k x k cells with the observed cell frequencies, so each
    resample costs O(k^2) instead of O(N): 10,000 resamples of 1M binary labels take a few
    milliseconds after the one encoding pass. Resamples where kappa is undefined (all mass on
    one category) are dropped before taking percentiles. Returns None when kappa itself (or
    every resample) is undefined. Deterministic for a seed. At most 1024 categories.
    (SPEC section 3: every agreement figure carries n and a bootstrap 95% CI.)
    """
    if int(n) != n or n < 1:
        raise ValueError("n (number of resamples) must be a positive integer")
    if not 0.0 < level < 1.0:
        raise ValueError("level must be in (0, 1)")
    if len(a) != len(b):
        raise ValueError(f"rater sequences differ in length: {len(a)} != {len(b)}")
    if len(a) == 0:
        return None
    ca, cb, cats = _encode(a, b)
    k = len(cats)
    if k > _DENSE_MAX_CATEGORIES:
        raise ValueError(f"kappa_ci supports at most {_DENSE_MAX_CATEGORIES} categories, got {k}")
    cm = _confusion_counts(ca, cb, k)
    if kappa_from_confusion(cm) is None:
        return None
    total = int(cm.sum())
    rng = np.random.default_rng(seed)
    pvals = cm.ravel() / total
    kappas = np.empty(int(n))
    chunk = max(1, (1 << 22) // (k * k))
    for start in range(0, int(n), chunk):
        rows = min(chunk, int(n) - start)
        draws = rng.multinomial(total, pvals, size=rows).reshape(rows, k, k).astype(np.float64)
        agree = np.trace(draws, axis1=1, axis2=2)
        chance = (draws.sum(axis=2) * draws.sum(axis=1)).sum(axis=1)
        expected_disagreement = (total * total - chance) / total
        with np.errstate(divide="ignore", invalid="ignore"):
            kappas[start : start + rows] = np.where(
                expected_disagreement > 0, 1 - (total - agree) / expected_disagreement, np.nan
            )
    kappas = kappas[np.isfinite(kappas)]
    if kappas.size == 0:
        return None
    tail = (1.0 - level) / 2.0
    low, high = np.percentile(kappas, [100.0 * tail, 100.0 * (1.0 - tail)])
    return float(low), float(high)


def _as_label_set(item: object) -> frozenset[Hashable] | None:
    if item is None:
        return None
    if isinstance(item, (str, bytes)) or not isinstance(item, Iterable):
        # A bare label (single-choice field passed through the multi-label API), not a set
        # of characters.
        return frozenset((item,))
    return frozenset(item)


def _membership(items: Sequence[object], labels: list[Hashable]) -> tuple[np.ndarray, np.ndarray]:
    """(present[n], member[n, L]) for one rater; labels outside ``labels`` are ignored."""
    col = {label: j for j, label in enumerate(labels)}
    n = len(items)
    present = np.ones(n, dtype=bool)
    member = np.zeros((n, len(labels)), dtype=bool)
    rows: list[int] = []
    cols: list[int] = []
    for i, item in enumerate(items):
        s = _as_label_set(item)
        if s is None:
            present[i] = False
            continue
        for label in s:
            j = col.get(label)
            if j is not None:
                rows.append(i)
                cols.append(j)
    member[rows, cols] = True
    return present, member


def _pair_label_kappas(pa: np.ndarray, ma: np.ndarray, pb: np.ndarray, mb: np.ndarray) -> list[float | None]:
    both = pa & pb
    xa, xb = ma[both], mb[both]
    n11 = np.count_nonzero(xa & xb, axis=0)
    n10 = np.count_nonzero(xa & ~xb, axis=0)
    n01 = np.count_nonzero(~xa & xb, axis=0)
    n00 = xa.shape[0] - n11 - n10 - n01
    return [kappa_from_confusion(np.array([[n00[j], n01[j]], [n10[j], n11[j]]])) for j in range(xa.shape[1])]


def _unique_labels(labels: Iterable[Hashable]) -> list[Hashable]:
    if isinstance(labels, (str, bytes)):
        raise TypeError("labels must be a collection of labels, not a string")
    return list(dict.fromkeys(labels))


def per_label_kappa(
    a: Sequence[Iterable[Hashable] | Hashable | None],
    b: Sequence[Iterable[Hashable] | Hashable | None],
    labels: Iterable[Hashable],
) -> dict[Hashable, float | None]:
    """Binary Cohen's kappa per label for a multi-label field -> ``{label: kappa or None}``.

    ``a`` and ``b`` list, per item, the label set each rater chose (set/list/tuple; a bare
    string or scalar is a one-label set). For each label in ``labels`` the item is 1 if the
    label is in the set, else 0, and kappa is computed over items rated by both (an item that
    is ``None`` for either rater is skipped; ``set()`` is kept as all-zeros). Labels outside
    ``labels`` are ignored. A label nobody used, or used on every item by both, is None.

    AHA's exclusive "Other" (it "cannot be combined with another attack type") is scored like
    any other label: exclusivity is a validation rule of the schema engine, and a stored set
    that breaks it (``{"Other", "Humor"}``) is scored as given, not repaired or rejected.
    Source: AHA section 3.4 (every subtype treated as a separate binary label).
    """
    if len(a) != len(b):
        raise ValueError(f"rater sequences differ in length: {len(a)} != {len(b)}")
    labels = _unique_labels(labels)
    pa, ma = _membership(a, labels)
    pb, mb = _membership(b, labels)
    return dict(zip(labels, _pair_label_kappas(pa, ma, pb, mb)))


def macro_pairwise_kappa(
    annotations: Sequence[Sequence[Iterable[Hashable] | Hashable | None]], labels: Iterable[Hashable]
) -> float | None:
    """Per-label binary kappa for every annotator pair, macro-averaged (AHA section 3.4).

    ``annotations[r][i]`` is annotator r's label set for item i (same conventions as
    :func:`per_label_kappa`). Kappa is computed for each label and each of the C(R, 2)
    annotator pairs; the result is the unweighted mean over all defined (pair, label) values,
    undefined ones (None) skipped. Returns None if none is defined. With all values defined
    this equals the mean over labels of the mean over pairs. A binary single-choice field
    (AHA's is_hateful, 0.91) can go through the same call with bare labels per item and
    ``labels`` = both choices: the two per-label kappas are equal, so the result is the mean
    pairwise Cohen's kappa. Conditional fields (AHA's hateful_type exists only where that
    annotator chose Hateful): pass ``set()`` where the annotator's parent choice made the
    field empty -- every subtype counts as "not assigned", the per-subtype binary reading of
    the paper -- or ``None`` to leave the item out of that pair. Raises ``ValueError`` with
    fewer than two annotators or ragged item lists.
    """
    if len(annotations) < 2:
        raise ValueError("need at least two annotators")
    n = len(annotations[0])
    if any(len(r) != n for r in annotations):
        raise ValueError("every annotator must have one entry per item (None = missing)")
    labels = _unique_labels(labels)
    members = [_membership(r, labels) for r in annotations]
    values = [
        k
        for (pa, ma), (pb, mb) in combinations(members, 2)
        for k in _pair_label_kappas(pa, ma, pb, mb)
        if k is not None
    ]
    return float(np.mean(values)) if values else None


def pairwise_kappas(
    items: Sequence[Mapping[Hashable, Hashable]],
) -> dict[tuple[Hashable, Hashable], float | None]:
    """Cohen's kappa of every annotator pair over the items both annotated.

    ``items[i]`` maps annotator id -> single-choice value for item i (an annotator absent
    from the mapping did not annotate it; a value ``None`` is a category, as in
    :func:`cohen_kappa`). Pairs are *people*, not submission slots (AHA section 3.4: "each of
    the three annotator pairs"): only pairs that co-annotated at least one item appear, keyed
    ``(a, b)`` with ``a`` before ``b`` in sorted id order (first-seen order when ids are not
    orderable). Values are None where kappa is undefined. Plain Python, O(items x
    annotators^2): the reference definition; :mod:`metrics.resample` bootstraps it at scale.
    """
    ids = list(dict.fromkeys(r for it in items for r in it))
    with contextlib.suppress(TypeError):
        ids.sort()
    rank = {r: j for j, r in enumerate(ids)}
    pairs: dict[tuple[Hashable, Hashable], tuple[list, list]] = {}
    for it in items:
        raters = sorted(it, key=rank.__getitem__)
        for r, s in combinations(raters, 2):
            a, b = pairs.setdefault((r, s), ([], []))
            a.append(it[r])
            b.append(it[s])
    return {
        key: cohen_kappa(a, b) for key, (a, b) in sorted(pairs.items(), key=lambda kv: (rank[kv[0][0]], rank[kv[0][1]]))
    }


def mean_pairwise_kappa(items: Sequence[Mapping[Hashable, Hashable]]) -> float | None:
    """Unweighted mean over annotator pairs of :func:`pairwise_kappas`, undefined pairs
    skipped; None when no pair is defined (e.g. every item has one annotator)."""
    values = [k for k in pairwise_kappas(items).values() if k is not None]
    return float(np.mean(values)) if values else None


# ---------------------------------------------------------------------------------------
# Krippendorff's alpha

# Why our own implementation and not a wrapper of the `krippendorff` package (which the tests
# use as the reference, equal to 1e-12): bench/agreement_scale.py measured both on the same
# nominal data, 20 annotators (people as rows).
#   * 5,000 items: package 2.5 ms vs ours 1.6 ms (5 values); 1.7 vs 1.8 ms (2 values).
#   * 1,000,000 items, 5 values: package 1.48 s and 656 MB peak vs ours 0.55 s and 321 MB. The
#     package's coincidence step materializes (items x V x V) arrays, so its memory grows with
#     V^2 per item; ours sums coincidences in one sparse product (O(ratings + V^2)).
#   * The package takes numeric or string arrays only: object arrays (mixed labels, None as
#     a category) raise, and NaN in a string array becomes the string "nan", a real label.
# The previous version of this function (a bincount per ordered rater pair, O(R^2 x items))
# was 8-15x slower than the package at 20 annotators x 2,000 items (9-12 ms vs 0.8-1.2 ms).
Level = Literal["nominal", "ordinal", "interval", "ratio"]
_MAX_ALPHA_VALUES = 10_000


def _is_missing(v: object) -> bool:
    return v is None or (isinstance(v, float) and v != v)


def _distance_matrix(level: str, values: list, n_v: np.ndarray) -> np.ndarray:
    v = len(values)
    if level == "nominal":
        return 1.0 - np.eye(v)
    if level == "ordinal":
        # Krippendorff's ordinal metric: (sum of n_g for g from i to j - (n_i + n_j)/2)^2 over
        # the ordered domain, with n_g the pairable counts (as in the krippendorff package).
        cum = np.concatenate([[0.0], np.cumsum(n_v)])
        i = np.arange(v)[:, None]
        j = np.arange(v)[None, :]
        lo, hi = np.minimum(i, j), np.maximum(i, j)
        return (cum[hi + 1] - cum[lo] - (n_v[lo] + n_v[hi]) / 2.0) ** 2
    x = np.asarray(values, dtype=np.float64)
    diff = x[:, None] - x[None, :]
    if level == "interval":
        return diff**2
    total = x[:, None] + x[None, :]
    return np.divide(diff, total, out=np.zeros_like(diff), where=total != 0) ** 2


def _alpha_domain(rows: list[list], level: str, value_domain: Sequence[Hashable] | None) -> list:
    present = {v for r in rows for v in r if not _is_missing(v)}
    if value_domain is not None:
        domain = list(dict.fromkeys(value_domain))
        unknown = present.difference(domain)
        if unknown:
            raise ValueError(f"values outside value_domain: {sorted(map(repr, unknown))[:5]}")
        return domain
    if level == "nominal":
        # Sorted when possible so the summation order, hence the last bit, is the same on
        # every run (set order varies with string hash randomization).
        try:
            return sorted(present)
        except TypeError:
            return sorted(present, key=repr)
    try:
        return sorted(present)
    except TypeError as exc:
        raise TypeError(f"{level} alpha needs orderable values or a value_domain") from exc


def krippendorff_alpha(
    data: Sequence[Sequence[object]] | np.ndarray,
    level: Level = "nominal",
    *,
    value_domain: Sequence[Hashable] | None = None,
) -> float | None:
    """Krippendorff's alpha; rows are annotators, columns items, ``None``/NaN missing.

    ``alpha = 1 - D_o / D_e`` from the coincidence matrix of pairable values (items with at
    least two ratings; an item rated once contributes nothing). ``level``: ``"nominal"`` (any
    hashable labels), ``"ordinal"`` (orderable values, or any labels with ``value_domain``
    giving their order), ``"interval"`` and ``"ratio"`` (real numbers). Equals
    ``krippendorff.alpha(reliability_data, level_of_measurement=level)`` (to ~1e-12; the
    distance functions are the package's). Returns None where the package raises or returns
    NaN: no item with two ratings, fewer than two distinct values, zero expected disagreement.

    Computed from the sparse (items x values) count matrix: O(ratings + values^2) time and
    memory, at most 10,000 distinct values; a numeric ndarray (NaN missing) skips the
    Python pass over cells. SPEC section 3: used when a project has more than two annotators
    per item. For its bootstrap at scale see :func:`metrics.resample.alpha_contributions`.
    """
    if level not in ("nominal", "ordinal", "interval", "ratio"):
        raise ValueError(f"unknown level {level!r}")
    if isinstance(data, np.ndarray) and data.ndim == 2 and data.dtype.kind in "fiu" and value_domain is None:
        # Numeric matrix (NaN = missing): encode with np.unique instead of a Python pass
        # over every cell (the Python pass is ~50 ns per cell: 10 ms for 20 x 10k).
        if data.shape[0] < 2:
            raise ValueError("need at least two annotators (rows)")
        values = data.astype(np.float64, copy=False)
        rated = ~np.isnan(values)
        domain_arr, inverse = np.unique(values[rated], return_inverse=True)
        domain = domain_arr.tolist()
        n_items = values.shape[1]
        codes = np.full(values.shape, -1, dtype=np.intp)
        codes[rated] = inverse.ravel()
    else:
        rows = [r.tolist() if isinstance(r, np.ndarray) else list(r) for r in data]
        if len(rows) < 2:
            raise ValueError("need at least two annotators (rows)")
        n_items = len(rows[0])
        if any(len(r) != n_items for r in rows):
            raise ValueError("every annotator row must have one entry per item")
        domain = _alpha_domain(rows, level, value_domain)
        code = {value: i for i, value in enumerate(domain)}
        codes = np.array([[-1 if _is_missing(x) else code[x] for x in r] for r in rows], dtype=np.intp).reshape(
            len(rows), n_items
        )
    if level in ("interval", "ratio"):
        bad = [v for v in domain if isinstance(v, bool) or not isinstance(v, (int, float, np.number))]
        if bad:
            raise TypeError(f"{level} alpha needs numbers, got {bad[:3]!r}")
    v = len(domain)
    if v < 2:
        return None
    if v > _MAX_ALPHA_VALUES:
        raise ValueError(f"too many distinct values ({v} > {_MAX_ALPHA_VALUES})")

    rater, unit = np.nonzero(codes >= 0)
    m_u = np.bincount(unit, minlength=n_items)
    pairable = m_u >= 2
    if not pairable.any():
        return None
    weight = np.zeros(n_items)
    weight[pairable] = 1.0 / (m_u[pairable] - 1)
    # Coincidences from the (units x values) count matrix n_uc: o = sum_u w_u (n_u n_u^T -
    # diag(n_u)), w_u = 1/(m_u - 1). One sparse product, O(ratings + V^2) time and memory,
    # instead of a bincount per ordered rater pair (O(R^2 x units): 380 passes for 20 people).
    counts = sp.csr_matrix((np.ones(unit.size), (unit, codes[rater, unit])), shape=(n_items, v))
    weighted = sp.diags(weight) @ counts
    o = (counts.T @ weighted).toarray() - np.diag(np.asarray(weighted.sum(axis=0)).ravel())
    n_v = o.sum(axis=0)
    n = n_v.sum()
    e = (np.outer(n_v, n_v) - np.diagflat(n_v)) / (n - 1)
    d = _distance_matrix(level, domain, n_v)
    expected = (e * d).sum()
    if expected == 0 or not np.isfinite(expected):
        return None
    return float(1 - (o * d).sum() / expected)
