"""Item bootstrap of agreement figures as weighted sums of per-item contributions.

Every statistic of an agreement report (a mean, a share, Cohen's kappa, kappa per annotator
pair, macro kappa over pairs and labels, Krippendorff's alpha) is a function of *sums over
items*: the cells of a confusion or coincidence matrix, a numerator and a denominator. A
bootstrap resample is a vector of weights ``w[i]`` = how often item i was drawn, so the
statistic of a resample is the same function of the weighted sums ``w @ X``, where row i of
``X`` holds item i's contributions. One weight matrix ``W`` (resamples x items) serves every
figure of a report, and recomputing nothing per item per resample is what makes 1,000
resamples of 1M items a matter of seconds instead of an hour (quality.compute's Python
recompute: ~4 ms per item per 1,000 resamples).

The pieces
----------
* A **builder** (``*_contributions``) turns plain per-item data into a :class:`Contributions`:
  the (items x k) matrix ``X`` (dense, or scipy.sparse CSR for one-hot cells) plus the
  function from weighted sums to the statistic.
* A **sums function** (``*_from_sums``) maps ``(R, k)`` weighted sums to ``R`` values, NaN
  where the statistic is undefined for that resample.
* :func:`bootstrap_figures` draws ``W`` once and evaluates every figure on it ->
  :class:`Estimate` (point estimate on unit weights, percentile CI, dropped resamples).

Resamples are exactly :func:`metrics.bootstrap.resample_indices` (resample r = the r-th
``default_rng(seed).integers(0, n, size=n)``), so each figure's CI equals, to ~1e-15, the
percentile CI of the matching ``metrics.agreement`` function recomputed on ``data[idx]``
(tests/test_resample.py checks this to 1e-12 for every statistic). Subsets (items where a
conditional field applies) are contributions that are zero outside the subset: a resample is
drawn over all items of the report and each figure uses the drawn items of its subset, so a
resample that draws none of them is undefined for that figure (dropped and counted).

Cost and memory
---------------
``W`` is never materialized: resamples come in blocks of ``block`` rows (``uint8`` counts, 16
x 1M = 16 MB) and items in chunks of ``chunk`` columns, converted to floating point per chunk.
Per block and chunk, dense contributions go through one BLAS matrix product and sparse ones
through one sparse-dense product. Columns whose contributions are small integers (confusion
cells, pair counts, value counts) run in float32, which is exact here: every partial sum is
an integer below 2**24 (checked: max value x items < 2**24, else float64), and halves the
memory traffic of the dominant sparse products. Time: O(resamples x (items + nonzeros)); the
draw itself (``integers`` + ``bincount``, ~7 ms per 1M-item resample) is the floor.

Rater conventions (same as :mod:`metrics.agreement`): in :class:`Ratings` (single-choice),
``None`` is a category and a rater absent from an item is missing; in :class:`LabelRatings`
(multi-label), a rater's ``None`` is missing and ``set()`` is an annotated item with no label.
Raters are **people** (annotator ids), not submission slots: AHA section 3.4 computes kappa
"for each of the three annotator pairs", so an item contributes to the table of every pair of
its annotators, and pairs are the annotator pairs that co-annotated at least one item.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import combinations

import numpy as np
import scipy.sparse as sp

from metrics.agreement import _as_label_set, _encode
from metrics.bootstrap import _check, percentile_interval

__all__ = [
    "DEFAULT_RESAMPLES",
    "Contributions",
    "Estimate",
    "Ratings",
    "LabelRatings",
    "bootstrap_figures",
    "first_seen",
    "resample_counts",
    "unique_inverse",
    "pair_ids",
    "mean_contributions",
    "share_contributions",
    "kappa_contributions",
    "pairwise_kappa_contributions",
    "two_rater_kappa_contributions",
    "pairwise_label_kappa_contributions",
    "alpha_contributions",
    "label_alpha_contributions",
    "ratio_from_sums",
    "kappa_from_sums",
    "mean_pairwise_kappa_from_sums",
    "macro_label_kappa_from_sums",
    "alpha_from_sums",
    "mean_label_alpha_from_sums",
]

#: The same at every size: quality.compute used to drop to 200 resamples past 40k items.
DEFAULT_RESAMPLES = 1000
_BLOCK = 16
_CHUNK = 16384
_EXACT_FLOAT32 = 1 << 24

SumsFunction = Callable[[np.ndarray], np.ndarray]


# ---------------------------------------------------------------------------------------
# Containers


class Contributions:
    """Per-item contributions of one statistic and the function from their weighted sums.

    ``matrix`` is (items x k), float64 ndarray or scipy.sparse; or, instead, ``columns``: k
    1-D arrays (bool, integer or float64), which figures may share (a field's subset mask is
    a column of its mean, of each share and of its observed agreement) and which the
    bootstrap reads in place, so the dense contributions of a report are one byte per item
    for a mask or an indicator and eight for a score, never copied into a float64 matrix
    (``matrix`` still gives that matrix, built on each access). With ``rows`` (increasing
    positions below ``size``) the columns hold only those items' values, every other item
    of the ``size`` contributing zero: a field scored on a third of the items (Meme3W's
    target fields) keeps a third of the values, and the bootstrap reads the weights of those
    items only. ``statistic`` maps weighted sums ``(R, k)`` to ``(R,)`` values, NaN where
    undefined. ``n_items`` is the number of items that can contribute (the figure's n: items
    in the subset with the data it needs).
    """

    __slots__ = ("_matrix", "columns", "rows", "size", "statistic", "n_items", "name")

    def __init__(
        self,
        matrix: np.ndarray | sp.spmatrix | sp.sparray | None,
        statistic: SumsFunction,
        n_items: int,
        name: str = "",
        *,
        columns: Sequence[np.ndarray] | None = None,
        rows: np.ndarray | None = None,
        size: int | None = None,
    ):
        if (matrix is None) == (columns is None):
            raise ValueError("give either the matrix or its columns")
        if columns is not None:
            columns = tuple(np.asarray(c) for c in columns)
            if not columns or any(c.ndim != 1 or c.shape != columns[0].shape for c in columns):
                raise ValueError("columns must be 1-D arrays of one length")
        if rows is not None:
            rows = np.asarray(rows)
            if columns is None or size is None:
                raise ValueError("rows go with columns and the size of the figure")
            if rows.ndim != 1 or not np.issubdtype(rows.dtype, np.integer) or rows.size != columns[0].size:
                raise ValueError("rows must be integer positions, one per value of each column")
            if rows.size and (rows[0] < 0 or rows[-1] >= size or bool((rows[1:] <= rows[:-1]).any())):
                raise ValueError("rows must be increasing positions below size")
        elif size is not None:
            raise ValueError("size goes with rows")
        self._matrix, self.columns, self.rows, self.size = matrix, columns, rows, size
        self.statistic, self.n_items, self.name = statistic, n_items, name

    def __repr__(self) -> str:
        return f"Contributions({self.name!r}, shape={self.shape}, n_items={self.n_items})"

    @property
    def matrix(self) -> np.ndarray | sp.spmatrix | sp.sparray:
        if self._matrix is not None:
            return self._matrix
        values = np.column_stack([c.astype(np.float64) for c in self.columns])
        if self.rows is None:
            return values
        out = np.zeros((self.size, values.shape[1]))
        out[self.rows] = values
        return out

    @property
    def shape(self) -> tuple[int, int]:
        if self.columns is not None:
            return (int(self.columns[0].size if self.rows is None else self.size), len(self.columns))
        return tuple(self._matrix.shape)  # type: ignore[return-value]

    def sums(self, weights: np.ndarray | None = None) -> np.ndarray:
        """Weighted column sums -> (k,); unit weights when ``weights`` is None."""
        if self.columns is not None:
            if weights is None:
                return np.array([c.sum(dtype=np.float64) for c in self.columns])
            w = np.asarray(weights, dtype=np.float64)
            if self.rows is not None:
                if w.shape != (self.size,):
                    raise ValueError(f"weights must have one entry per item ({self.size})")
                w = w[self.rows]
            return np.array([np.dot(c.astype(np.float64), w) for c in self.columns])
        m = self._matrix
        if weights is None:
            return np.asarray(m.sum(axis=0), dtype=np.float64).ravel()
        w = np.asarray(weights, dtype=np.float64)
        return np.asarray(m.T @ w, dtype=np.float64).ravel()

    def point(self) -> float | None:
        """The statistic on unit weights (all items once); None when undefined."""
        v = float(self.statistic(self.sums()[None, :])[0])
        return v if np.isfinite(v) else None


@dataclass(frozen=True)
class Estimate:
    """One figure: point estimate, percentile CI and how many resamples were dropped.

    ``value`` is the statistic on all items (unit weights), None when undefined; ``ci`` is
    ``(low, high)`` over the resamples where the statistic is defined, None when ``value`` is
    None or no resample is defined; ``undefined`` counts the dropped resamples;
    ``resampled`` holds every resample's value (NaN = undefined), e.g. for paired comparisons.
    """

    value: float | None
    ci: tuple[float, float] | None
    n_items: int
    resamples: int
    undefined: int
    level: float
    resampled: np.ndarray = field(repr=False, compare=False)


def _rater_order(ids: Iterable[Hashable]) -> list[Hashable]:
    unique = list(dict.fromkeys(ids))
    try:
        return sorted(unique)  # type: ignore[type-var]
    except TypeError:
        return unique


def _item_pairs(item: object) -> list[tuple[Hashable, object]]:
    if type(item) is dict or isinstance(item, Mapping):  # the exact-type test skips the ABC check
        return list(item.items())
    return [tuple(p) for p in item]  # type: ignore[union-attr, misc]


@dataclass(frozen=True)
class Ratings:
    """Single-choice ratings of one field: items x slots, by rater (person) and category.

    ``raters[i, s]`` is the index (into ``rater_ids``) of the annotator in slot s of item i,
    -1 for an empty slot; ``codes[i, s]`` the index into ``categories`` of the value they
    chose (``None`` is an ordinary category), -1 where the slot is empty. Slot order carries
    no meaning: pairs are formed by rater.
    """

    raters: np.ndarray
    codes: np.ndarray
    rater_ids: tuple[Hashable, ...]
    categories: tuple[Hashable, ...]

    def __post_init__(self) -> None:
        r, c = np.asarray(self.raters), np.asarray(self.codes)
        if r.ndim != 2 or r.shape != c.shape:
            raise ValueError(f"raters and codes must be equal (items, slots) arrays, got {r.shape}, {c.shape}")
        if ((r < 0) != (c < 0)).any():
            raise ValueError("a slot has a rater but no value, or a value but no rater")
        if r.size and (r.max() >= len(self.rater_ids) or c.max() >= len(self.categories)):
            raise ValueError("rater or category code out of range")
        _check_distinct_raters(r)

    @property
    def n_items(self) -> int:
        return int(self.raters.shape[0])

    @classmethod
    def from_items(cls, items: Sequence[Mapping[Hashable, Hashable] | Iterable[tuple[Hashable, Hashable]]]) -> Ratings:
        """``items[i]`` = ``{annotator: value}`` (or ``(annotator, value)`` pairs) of item i.

        An annotator absent from an item did not rate it; ``None`` as a value is a category.
        Annotator ids are sorted when they are orderable (pair orientation is then stable).
        Raises ``ValueError`` if one annotator rates an item twice.
        """
        per_item = [_item_pairs(it) for it in items]
        rater_ids = _rater_order(r for pairs in per_item for r, _ in pairs)
        rindex = {r: j for j, r in enumerate(rater_ids)}
        categories = list(dict.fromkeys(v for pairs in per_item for _, v in pairs))
        cindex = {v: j for j, v in enumerate(categories)}
        width = max((len(p) for p in per_item), default=0)
        raters = np.full((len(per_item), width), -1, dtype=np.intp)
        codes = np.full((len(per_item), width), -1, dtype=np.intp)
        # One fancy-index assignment instead of a numpy scalar store per slot (~5x at 1M items).
        flat = [(i, s, rindex[r], cindex[v]) for i, pairs in enumerate(per_item) for s, (r, v) in enumerate(pairs)]
        if flat:
            at = np.array(flat, dtype=np.intp)
            raters[at[:, 0], at[:, 1]] = at[:, 2]
            codes[at[:, 0], at[:, 1]] = at[:, 3]
        return cls(raters, codes, tuple(rater_ids), tuple(categories))

    @classmethod
    def from_codes(cls, raters: np.ndarray, codes: np.ndarray, values: Sequence[Hashable]) -> Ratings:
        """The ratings :meth:`from_items` builds from ``{raters[i, s]: values[codes[i, s]]}``
        per item, from arrays (no per-item Python): ``raters`` (items, slots) non-negative
        integer annotator ids, -1 for an empty slot; ``codes`` indexes ``values`` (ignored
        where the slot is empty). Equal entries of ``values`` are one category; categories
        come in first-seen order (items, then slots), raters sorted, each item's rated slots
        first, as in :meth:`from_items`. Raises ``ValueError`` if one annotator rates an item
        twice."""
        # Integer inputs keep their width (quality.reports' codes are int32); outputs are int32
        # (rater and category indices): at 1M items each int64 copy was 16 MB (bench/scale.py).
        raters, codes = _compact_slots(_integers(raters, np.int64), _integers(codes, np.intp))
        present = raters >= 0
        rater_ids, rcodes = _sorted_ids(raters, present)
        flat = codes[present]  # row-major: items, then slots (the order from_items sees)
        category_of, categories = _first_seen_categories(flat, values)
        out = np.full(codes.shape, -1, dtype=np.int32)
        out[present] = category_of[flat]
        return cls(rcodes, out, rater_ids, tuple(categories))

    def by_rater(self, missing: object = None) -> list[list[object]]:
        """Rows = raters (``rater_ids`` order), columns = items, ``missing`` where unrated."""
        out = [[missing] * self.n_items for _ in self.rater_ids]
        for i, s in zip(*np.nonzero(self.raters >= 0)):
            out[self.raters[i, s]][i] = self.categories[self.codes[i, s]]
        return out


@dataclass(frozen=True)
class LabelRatings:
    """Multi-label ratings of one field: ``members[i, s, l]`` = rater in slot s chose label l.

    ``raters[i, s]`` as in :class:`Ratings` (-1 = empty slot, which is also how a rater's
    ``None`` -- missing -- is stored); an annotated item with no label has an all-False row.
    """

    raters: np.ndarray
    members: np.ndarray
    rater_ids: tuple[Hashable, ...]
    labels: tuple[Hashable, ...]

    def __post_init__(self) -> None:
        r, m = np.asarray(self.raters), np.asarray(self.members)
        if not self.labels:
            raise ValueError("a multi-label field needs at least one label")
        if r.ndim != 2 or m.shape != (*r.shape, len(self.labels)):
            raise ValueError(f"members must be (items, slots, labels) = {(*r.shape, len(self.labels))}, got {m.shape}")
        if (m & (r < 0)[..., None]).any():
            raise ValueError("labels set on an empty slot")
        if r.size and r.max() >= len(self.rater_ids):
            raise ValueError("rater code out of range")
        _check_distinct_raters(r)

    @property
    def n_items(self) -> int:
        return int(self.raters.shape[0])

    @classmethod
    def from_items(
        cls,
        items: Sequence[Mapping[Hashable, object] | Iterable[tuple[Hashable, object]]],
        labels: Iterable[Hashable],
    ) -> LabelRatings:
        """``items[i]`` = ``{annotator: label set or None}``; None = that annotator is missing.

        Same set conventions as :func:`metrics.agreement.per_label_kappa`: a bare string is a
        one-label set, labels outside ``labels`` are ignored, ``set()`` is kept.
        """
        if isinstance(labels, (str, bytes)):
            raise TypeError("labels must be a collection of labels, not a string")
        labels = list(dict.fromkeys(labels))
        lindex = {x: j for j, x in enumerate(labels)}
        per_item = [
            [(r, v if type(v) is frozenset else _as_label_set(v)) for r, v in _item_pairs(it) if v is not None]
            for it in items
        ]
        rater_ids = _rater_order(r for pairs in per_item for r, _ in pairs)
        rindex = {r: j for j, r in enumerate(rater_ids)}
        width = max((len(p) for p in per_item), default=0)
        raters = np.full((len(per_item), width), -1, dtype=np.intp)
        members = np.zeros((len(per_item), width, len(labels)), dtype=bool)
        # Flat index lists and two fancy-index stores instead of numpy scalar stores per label.
        slots = [(i, s, rindex[r]) for i, pairs in enumerate(per_item) for s, (r, _v) in enumerate(pairs)]
        marks = [
            (i, s, j)
            for i, pairs in enumerate(per_item)
            for s, (_r, v) in enumerate(pairs)
            for j in (lindex.get(x) for x in v)
            if j is not None
        ]
        if slots:
            at = np.array(slots, dtype=np.intp)
            raters[at[:, 0], at[:, 1]] = at[:, 2]
        if marks:
            at = np.array(marks, dtype=np.intp)
            members[at[:, 0], at[:, 1], at[:, 2]] = True
        return cls(raters, members, tuple(rater_ids), tuple(labels))

    @classmethod
    def from_codes(
        cls, raters: np.ndarray, codes: np.ndarray, values: Sequence[object], labels: Iterable[Hashable]
    ) -> LabelRatings:
        """The ratings :meth:`from_items` builds from ``{raters[i, s]: values[codes[i, s]]}``
        per item (label sets; ``None`` = that annotator is missing), from arrays: ``raters``
        (items, slots) non-negative integer annotator ids, -1 for an empty slot; ``codes``
        indexes ``values``. Each distinct value is converted once (same conventions as
        :meth:`from_items`); missing slots are dropped and each item's rated slots come first."""
        if isinstance(labels, (str, bytes)):
            raise TypeError("labels must be a collection of labels, not a string")
        labels = list(dict.fromkeys(labels))
        lindex = {x: j for j, x in enumerate(labels)}
        raters = np.asarray(raters, dtype=np.int64)
        codes = np.asarray(codes, dtype=np.intp)
        table = np.zeros((len(values) + 1, len(labels)), dtype=bool)  # last row: empty slots
        missing = np.ones(len(values) + 1, dtype=bool)
        for c, v in enumerate(values):
            s = v if type(v) is frozenset else _as_label_set(v)
            if s is None:
                continue
            missing[c] = False
            for j in (lindex.get(x) for x in s):
                if j is not None:
                    table[c, j] = True
        present = raters >= 0
        safe = np.where(present, codes, len(values))
        raters = np.where(present & ~missing[safe], raters, -1)
        raters, safe = _compact_slots(raters, safe)
        rater_ids, rcodes = _sorted_ids(raters, raters >= 0)
        members = table[np.where(raters >= 0, safe, len(values))]
        return cls(rcodes, members, rater_ids, tuple(labels))

    def by_rater(self) -> list[list[frozenset | None]]:
        """Rows = raters, columns = items, label sets (None where unrated): the shape of
        :func:`metrics.agreement.macro_pairwise_kappa`'s ``annotations``."""
        out: list[list[frozenset | None]] = [[None] * self.n_items for _ in self.rater_ids]
        for i, s in zip(*np.nonzero(self.raters >= 0)):
            out[self.raters[i, s]][i] = frozenset(self.labels[j] for j in np.nonzero(self.members[i, s])[0])
        return out


def _compact_slots(raters: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each item's rated slots first, in slot order, and as many slots as the fullest item has
    (the arrays a per-item list of pairs gives)."""
    present = raters >= 0
    if present.shape[1] >= 2 and (~present[:, :-1] & present[:, 1:]).any():
        order = np.argsort(~present, axis=1, kind="stable")
        raters, codes = np.take_along_axis(raters, order, axis=1), np.take_along_axis(codes, order, axis=1)
    width = int(present.sum(axis=1).max()) if present.size else 0
    return raters[:, :width], codes[:, :width]


def _integers(values, dtype) -> np.ndarray:
    """``values`` as an integer array: as it is when it already is one, else as ``dtype``."""
    arr = np.asarray(values)
    return arr if arr.dtype.kind in "iu" else arr.astype(dtype)


def _sorted_ids(raters: np.ndarray, present: np.ndarray) -> tuple[tuple[int, ...], np.ndarray]:
    """Sorted distinct rater ids (Python ints) and the rater matrix as indices into them."""
    ids = np.unique(raters[present])
    out = np.full(raters.shape, -1, dtype=np.int32)
    out[present] = np.searchsorted(ids, raters[present])
    return tuple(ids.tolist()), out


def _first_seen_categories(flat: np.ndarray, values: Sequence[Hashable]) -> tuple[np.ndarray, list[Hashable]]:
    """Per code, its category index; categories = distinct ``values[c]`` in first-seen order of
    ``flat`` (equal values merge, like ``dict.fromkeys`` over the decoded sequence)."""
    category_of = np.full(max(len(values), 1), -1, dtype=np.intp)
    if not flat.size:
        return category_of, []
    index: dict[Hashable, int] = {}
    for c in first_seen(flat).tolist():
        category_of[c] = index.setdefault(values[c], len(index))
    return category_of, list(index)


def first_seen(codes: np.ndarray) -> np.ndarray:
    """The distinct non-negative ``codes`` (at least one) in the order they first occur. For a
    field's few values, one scan per value (bincount, then each one's first position): no
    sort of every code (6M pooled codes at 1M AHA items, ~0.6 s); else ``np.unique``."""
    top = int(codes.max()) + 1
    if top > 64:
        used, first_at = np.unique(codes, return_index=True)
        return used[np.argsort(first_at, kind="stable")]
    used = np.flatnonzero(np.bincount(codes, minlength=top))
    first_at = np.array([int(np.argmax(codes == c)) for c in used.tolist()], dtype=np.intp)
    return used[np.argsort(first_at, kind="stable")]


def _check_distinct_raters(raters: np.ndarray) -> None:
    for s, t in combinations(range(raters.shape[1]), 2):
        if ((raters[:, s] >= 0) & (raters[:, s] == raters[:, t])).any():
            raise ValueError("an annotator appears twice on one item")


def _subset_mask(subset: Sequence[bool] | np.ndarray | None, n: int) -> np.ndarray:
    if subset is None:
        return np.ones(n, dtype=bool)
    mask = np.asarray(subset)
    if mask.dtype != bool:
        raise TypeError("subset must be a boolean mask over items")
    if mask.shape != (n,):
        raise ValueError(f"subset mask has shape {mask.shape}, expected ({n},)")
    return mask


# ---------------------------------------------------------------------------------------
# Sums -> statistic (vectorized over resamples; NaN = undefined)


def ratio_from_sums(sums: np.ndarray) -> np.ndarray:
    """``sums[:, 0] / sums[:, 1]`` (weighted total / weighted count); NaN where the count is 0."""
    s = np.asarray(sums, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(s[:, 1] > 0, s[:, 0] / s[:, 1], np.nan)


def _kappa_cells(total: np.ndarray, agree: np.ndarray, chance: np.ndarray) -> np.ndarray:
    # kappa = 1 - sum(W*C)/sum(W*E) of metrics.agreement.kappa_from_confusion, written as
    # 1 - total*(total - agree)/(total^2 - sum_k row_k col_k): with integer weights every term
    # is an exact integer, so "expected disagreement 0" (undefined) is detected exactly.
    expected = total * total - chance
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((total > 0) & (expected > 0), 1.0 - total * (total - agree) / expected, np.nan)


def kappa_from_sums(sums: np.ndarray, n_categories: int) -> np.ndarray:
    """Cohen's kappa from weighted confusion cells ``(R, k*k)`` (row-major, rater a = rows)."""
    k = int(n_categories)
    c = np.asarray(sums, dtype=np.float64).reshape(-1, k, k)
    total = c.sum(axis=(1, 2))
    agree = np.trace(c, axis1=1, axis2=2)
    chance = (c.sum(axis=2) * c.sum(axis=1)).sum(axis=1)
    return _kappa_cells(total, agree, chance)


def _nanmean_last(values: np.ndarray) -> np.ndarray:
    ok = np.isfinite(values)
    count = ok.sum(axis=-1)
    total = np.where(ok, values, 0.0).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(count > 0, total / count, np.nan)


def mean_pairwise_kappa_from_sums(sums: np.ndarray, n_pairs: int, n_categories: int) -> np.ndarray:
    """Unweighted mean over annotator pairs of Cohen's kappa; undefined pairs skipped per
    resample, NaN when no pair is defined. ``sums`` is ``(R, pairs*k*k)``."""
    k, p = int(n_categories), int(n_pairs)
    c = np.asarray(sums, dtype=np.float64).reshape(-1, p, k, k)
    total = c.sum(axis=(2, 3))
    agree = np.trace(c, axis1=2, axis2=3)
    chance = (c.sum(axis=3) * c.sum(axis=2)).sum(axis=2)
    return _nanmean_last(_kappa_cells(total, agree, chance))


def _label_kappas(sums: np.ndarray, n_pairs: int, n_labels: int) -> np.ndarray:
    p, n_l = int(n_pairs), int(n_labels)
    s = np.asarray(sums, dtype=np.float64)
    total = s[:, :p, None]
    cells = s[:, p:].reshape(-1, p, n_l, 3)
    n11, n10, n01 = cells[..., 0], cells[..., 1], cells[..., 2]
    n00 = total - n11 - n10 - n01
    a1, b1 = n11 + n10, n11 + n01
    chance = a1 * b1 + (total - a1) * (total - b1)
    return _kappa_cells(np.broadcast_to(total, n11.shape), n11 + n00, chance)


def macro_label_kappa_from_sums(sums: np.ndarray, n_pairs: int, n_labels: int) -> np.ndarray:
    """Binary kappa per (annotator pair, label), averaged over all defined (pair, label)
    values (AHA 3.4; same skipping rule as :func:`metrics.agreement.macro_pairwise_kappa`).

    ``sums`` is ``(R, pairs + pairs*labels*3)``: the pair's item count, then per (pair,
    label) the cells (both chose it, only the first rater, only the second); the "neither"
    cell is the pair count minus those three, so items without the label cost nothing.
    """
    kappas = _label_kappas(sums, n_pairs, n_labels)
    return _nanmean_last(kappas.reshape(kappas.shape[0], -1))


def alpha_from_sums(sums: np.ndarray) -> np.ndarray:
    """Nominal Krippendorff's alpha from ``(R, V + 1)`` sums: pairable value counts n_c, then
    the off-diagonal coincidence mass D. ``alpha = 1 - (n - 1) D / (n^2 - sum_c n_c^2)``
    (``1 - D_o/D_e`` of the coincidence matrix); NaN when nothing is pairable or only one
    value is pairable (expected disagreement 0), where the package raises or returns NaN."""
    s = np.asarray(sums, dtype=np.float64)
    n_c, d = s[:, :-1], s[:, -1]
    n = n_c.sum(axis=1)
    expected = n * n - (n_c * n_c).sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where((n > 0) & (expected > 0), 1.0 - (n - 1.0) * d / expected, np.nan)


def mean_label_alpha_from_sums(sums: np.ndarray, n_labels: int) -> np.ndarray:
    """Mean over labels of binary nominal alpha (label chosen or not), undefined labels
    skipped per resample. ``sums`` is ``(R, 1 + 2L)``: pairable ratings n, then per label the
    pairable "chosen" count n_1, then per label the disagreement mass D."""
    n_l = int(n_labels)
    s = np.asarray(sums, dtype=np.float64)
    n = s[:, :1]
    n1 = s[:, 1 : 1 + n_l]
    d = s[:, 1 + n_l :]
    expected = 2.0 * n1 * (n - n1)  # n^2 - n_0^2 - n_1^2
    with np.errstate(divide="ignore", invalid="ignore"):
        alphas = np.where((n > 0) & (expected > 0), 1.0 - (n - 1.0) * d / expected, np.nan)
    return _nanmean_last(alphas)


# ---------------------------------------------------------------------------------------
# Builders: plain per-item data -> Contributions


def _scores(x: Sequence[float] | np.ndarray, mask: np.ndarray, name: str) -> np.ndarray:
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be real numbers (NaN allowed only outside the subset)") from exc
    if arr.ndim != 1 or arr.shape != mask.shape:
        raise ValueError(f"{name} must be 1-D with one value per item")
    if not np.isfinite(arr[mask]).all():
        raise ValueError(f"{name} has NaN/inf inside the subset")
    return arr


def compact_scores(column: np.ndarray) -> np.ndarray:
    """``column`` as uint8 when it holds only the integers 0..255 (a share's 0/1 hits, two
    raters' observed agreement): an eighth of the memory, the same sums."""
    if column.dtype == np.uint8:
        return column
    if column.dtype == bool:
        return column.view(np.uint8)
    if column.size and column.min() >= 0 and column.max() <= 255 and (column == np.rint(column)).all():
        return column.astype(np.uint8)
    return column


def mean_contributions(
    scores: Sequence[float] | np.ndarray, subset: Sequence[bool] | np.ndarray | None = None
) -> Contributions:
    """Mean of per-item scores over the subset: columns ``[x * in_subset, in_subset]``.

    ``subset`` (boolean mask, default all items) keeps e.g. only the items where a field
    applies; a resample drawing none of them is undefined. Scores outside the subset are
    ignored (may be NaN); inside they must be finite.
    """
    n = len(scores)
    mask = _subset_mask(subset, n)
    x = _scores(scores, mask, "scores")
    return Contributions(
        None, ratio_from_sums, int(mask.sum()), "mean", columns=(compact_scores(np.where(mask, x, 0.0)), mask)
    )


def mean_contributions_at(
    scores: Sequence[float] | np.ndarray, rows: np.ndarray, size: int, *, ones: np.ndarray | None = None
) -> Contributions:
    """:func:`mean_contributions` of the ``size`` items with the subset given as its ``rows``
    (increasing positions) and ``scores`` one per row (finite): columns ``[x, 1]`` over the
    rows only (:class:`Contributions` ``rows``), the same figure and bootstrap. ``ones``: the
    indicator column to use (uint8 ones, one per row), so figures over the same rows share it."""
    rows = np.asarray(rows)
    x = _scores(scores, np.ones(rows.shape, dtype=bool), "scores")
    if ones is None:
        ones = np.ones(rows.size, dtype=np.uint8)
    elif ones.shape != rows.shape or (ones.size and not (ones == 1).all()):
        raise ValueError("ones must be a column of ones, one per row")
    return Contributions(
        None, ratio_from_sums, int(rows.size), "mean", columns=(compact_scores(x), ones), rows=rows, size=size
    )


def share_contributions(
    scores: Sequence[float] | np.ndarray, threshold: float, subset: Sequence[bool] | np.ndarray | None = None
) -> Contributions:
    """Share of subset items with ``score >= threshold`` (Meme3W: share F1_rel >= 0.7,
    IoU >= 0.75): the mean of the 0/1 indicator, same subset rule as :func:`mean_contributions`."""
    n = len(scores)
    mask = _subset_mask(subset, n)
    x = _scores(scores, mask, "scores")
    hit = mask & (np.where(mask, x, -np.inf) >= threshold)
    return Contributions(None, ratio_from_sums, int(mask.sum()), "share", columns=(hit, mask))


def _one_hot(rows: np.ndarray, cols: np.ndarray, n: int, k: int, values: np.ndarray | None = None) -> sp.csr_matrix:
    """CSR with ``values`` (default 1) at ``(rows[j], cols[j])``, built straight from the
    pairs by a stable sort on the row (none when the rows are in order, as for two raters):
    scipy's (data, (row, col)) form went through a COO copy and a duplicate sum, ~100 MB at
    1M items (bench/scale.py). Each (row, col) pair occurs once here."""
    # Ones as uint8 (the bootstrap casts each chunk; sums are exact either way): 8 -> 1 byte each.
    data = np.ones(rows.size, dtype=np.uint8) if values is None else np.asarray(values, dtype=np.float64)
    index = np.int32 if max(n, k, rows.size) < np.iinfo(np.int32).max else np.int64
    if rows.size > 1 and not (rows[1:] >= rows[:-1]).all():
        order = np.argsort(rows, kind="stable")
        rows, cols, data = rows[order], cols[order], data[order]
    indptr = np.zeros(n + 1, dtype=index)
    np.cumsum(np.bincount(rows, minlength=n), out=indptr[1:])
    return sp.csr_matrix((data, cols.astype(index, copy=False), indptr), shape=(n, k))


def kappa_contributions(
    a: Sequence[Hashable], b: Sequence[Hashable], subset: Sequence[bool] | np.ndarray | None = None
) -> Contributions:
    """Cohen's kappa of two raters: item i is a one-hot cell ``(a[i], b[i])`` of the k x k
    confusion matrix. ``None`` is a category (as in :func:`metrics.agreement.cohen_kappa`);
    items outside ``subset`` (e.g. where one rater is missing) contribute nothing."""
    if len(a) != len(b):
        raise ValueError(f"rater sequences differ in length: {len(a)} != {len(b)}")
    n = len(a)
    mask = _subset_mask(subset, n)
    ca, cb, cats = _encode(a, b)
    k = max(len(cats), 1)
    rows = np.nonzero(mask)[0]
    matrix = _one_hot(rows, ca[rows] * k + cb[rows], n, k * k)
    return Contributions(matrix, partial(kappa_from_sums, n_categories=k), int(rows.size), "kappa")


def _distinct(n: int, *positions: np.ndarray) -> int:
    """How many distinct positions below ``n`` the arrays hold: a mask, not a sort (the sort
    of 3M item positions per three-rater field was ~1 s of a 1M-item AHA report)."""
    seen = np.zeros(n, dtype=bool)
    for p in positions:
        seen[p] = True
    return int(np.count_nonzero(seen))


def _slot_pairs(raters: np.ndarray, mask: np.ndarray):
    """Per slot pair: (items, low rater, high rater, slot of low, slot of high)."""
    slot = np.int8 if raters.shape[1] <= np.iinfo(np.int8).max else np.int64
    for s, t in combinations(range(raters.shape[1]), 2):
        ok = mask & (raters[:, s] >= 0) & (raters[:, t] >= 0)
        items = np.nonzero(ok)[0]
        rs, rt = raters[items, s], raters[items, t]
        swap = rs > rt
        s8, t8 = slot(s), slot(t)  # slot numbers: one byte per item, not eight
        yield items, np.where(swap, rt, rs), np.where(swap, rs, rt), np.where(swap, t8, s8), np.where(swap, s8, t8)


def unique_inverse(keys: np.ndarray, bound: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(keys, return_inverse=True)`` for non-negative integer keys below ``bound``:
    by a lookup table when ``bound`` is small next to the number of keys (no sort of every
    key: annotator pairs, pairs of a field's few values), else by ``np.unique``."""
    keys = np.asarray(keys)
    if bound <= max(1 << 16, 4 * keys.size):
        seen = np.zeros(bound, dtype=bool)
        seen[keys] = True
        unique = np.flatnonzero(seen)
        lookup = np.zeros(bound, dtype=np.intp)
        lookup[unique] = np.arange(unique.size)
        return unique.astype(keys.dtype, copy=False), lookup[keys]
    return np.unique(keys, return_inverse=True)


def _pair_index(parts: list, n_raters: int) -> tuple[list[np.ndarray], np.ndarray]:
    keys = [lo.astype(np.int64) * n_raters + hi for _, lo, hi, _, _ in parts]
    bounds = np.cumsum([0] + [k.size for k in keys])
    allkeys = (np.concatenate(keys) if len(keys) > 1 else keys[0]) if keys else np.zeros(0, dtype=np.int64)
    del keys
    unique, inverse = unique_inverse(allkeys, n_raters * n_raters)
    return [inverse[bounds[j] : bounds[j + 1]] for j in range(len(bounds) - 1)], unique


def pairwise_kappa_contributions(ratings: Ratings, subset: Sequence[bool] | np.ndarray | None = None) -> Contributions:
    """Mean over annotator pairs (people) of Cohen's kappa over the items both rated.

    Item i contributes one confusion cell to the table of every pair of its annotators (3
    pairs for 3 annotators). Pairs are those that co-rated at least one subset item, oriented
    by rater index (kappa is symmetric). Per resample, pairs whose kappa is undefined (no
    drawn item, or both raters constant on one category) are skipped; the resample is
    undefined when every pair is. Reference: :func:`metrics.agreement.mean_pairwise_kappa`;
    :func:`pair_ids` lists the pairs in column order. ``n_items`` counts the subset items
    with at least two raters.
    """
    n = ratings.n_items
    mask = _subset_mask(subset, n)
    k = max(len(ratings.categories), 1)
    parts = list(_slot_pairs(ratings.raters, mask))
    pair_of, unique = _pair_index(parts, len(ratings.rater_ids))
    rows, cols = [], []
    while parts:  # each part let go once its cells are computed
        items, _lo, _hi, s_lo, s_hi = parts.pop(0)
        pidx = pair_of.pop(0)
        cell = ratings.codes[items, s_lo].astype(np.int64) * k + ratings.codes[items, s_hi]
        rows.append(items)
        cols.append(pidx * (k * k) + cell)
        del items, _lo, _hi, s_lo, s_hi, pidx, cell
    rows_a = np.concatenate(rows) if len(rows) > 1 else rows[0] if rows else np.zeros(0, dtype=np.intp)
    cols_a = np.concatenate(cols) if len(cols) > 1 else cols[0] if cols else np.zeros(0, dtype=np.intp)
    del rows, cols
    p = int(unique.size)
    matrix = _one_hot(rows_a, cols_a, n, max(p, 1) * k * k)
    stat = partial(mean_pairwise_kappa_from_sums, n_pairs=max(p, 1), n_categories=k)
    return Contributions(matrix, stat, _distinct(n, rows_a), "mean pairwise kappa")


def two_rater_kappa_contributions(
    a: np.ndarray, b: np.ndarray, values: Sequence[Hashable], subset: Sequence[bool] | np.ndarray | None = None
) -> Contributions:
    """:func:`pairwise_kappa_contributions` of two raters (slots) given as codes into
    ``values`` (-1: no rating), without building :class:`Ratings`: the same figure (one pair,
    the items both rated; equal entries of ``values`` are one category, None included) from
    the codes alone. At 1M items the ratings table and its pair index were ~150 MB of
    temporaries (bench/scale.py)."""
    a, b = _integers(a, np.intp), _integers(b, np.intp)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError("a and b must be 1-D code arrays of one length")
    n = a.size
    mask = _subset_mask(subset, n)
    rows = np.flatnonzero(mask & (a >= 0) & (b >= 0))
    if n < np.iinfo(np.int32).max:
        rows = rows.astype(np.int32)
    ca, cb = a[rows], b[rows]
    used = np.zeros(len(values) + 1, dtype=bool)
    used[ca], used[cb] = True, True
    index: dict[Hashable, int] = {}
    category_of = np.zeros(len(values) + 1, dtype=np.int64)
    for c in np.flatnonzero(used).tolist():
        category_of[c] = index.setdefault(values[c], len(index))
    k = max(len(index), 1)
    if k * k < np.iinfo(np.int32).max:  # the cells as int32: half the temporaries
        category_of = category_of.astype(np.int32)
    cells = category_of[ca]
    cells *= k
    cells += category_of[cb]
    del ca, cb
    matrix = _one_hot(rows, cells, n, k * k)
    stat = partial(mean_pairwise_kappa_from_sums, n_pairs=1, n_categories=k)
    return Contributions(matrix, stat, int(rows.size), "mean pairwise kappa")


def pairwise_label_kappa_contributions(
    ratings: LabelRatings, subset: Sequence[bool] | np.ndarray | None = None
) -> Contributions:
    """Per-label binary kappa for every annotator pair (people), macro over (pair, label).

    AHA section 3.4: "every subtype was treated as a separate binary label. Cohen's kappa was
    computed independently for each subtype and each of the three annotator pairs, then
    macro-averaged across subtypes and annotator pairs". Undefined (pair, label) kappas are
    skipped per resample, exactly as :func:`metrics.agreement.macro_pairwise_kappa` skips
    them (its ``annotations`` = :meth:`LabelRatings.by_rater`). A binary single-choice field
    can use :func:`pairwise_kappa_contributions` instead (same value).
    """
    n = ratings.n_items
    mask = _subset_mask(subset, n)
    n_l = len(ratings.labels)
    parts = list(_slot_pairs(ratings.raters, mask))
    pair_of, unique = _pair_index(parts, len(ratings.rater_ids))
    p = max(int(unique.size), 1)
    rows, cols = [], []
    for (items, _lo, _hi, s_lo, s_hi), pidx in zip(parts, pair_of):
        rows.append(items)
        cols.append(pidx)
        lo = ratings.members[items, s_lo]  # (items, L)
        hi = ratings.members[items, s_hi]
        for cell, hit in enumerate((lo & hi, lo & ~hi, ~lo & hi)):
            r, lab = np.nonzero(hit)
            rows.append(items[r])
            cols.append(p + (pidx[r] * n_l + lab) * 3 + cell)
    rows_a = np.concatenate(rows) if rows else np.zeros(0, dtype=np.intp)
    cols_a = np.concatenate(cols) if cols else np.zeros(0, dtype=np.intp)
    matrix = _one_hot(rows_a, cols_a, n, p + p * n_l * 3)
    n_items = _distinct(n, *(x[0] for x in parts))
    stat = partial(macro_label_kappa_from_sums, n_pairs=p, n_labels=n_l)
    return Contributions(matrix, stat, n_items, "macro pairwise label kappa")


def per_label_kappas(contributions: Contributions) -> list[float | None]:
    """Per label: the mean over annotator pairs of its binary kappa (undefined pairs skipped,
    None when no pair is defined), from :func:`pairwise_label_kappa_contributions`' column
    sums -- the same figures as ``macro_pairwise_kappa(ratings.by_rater(), [label])`` per label,
    without building the per-rater lists again."""
    keywords = getattr(contributions.statistic, "keywords", None)
    if getattr(contributions.statistic, "func", None) is not macro_label_kappa_from_sums or keywords is None:
        raise ValueError("per_label_kappas needs the contributions of pairwise_label_kappa_contributions")
    kappas = _label_kappas(contributions.sums()[None, :], keywords["n_pairs"], keywords["n_labels"])[0]
    means = _nanmean_last(kappas.T)  # (labels, pairs) -> per label
    return [float(v) if np.isfinite(v) else None for v in means]


def alpha_contributions(ratings: Ratings, subset: Sequence[bool] | np.ndarray | None = None) -> Contributions:
    """Nominal Krippendorff's alpha, any number of raters, missing values allowed.

    Unit u with m_u >= 2 ratings and value counts n_uc contributes its coincidences
    ``o_ck = (n_uc n_uk - [c = k] n_uc) / (m_u - 1)``; nominal alpha only needs their
    marginals (= n_uc) and off-diagonal mass ``D_u = (m_u^2 - sum_c n_uc^2) / (m_u - 1)``,
    so the contributions are V + 1 columns. Units rated once contribute nothing (as in the
    package). ``None`` is a category here (Ratings convention); reference:
    ``metrics.agreement.krippendorff_alpha(ratings.by_rater())`` after mapping the None
    category to a stand-in value.
    """
    n = ratings.n_items
    mask = _subset_mask(subset, n)
    v = max(len(ratings.categories), 1)
    counts = np.zeros((n, v))
    for s in range(ratings.codes.shape[1]):
        ok = mask & (ratings.codes[:, s] >= 0)
        counts[np.nonzero(ok)[0], ratings.codes[ok, s]] += 1.0
    m = counts.sum(axis=1)
    pairable = m >= 2
    counts[~pairable] = 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(pairable, (m * m - (counts * counts).sum(axis=1)) / (m - 1.0), 0.0)
    return _columns_at(pairable, [*counts.T, d], alpha_from_sums, "alpha")


def label_alpha_contributions(
    ratings: LabelRatings, subset: Sequence[bool] | np.ndarray | None = None
) -> Contributions:
    """Binary nominal alpha per label (chosen / not chosen), mean over defined labels.

    The multi-label variant quality.compute reports with more than two annotators ("binary
    per label, mean over labels"): per unit, n = raters present (pairable units only), n_1 =
    raters who chose the label, ``D = 2 n_1 (n - n_1) / (n - 1)``. A rater's None (missing)
    is not a rating; ``set()`` is a rating of "not chosen" for every label.
    """
    n = ratings.n_items
    mask = _subset_mask(subset, n)
    present = (ratings.raters >= 0) & mask[:, None]
    m = present.sum(axis=1).astype(np.float64)
    pairable = m >= 2
    n1 = (ratings.members & present[..., None]).sum(axis=1).astype(np.float64)
    n1[~pairable] = 0.0
    m = np.where(pairable, m, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        d = np.where(pairable[:, None], 2.0 * n1 * (m[:, None] - n1) / (m[:, None] - 1.0), 0.0)
    stat = partial(mean_label_alpha_from_sums, n_labels=len(ratings.labels))
    return _columns_at(pairable, [m, *n1.T, *d.T], stat, "mean label alpha")


def _columns_at(pairable: np.ndarray, columns: list[np.ndarray], statistic, name: str) -> Contributions:
    """Dense contributions that are zero outside the pairable units, kept over those rows
    only (Contributions ``rows``): each column contiguous, counts as uint8 (compact_scores).
    An (items x columns) float64 matrix read column by column was most of a 1M-item AHA
    report's bootstrap (bench/scale.py)."""
    n = pairable.size
    rows = np.flatnonzero(pairable)
    if n < np.iinfo(np.int32).max:
        rows = rows.astype(np.int32)
    kept = [compact_scores(np.ascontiguousarray(c[rows], dtype=np.float64)) for c in columns]
    return Contributions(None, statistic, int(rows.size), name, columns=kept, rows=rows, size=n)


def pair_ids(
    ratings: Ratings | LabelRatings, subset: Sequence[bool] | np.ndarray | None = None
) -> list[tuple[Hashable, Hashable]]:
    """The annotator pairs, in column order, of the pairwise builders for these ratings."""
    mask = _subset_mask(subset, ratings.n_items)
    parts = list(_slot_pairs(ratings.raters, mask))
    _, unique = _pair_index(parts, len(ratings.rater_ids))
    r = len(ratings.rater_ids)
    return [(ratings.rater_ids[int(key // r)], ratings.rater_ids[int(key % r)]) for key in unique]


# ---------------------------------------------------------------------------------------
# The engine


def resample_counts(n_items: int, n: int = DEFAULT_RESAMPLES, seed: int = 0, *, block: int = _BLOCK):
    """Blocks of the weight matrix W: ``(rows, n_items)`` arrays, row r = how often each
    item is drawn in resample r = ``bincount`` of :func:`metrics.bootstrap.resample_indices`.

    ``uint8`` (16 x 1M = 16 MB per block) unless a count exceeds 255, which for
    ``n_items >= 256`` has probability below 1e-500 and is still handled (wider dtype).
    """
    if int(n_items) != n_items or n_items < 1:
        raise ValueError("n_items must be a positive integer")
    _check(n, 0.5)
    rng = np.random.default_rng(seed)
    n_items, n = int(n_items), int(n)
    for start in range(0, n, block):
        rows = min(block, n - start)
        out = np.zeros((rows, n_items), dtype=np.uint8)
        for j in range(rows):
            out = _count_into(out, j, rng.integers(0, n_items, size=n_items))
        yield out


_ONE = {np.dtype(np.uint8): np.uint8(1), np.dtype(np.int64): np.int64(1)}


def _count_into(out: np.ndarray, j: int, drawn: np.ndarray) -> np.ndarray:
    """Row ``j`` of ``out`` (zeros) := ``bincount(drawn)``; ``out`` itself, or a wider copy
    when a count does not fit its dtype. ``np.add.at`` straight into the uint8 row: 2.5 ms
    per 1M draws against 5.1 ms for ``bincount`` and the copy of its int64 result (numpy 2.4,
    bench/scale.py; the ufunc's fast path needs the value in the row's own dtype). A uint8
    count of 256 or more wraps, and then the row no longer sums to the number drawn: that
    row is counted again by ``bincount`` into an int64 copy of the block."""
    row = out[j]
    np.add.at(row, drawn, _ONE[out.dtype])
    if out.dtype == np.uint8 and int(row.sum(dtype=np.int64)) != drawn.size:
        out = out.astype(np.int64)
        out[j] = np.bincount(drawn, minlength=out.shape[1])
    return out


@dataclass
class _Stack:
    dtype: type
    sparse: bool
    parts: list = field(default_factory=list)  # sparse: column slices of the figures' matrices
    width: int = 0
    #: dense: the 1-D columns, read in place (a chunk of rows is cast into ``buffer``)
    columns: list = field(default_factory=list)
    chunks: list = field(default_factory=list)
    buffer: np.ndarray | None = None
    #: dense over some items only (Contributions.rows): those positions, and per chunk of
    #: items the slice of them (and of the columns) that falls in it
    rows: np.ndarray | None = None
    bounds: list = field(default_factory=list)
    #: the stacks over equal rows (any dtype) share one gather of their weights per chunk
    group: int = -1


def _exact_float32(values: np.ndarray, n_items: int) -> bool:
    """A column whose every partial sum is an integer below 2**24 (exact in float32)."""
    if values.dtype == bool:
        return n_items < _EXACT_FLOAT32
    if np.issubdtype(values.dtype, np.integer):
        vmax = max(abs(int(values.min())), int(values.max())) if values.size else 0  # no copy
        return vmax * n_items < _EXACT_FLOAT32
    vmax = float(np.abs(values).max()) if values.size else 0.0
    return bool((values == np.rint(values)).all()) and vmax * n_items < _EXACT_FLOAT32


def _column_split(matrix, n_items: int) -> tuple[np.ndarray, np.ndarray]:
    """Boolean per column: exact in float32 (integral values, max*n < 2**24)."""
    if sp.issparse(matrix):
        # On the stored entries and their column indices (CSR or CSC), with no CSC copy
        # of the matrix (at 1M items the label's kappa matrix and its column indices were ~30 MB).
        # Duplicate entries are summed first (as the product sums them).
        m = matrix if matrix.format in ("csr", "csc") else sp.csr_matrix(matrix)
        if not m.has_canonical_format:
            m = m.copy()
            m.sum_duplicates()
        k = m.shape[1]
        col = np.repeat(np.arange(k), np.diff(m.indptr)) if m.format == "csc" else m.indices
        data = m.data
        integral = np.ones(k, dtype=bool)
        vmax = np.zeros(k)
        if data.size:
            if not np.issubdtype(data.dtype, np.integer) and data.dtype != bool:
                integral[np.unique(col[data != np.rint(data)])] = False
            np.maximum.at(vmax, col, np.abs(data))
        exact = integral & (vmax * n_items < _EXACT_FLOAT32)
    else:
        arr = np.asarray(matrix)
        exact = np.fromiter((_exact_float32(arr[:, c], n_items) for c in range(arr.shape[1])), bool, arr.shape[1])
    return exact, ~exact


def _sparse_chunk(parts: list, i0: int, i1: int, dtype) -> sp.csr_matrix:
    """Rows ``i0:i1`` of the figures' sparse matrices side by side (their stack columns),
    transposed: (stack columns x rows) CSR of ``dtype``."""
    pieces = []
    for m, cols in parts:
        rows = m[i0:i1]
        pieces.append(rows if cols is None else rows[:, cols])
    out = pieces[0] if len(pieces) == 1 else sp.hstack(pieces, format="csr")
    return out.astype(dtype).T.tocsr()


def bootstrap_figures(
    figures: Mapping[str, Contributions],
    *,
    n: int = DEFAULT_RESAMPLES,
    seed: int = 0,
    level: float = 0.95,
    block: int = _BLOCK,
    chunk: int = _CHUNK,
) -> dict[str, Estimate]:
    """Point estimates and percentile CIs of many figures over one shared item bootstrap.

    All ``figures`` must have the same number of items (rows): they are figures of one
    report, resampled together (resample r draws the same items for every figure). ``n``
    resamples (default 1,000 at every size; 10,000 for Table 15-style comparisons) from
    :func:`metrics.bootstrap.resample_indices` with ``seed``. Per figure: the statistic on
    unit weights, the ``numpy.percentile`` (linear) CI at ``(1 -/+ level)/2`` over the
    resamples where it is defined, and the number dropped. Memory: O(block x items) for W
    plus the contributions; no (resamples x items) matrix is ever built, and dense
    contributions given as columns are read in place (a column several figures share is
    summed once).
    """
    _check(n, level)
    if not figures:
        return {}
    sizes = {c.shape[0] for c in figures.values()}
    if len(sizes) != 1:
        raise ValueError(f"figures of one report must share their items, got row counts {sorted(sizes)}")
    n_items = sizes.pop()
    names = list(figures)
    points = {name: figures[name].point() for name in names}
    values = {name: np.full(int(n), np.nan) for name in names}
    if n_items == 0:
        return {name: _estimate(points[name], values[name], figures[name].n_items, level) for name in names}

    stacks = {(dt, sparse): _Stack(dt, sparse) for dt in (np.float32, np.float64) for sparse in (False, True)}
    subsets: list[_Stack] = []  # dense columns over some rows: one stack per (rows, dtype)
    layout: dict[str, list] = {name: [] for name in names}  # (stack, figure cols, stack cols)
    shared: dict[int, tuple[_Stack, int]] = {}  # id of a dense column -> (stack, its stack column)

    def subset_stack(rows: np.ndarray, dtype) -> _Stack:
        # Figures over equal rows (fields under one condition) share a stack and its weights;
        # rows that are every item are no subset (AHA's is_hateful: a gather of every weight).
        if rows.size == n_items:
            return stacks[(dtype, False)]
        for st in subsets:
            if st.dtype is dtype and (st.rows is rows or np.array_equal(st.rows, rows)):
                return st
        group = next((st.group for st in subsets if st.rows is rows or np.array_equal(st.rows, rows)), len(subsets))
        st = _Stack(dtype, False, rows=rows, group=group)
        subsets.append(st)
        return st

    for name in names:
        fig = figures[name]
        if fig.columns is None and not sp.issparse(fig.matrix):
            fig = Contributions(None, fig.statistic, fig.n_items, fig.name, columns=np.asarray(fig.matrix).T)
        if fig.columns is not None:
            for c, col in enumerate(fig.columns):
                if id(col) not in shared:
                    dt = np.float32 if _exact_float32(col, n_items) else np.float64
                    st = stacks[(dt, False)] if fig.rows is None else subset_stack(fig.rows, dt)
                    st.columns.append(col)
                    shared[id(col)] = (st, st.width)
                    st.width += 1
                st, at = shared[id(col)]
                layout[name].append((st, np.array([c]), np.array([at])))
            continue
        m = fig.matrix
        for dt, cols_mask in zip((np.float32, np.float64), _column_split(m, n_items)):
            cols = np.nonzero(cols_mask)[0]
            if cols.size == 0:
                continue
            st = stacks[(dt, True)]
            st.parts.append((sp.csr_matrix(m), None if cols.size == m.shape[1] else cols))
            layout[name].append((st, cols, np.arange(st.width, st.width + cols.size)))
            st.width += cols.size
    active = [st for st in [*stacks.values(), *subsets] if st.width]
    starts = range(0, n_items, chunk)
    for st in active:
        if st.sparse:
            # Row chunks, transposed once (labels x items CSR): the product per block is then
            # one pass over the chunk's nonzeros, each a contiguous row of `block` weights.
            # Built chunk by chunk from the figures' own matrices (a whole stacked copy, then
            # its cast, were ~100 MB at 1M items).
            st.chunks = [_sparse_chunk(st.parts, i0, i0 + chunk, st.dtype) for i0 in starts]
            st.parts = []
        else:
            # Columns stay where they are (no (items x columns) copy: ~300 MB of float64 at
            # 1M items, bench/scale.py); each chunk of rows is cast into one small buffer.
            longest = min(chunk, n_items)
            if st.rows is not None:
                cut = np.searchsorted(st.rows, [*starts, n_items])
                st.bounds = list(zip(cut[:-1].tolist(), cut[1:].tolist()))
                longest = max((b - a for a, b in st.bounds), default=0)
            st.buffer = np.empty((st.width, longest), dtype=st.dtype)
    sparse_dtypes = {st.dtype for st in active if st.sparse}

    start = 0
    for counts in resample_counts(n_items, n, seed, block=block):
        rows = counts.shape[0]
        acc = {id(st): np.zeros((st.width, rows)) for st in active}
        for ci, i0 in enumerate(starts):
            block_w = counts[:, i0 : i0 + chunk]
            # Item-major weights (items x resamples) for the sparse products: one pass over a
            # chunk's nonzeros, each reading a contiguous row of weights. The dense products
            # take the weights as drawn (resamples x items), cast without a transpose, and
            # BLAS transposes in the product (buf @ w.T).
            item_major = {dt: block_w.T.astype(dt, order="C") for dt in sparse_dtypes}
            drawn: dict = {}  # (group, dtype) -> this chunk's weights of those rows
            for st in active:
                if st.sparse:
                    acc[id(st)] += st.chunks[ci] @ item_major[st.dtype]
                    continue
                if st.rows is None:
                    lo, hi = i0, i0 + chunk
                else:
                    lo, hi = st.bounds[ci]
                    if lo == hi:
                        continue
                wt = drawn.get((st.group, st.dtype))
                if wt is None:
                    raw = drawn.get((st.group, None))
                    if raw is None:
                        # The weights of this chunk's rows only (positions relative to the
                        # chunk), gathered once for the stacks of every dtype over them.
                        raw = block_w if st.rows is None else np.take(block_w, st.rows[lo:hi] - i0, axis=1)
                        drawn[(st.group, None)] = raw
                    wt = drawn[(st.group, st.dtype)] = raw.astype(st.dtype)
                buf = st.buffer[:, : wt.shape[1]]
                for j, col in enumerate(st.columns):
                    buf[j] = col[lo:hi]
                acc[id(st)] += buf @ wt.T
        for name in names:
            k = figures[name].shape[1]
            sums = np.zeros((rows, k))
            for st, fcols, scols in layout[name]:
                sums[:, fcols] = acc[id(st)][scols].T
            values[name][start : start + rows] = figures[name].statistic(sums)
        start += rows
    return {name: _estimate(points[name], values[name], figures[name].n_items, level) for name in names}


def _estimate(point: float | None, resampled: np.ndarray, n_items: int, level: float) -> Estimate:
    undefined = int((~np.isfinite(resampled)).sum())
    ci = percentile_interval(resampled, level) if point is not None else None
    return Estimate(point, ci, n_items, int(resampled.size), undefined, level, resampled)
