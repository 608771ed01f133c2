"""Bounding-box metrics for ``visual_region`` (Meme3W "Metrics", Appendix B.4; SPEC section 3).

A box is ``[x1, y1, x2, y2]`` (four finite real numbers; the meme3w schema uses integers in
[0, 1000] with x1 < x2, y1 < y2, but these functions work on any finite coordinates). A region
is a list of boxes; ``[]`` (or ``None``) is an absent region.

Decisions, shared by the scalar and batch forms:

* IoU is continuous (areas of real rectangles, no "+1 pixel" convention).
* Degenerate boxes: a box with ``x2 <= x1`` or ``y2 <= y1`` has zero area. Inverted boxes are
  *not* re-ordered (that would guess what an annotator meant; the schema engine rejects them
  at input, and :mod:`metrics.records` treats them as malformed predictions).
* Zero union: when both sides have zero total area, IoU is 1.0 if they are the same
  coordinates (the same set of boxes for ``set_iou``) and 0.0 otherwise, so that ``iou(a, a)
  == 1`` holds for every box and identical annotations always agree.
* Duplicated boxes: they change nothing in ``enclosing``/``enclosing_iou``/``set_iou`` (a
  union is a union) but they do count in ``bipartite_match``, which requires equal box counts
  (``[b, b]`` vs ``[b]`` is False) -- that rule is about one-to-one instances (Table 14).
* Absence (``enclosing_iou``, ``set_iou``): both regions empty -> 1.0, exactly one empty ->
  0.0, the paper's primary rule ("for a field that is absent in the gold record, the
  prediction must also indicate absence").
* Non-finite coordinates or boxes without exactly four numbers raise ``ValueError``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import chain

import numpy as np
from scipy.optimize import linear_sum_assignment

__all__ = [
    "Box",
    "iou",
    "enclosing",
    "enclosing_iou",
    "bipartite_match",
    "set_iou",
    "iou_batch",
    "enclosing_batch",
    "enclosing_iou_batch",
]

Box = Sequence[float]


def _box(b: Box) -> tuple[float, float, float, float]:
    if isinstance(b, (str, bytes)) or len(b) != 4:
        raise ValueError(f"a box is [x1, y1, x2, y2], got {b!r}")
    x1, y1, x2, y2 = (float(v) for v in b)
    if not all(math.isfinite(v) for v in (x1, y1, x2, y2)):
        raise ValueError(f"box has non-finite coordinates: {b!r}")
    return x1, y1, x2, y2


def _region(boxes: Sequence[Box] | None) -> list[tuple[float, float, float, float]]:
    return [] if boxes is None else [_box(b) for b in boxes]


def _iou(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> float:
    # Same operations in the same order as iou_batch, so scalar and batch agree bit for bit.
    iw = min(a[2], b[2]) - max(a[0], b[0])
    ih = min(a[3], b[3]) - max(a[1], b[1])
    inter = iw * ih if iw > 0.0 and ih > 0.0 else 0.0
    area_a = max(a[2] - a[0], 0.0) * max(a[3] - a[1], 0.0)
    area_b = max(b[2] - b[0], 0.0) * max(b[3] - b[1], 0.0)
    union = area_a + area_b - inter
    if union <= 0.0:
        return 1.0 if a == b else 0.0
    return min(inter / union, 1.0)


def iou(a: Box, b: Box) -> float:
    """Intersection over union of two ``[x1, y1, x2, y2]`` boxes, in [0, 1], symmetric.

    Zero-area boxes: IoU is 0.0 unless both have zero area and identical coordinates (1.0).
    """
    return _iou(_box(a), _box(b))


def _enclosing(boxes: list[tuple[float, float, float, float]]) -> tuple[float, float, float, float] | None:
    if not boxes:
        return None
    return (
        min(b[0] for b in boxes),
        min(b[1] for b in boxes),
        max(b[2] for b in boxes),
        max(b[3] for b in boxes),
    )


def enclosing(boxes: Sequence[Box] | None) -> list[float] | None:
    """Minimum axis-aligned rectangle enclosing all ``boxes`` (floats), or None when empty.

    Meme3W "Metrics": "IoU is computed between the minimum enclosing rectangles of all
    predicted and gold boxes". Order and duplicates do not matter.
    """
    e = _enclosing(_region(boxes))
    return None if e is None else list(e)


def enclosing_iou(a: Sequence[Box] | None, b: Sequence[Box] | None) -> float:
    """IoU of the minimum enclosing rectangles of two regions (the paper's primary rule).

    Both empty -> 1.0, exactly one empty -> 0.0. Used with tau_B = 0.5 in JRA (Eq. 13), at 0.5
    and 0.75 in Table 1 ("IoU50", "IoU75"), and at 0.75 for region agreement (Stage 2:
    "IoU@0.75 of 0.818") and adjudication routing.
    """
    ea, eb = _enclosing(_region(a)), _enclosing(_region(b))
    if ea is None or eb is None:
        return 1.0 if ea is None and eb is None else 0.0
    return _iou(ea, eb)


def _iou_matrix(a: list[tuple[float, float, float, float]], b: list[tuple[float, float, float, float]]) -> np.ndarray:
    return np.array([[_iou(x, y) for y in b] for x in a], dtype=np.float64).reshape(len(a), len(b))


def bipartite_match(a: Sequence[Box] | None, b: Sequence[Box] | None, tau: float) -> bool:
    """One-to-one box matching rule of Meme3W Appendix B.4 / Table 14 ("bipartite set matching").

    True iff both regions have the same number of boxes and some one-to-one assignment that
    maximizes the total IoU has every matched pair with IoU >= ``tau``. Both empty -> True;
    different counts (including one empty) -> False, since the rule allows "no unmatched
    boxes".

    "Some" maximizing assignment: when several assignments tie on total IoU (duplicate or
    disjoint boxes), the answer does not depend on which one a solver happens to return. It
    is decided by a second assignment restricted to pairs with IoU >= ``tau``: True iff that
    restricted problem has a perfect matching whose total equals the unrestricted maximum
    (to within 1e-12 per pair, to absorb summation-order rounding).
    """
    ra, rb = _region(a), _region(b)
    if len(ra) != len(rb):
        return False
    if not ra:
        return True
    m = _iou_matrix(ra, rb)
    rows, cols = linear_sum_assignment(m, maximize=True)
    allowed = m >= tau
    if allowed[rows, cols].all():
        return True
    best = float(m[rows, cols].sum())
    k = len(ra)
    # A forbidden pair costs more than any assignment can gain (IoUs sum to at most k), so
    # the restricted optimum uses a forbidden pair only when no perfect allowed matching exists.
    restricted = np.where(allowed, m, -(k + 1.0))
    rows, cols = linear_sum_assignment(restricted, maximize=True)
    if not allowed[rows, cols].all():
        return False
    return float(m[rows, cols].sum()) >= best - 1e-12 * k


def _union_cells(boxes: list[tuple[float, float, float, float]], xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    # A cell of the compressed grid lies inside a box iff its corners do: the grid contains
    # every box edge, so cells are never partly covered.
    cover = np.zeros((len(xs) - 1, len(ys) - 1), dtype=bool)
    for x1, y1, x2, y2 in boxes:
        in_x = (x1 <= xs[:-1]) & (xs[1:] <= x2)
        in_y = (y1 <= ys[:-1]) & (ys[1:] <= y2)
        cover |= in_x[:, None] & in_y[None, :]
    return cover


def set_iou(a: Sequence[Box] | None, b: Sequence[Box] | None) -> float:
    """Exact area IoU of the unions of two box sets (Meme3W B.4 "geometric set IoU").

    ``area((U a) & (U b)) / area((U a) | (U b))``, computed exactly by coordinate compression:
    all box edges cut the plane into a grid whose cells are either fully inside or fully
    outside each union, and areas are sums of cell areas (no rasterization, no polygon
    library). Both empty -> 1.0, one empty -> 0.0. Invariant to box order and duplicates. If
    both unions have zero area (only degenerate boxes), 1.0 iff the two sets of boxes are
    equal, else 0.0.
    """
    ra, rb = _region(a), _region(b)
    if not ra or not rb:
        return 1.0 if not ra and not rb else 0.0
    xs = np.unique([v for x1, _, x2, _ in ra + rb for v in (x1, x2)])
    ys = np.unique([v for _, y1, _, y2 in ra + rb for v in (y1, y2)])
    if len(xs) < 2 or len(ys) < 2:
        return 1.0 if set(ra) == set(rb) else 0.0
    cell_area = np.diff(xs)[:, None] * np.diff(ys)[None, :]
    ca, cb = _union_cells(ra, xs, ys), _union_cells(rb, xs, ys)
    union = float(cell_area[ca | cb].sum())
    if union <= 0.0:
        return 1.0 if set(ra) == set(rb) else 0.0
    return min(float(cell_area[ca & cb].sum()) / union, 1.0)


# ---------------------------------------------------------------------------------------
# Batch forms: one numpy pass over n items instead of n Python calls.


def _as_box_array(x: np.ndarray | Sequence[Box], name: str) -> np.ndarray:
    arr = np.asarray(x, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != 4:
        raise ValueError(f"{name} must have shape (n, 4), got {arr.shape}")
    return arr


def _iou_arrays(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    iw = np.minimum(a[:, 2], b[:, 2]) - np.maximum(a[:, 0], b[:, 0])
    ih = np.minimum(a[:, 3], b[:, 3]) - np.maximum(a[:, 1], b[:, 1])
    inter = np.where((iw > 0.0) & (ih > 0.0), iw * ih, 0.0)
    area_a = np.maximum(a[:, 2] - a[:, 0], 0.0) * np.maximum(a[:, 3] - a[:, 1], 0.0)
    area_b = np.maximum(b[:, 2] - b[:, 0], 0.0) * np.maximum(b[:, 3] - b[:, 1], 0.0)
    union = area_a + area_b - inter
    positive = union > 0.0
    out = np.divide(inter, union, out=np.zeros_like(inter), where=positive)
    np.minimum(out, 1.0, out=out)
    zero_union = ~positive
    if zero_union.any():
        out[zero_union] = np.all(a[zero_union] == b[zero_union], axis=1).astype(np.float64)
    return out


def iou_batch(a: np.ndarray | Sequence[Box], b: np.ndarray | Sequence[Box]) -> np.ndarray:
    """Row-wise ``iou`` of two ``(n, 4)`` arrays -> ``(n,)`` float64; equal to the scalar form.

    Raises ``ValueError`` on shape mismatch or non-finite coordinates.
    """
    a, b = _as_box_array(a, "a"), _as_box_array(b, "b")
    if a.shape != b.shape:
        raise ValueError(f"shape mismatch: {a.shape} != {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("boxes have non-finite coordinates")
    return _iou_arrays(a, b)


def enclosing_batch(regions: Sequence[Sequence[Box] | None]) -> np.ndarray:
    """Enclosing rectangle of each region -> ``(n, 4)`` float64, a row of NaN for an empty one.

    Built from one flat array of all boxes and ``np.minimum/maximum.reduceat`` over the
    per-region offsets, so 1M regions cost a few hundred milliseconds, dominated by reading
    the Python lists.
    """
    n = len(regions)
    counts = np.fromiter((0 if r is None else len(r) for r in regions), dtype=np.intp, count=n)
    boxes = list(chain.from_iterable(r for r in regions if r is not None and len(r)))
    if boxes and set(map(len, boxes)) != {4}:
        raise ValueError("every box must be [x1, y1, x2, y2]")
    flat = np.array(list(chain.from_iterable(boxes)), dtype=np.float64).reshape(-1, 4)
    if not np.isfinite(flat).all():
        raise ValueError("boxes have non-finite coordinates")
    out = np.full((n, 4), np.nan)
    nonempty = counts > 0
    if boxes:
        # Offsets of non-empty regions only: empty regions occupy no rows, so each reduceat
        # segment runs exactly over one region's boxes.
        starts = (np.cumsum(counts) - counts)[nonempty]
        out[nonempty, 0] = np.minimum.reduceat(flat[:, 0], starts)
        out[nonempty, 1] = np.minimum.reduceat(flat[:, 1], starts)
        out[nonempty, 2] = np.maximum.reduceat(flat[:, 2], starts)
        out[nonempty, 3] = np.maximum.reduceat(flat[:, 3], starts)
    return out


def enclosing_iou_batch(
    a: Sequence[Sequence[Box] | None] | np.ndarray, b: Sequence[Sequence[Box] | None] | np.ndarray
) -> np.ndarray:
    """``enclosing_iou`` for n paired regions -> ``(n,)`` float64; equal to the scalar form.

    ``a`` and ``b`` are sequences of regions (lists of boxes; ``[]``/None = absent), or
    already-computed ``(n, 4)`` enclosing arrays from :func:`enclosing_batch` (NaN row =
    absent), so a service can compute each annotator's rectangles once and reuse them.
    """
    ea = a if isinstance(a, np.ndarray) else enclosing_batch(a)
    eb = b if isinstance(b, np.ndarray) else enclosing_batch(b)
    ea, eb = _as_box_array(ea, "a"), _as_box_array(eb, "b")
    if ea.shape != eb.shape:
        raise ValueError(f"length mismatch: {len(ea)} != {len(eb)}")
    absent_a = np.isnan(ea).any(axis=1)
    absent_b = np.isnan(eb).any(axis=1)
    both = ~absent_a & ~absent_b
    out = np.where(absent_a & absent_b, 1.0, 0.0)
    out[both] = _iou_arrays(ea[both], eb[both])
    return out
