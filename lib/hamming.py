"""Exact near-duplicate pair search over 64-bit hashes, and groups of linked items.

:func:`near_duplicate_pairs` returns every pair within a Hamming threshold, exactly (the same
set as :func:`brute_force_pairs`), through multi-index hashing with the generalized pigeonhole
principle (see its docstring); it handles 1M clustered hashes in seconds where the brute force
needs n^2/2 = 5e11 popcounts. Kept instead of a library (faiss' binary multi-index hash)
because bench/dedup.py measures it ~21x faster at 1M with the identical pair set.

:func:`connected_groups` turns pairs into connected components labelled by their smallest
member (scipy's connected components). Pure: no Django.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import combinations

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

__all__ = [
    "SearchPlan",
    "brute_force_pairs",
    "connected_groups",
    "near_duplicate_groups",
    "near_duplicate_pairs",
    "plan_search",
]

HASH_BITS = 64
_MASK64 = (1 << 64) - 1

# --------------------------------------------------------------------------------------------
# Pair search
# --------------------------------------------------------------------------------------------


def _as_u64(hashes: np.ndarray | Sequence[int]) -> np.ndarray:
    """A 1-D contiguous ``uint64`` array.

    ``int64`` arrays are reinterpreted bit for bit (a 64-bit hash stored in a signed BIGINT
    column reads back negative when its top bit is set). Python sequences are converted int
    by int: ``np.asarray([2**64 - 1, 1])`` would silently give float64.
    """
    if isinstance(hashes, np.ndarray):
        arr = hashes
        if arr.ndim != 1:
            raise ValueError(f"hashes must be 1-D, got shape {arr.shape}")
        if arr.dtype == np.uint64:
            return np.ascontiguousarray(arr)
        if arr.dtype == np.int64:
            return np.ascontiguousarray(arr).view(np.uint64)
        if arr.dtype.kind in "iu":
            if arr.size and arr.min() < 0:
                raise ValueError("negative hashes are only accepted as int64 (two's complement)")
            return arr.astype(np.uint64)
        if arr.dtype != object:
            raise TypeError(f"hashes must be integers, got dtype {arr.dtype}")
        hashes = arr.tolist()

    def convert(x: object) -> int:
        v = int(x)  # type: ignore[call-overload]
        if not -(1 << 63) <= v <= _MASK64:
            raise ValueError(f"not a 64-bit hash: {x!r}")
        return v & _MASK64

    return np.fromiter((convert(x) for x in hashes), dtype=np.uint64)


def _empty_pairs() -> np.ndarray:
    return np.zeros((0, 2), dtype=np.int64)


def brute_force_pairs(hashes: np.ndarray | Sequence[int], threshold: int = 8) -> np.ndarray:
    """All pairs ``(i, j)``, ``i < j``, with ``popcount(h[i] ^ h[j]) <= threshold``, by full scan.

    Row blocks of the upper triangle are compared against all later hashes with a vectorized
    popcount (``np.bitwise_count``): n^2/2 distance evaluations, O(block x n) memory. It is
    the ground truth for the tests and the benchmark (about 3-4 ns per pair on one core: 20k
    hashes take ~0.6 s, 1M would take ~30 minutes). Rows come out lexicographically sorted.
    """
    h = _as_u64(hashes)
    t = _check_threshold(threshold)
    n = len(h)
    if n < 2:
        return _empty_pairs()
    block = max(16, min(256, (1 << 17) // n))  # 1-2.5 MB of xor per block: stays in cache
    out: list[np.ndarray] = []
    for i0 in range(0, n, block):
        i1 = min(n, i0 + block)
        dist = np.bitwise_count(h[i0:i1, None] ^ h[None, i0:])
        r, c = np.nonzero(dist <= t)
        keep = c > r  # column c is item i0 + c, row r is item i0 + r
        out.append(np.stack([r[keep] + i0, c[keep] + i0], axis=1))
    return np.concatenate(out).astype(np.int64, copy=False)


def _check_threshold(threshold: int) -> int:
    t = int(threshold)
    if t != threshold or t < 0:
        raise ValueError(f"threshold must be a non-negative integer, got {threshold!r}")
    return t


@dataclass(frozen=True)
class SearchPlan:
    """How :func:`near_duplicate_pairs` searches a set of distinct hashes.

    ``method`` is ``"brute"`` (small inputs) or ``"mih"``: the 64 bits are cut into
    ``len(widths)`` disjoint substrings (most significant first) and substring ``s`` is
    searched with radius ``radii[s]``; ``sum(r + 1 for r in radii) > threshold``.
    ``cost_ns`` is the cost model's estimate for uniformly random hashes.
    """

    method: str
    widths: tuple[int, ...] = ()
    radii: tuple[int, ...] = ()
    cost_ns: float = 0.0

    def describe(self) -> str:
        if self.method == "brute":
            return "brute force (vectorized popcount)"
        parts = ", ".join(f"{w} bits r={r}" for w, r in zip(self.widths, self.radii))
        return f"multi-index hashing, {len(self.widths)} substrings ({parts})"


# Cost model constants, nanoseconds, measured on one core of the development VM (numpy 2.4).
_NS_BRUTE_PAIR = 4.0  # one xor + popcount + compare in brute_force_pairs
_NS_PROBE = 15.0  # one neighbour key looked up (xor, table gather, compare, compress)
_NS_CANDIDATE = 30.0  # one candidate pair enumerated and verified (gathers, xor, popcount)
_NS_TABLE_SLOT = 1.0  # dense lookup table allocation per slot
_NS_NUMPY_CALL = 40_000.0  # fixed overhead per probe mask (a handful of numpy calls)
_DENSE_MAX_BITS = 24  # dense key -> bucket table up to 2^24 int32 slots (64 MB)


def _split_plan(m: int, t: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Widths and radii for m substrings: widths as equal as possible; radii sum to t - m + 1.

    Generalized pigeonhole: if ``d(x, y) <= t`` and the bits are split into m parts, some
    part s has ``d_s(x, y) <= r_s`` whenever ``sum(r_s + 1) > t`` -- otherwise every part
    would differ in at least ``r_s + 1`` bits and the total would exceed t. With m = t + 1 the
    radii are all 0 (exact substring match, the classic scheme).
    """
    widths = tuple(HASH_BITS // m + (1 if i < HASH_BITS % m else 0) for i in range(m))
    budget = max(0, t - m + 1)
    radii = tuple(budget // m + (1 if i < budget % m else 0) for i in range(m))
    return widths, radii


def plan_search(n: int, threshold: int) -> SearchPlan:
    """Pick the cheapest exact strategy for ``n`` distinct hashes under a simple cost model.

    For m substrings of w bits searched with radius r, each distinct key probes
    ``P = sum_{k<=r} C(w, k)`` neighbour keys (half of them, as each unordered key pair is
    probed once) and, for uniform hashes, about ``n^2/2 * P / 2^w`` candidate pairs reach
    verification. Few long substrings mean many probes, many short ones mean many candidates:
    for n = 1M and threshold 8 the optimum is 3 substrings of 22/21/21 bits with radius 2
    (~7e8 probes, ~1.4e8 candidates), whereas the classic 9 exact-match substrings of 7 bits
    would verify ~4e10 candidates (128 buckets of ~8k hashes each).
    """
    t = _check_threshold(threshold)
    best = SearchPlan("brute", cost_ns=n * (n - 1) / 2 * _NS_BRUTE_PAIR + 1e5)
    if t >= HASH_BITS:
        return best
    pairs = n * (n - 1) / 2
    for m in range(1, min(t + 1, HASH_BITS) + 1):
        widths, radii = _split_plan(m, t)
        cost = 0.0
        for w, r in zip(widths, radii):
            probes = sum(math.comb(w, k) for k in range(r + 1))
            if w <= _DENSE_MAX_BITS:
                probe_ns = _NS_PROBE
                cost += (1 << w) * _NS_TABLE_SLOT
            else:
                probe_ns = _NS_PROBE * max(1.0, math.log2(max(n, 2)))
            cost += n * (probes - 1) / 2 * probe_ns + probes * _NS_NUMPY_CALL
            cost += min(pairs, pairs * probes / 2.0**w) * _NS_CANDIDATE
        if cost < best.cost_ns:
            best = SearchPlan("mih", widths, radii, cost)
    return best


def _cross_positions(
    a_start: np.ndarray, a_len: np.ndarray, b_start: np.ndarray, b_len: np.ndarray, chunk: int
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Every (a member, b member) position pair for bucket pairs k, in chunks of <= chunk.

    Bucket k of side a is ``positions a_start[k] .. a_start[k] + a_len[k] - 1`` (likewise b).
    The flat index over all ``sum(a_len * b_len)`` pairs is cut into fixed-size windows, so a
    single huge bucket (thousands of near-identical hashes) never materializes more than
    ``chunk`` pairs at once.
    """
    if len(a_start) == 0:
        return
    a_start = a_start.astype(np.int64, copy=False)
    b_start = b_start.astype(np.int64, copy=False)
    counts = a_len.astype(np.int64) * b_len.astype(np.int64)
    single = counts == 1
    if single.all():
        for lo in range(0, len(a_start), chunk):
            yield a_start[lo : lo + chunk], b_start[lo : lo + chunk]
        return
    if single.any():  # the common case (one hash per bucket) without the index arithmetic
        sa, sb = a_start[single], b_start[single]
        for lo in range(0, len(sa), chunk):
            yield sa[lo : lo + chunk], sb[lo : lo + chunk]
        many = ~single
        a_start, b_start, counts = a_start[many], b_start[many], counts[many]
        b_len = b_len[many]
    b_len = b_len.astype(np.int64, copy=False)
    ends = np.cumsum(counts)
    total = int(ends[-1])
    for lo in range(0, total, chunk):
        hi = min(total, lo + chunk)
        k0 = int(np.searchsorted(ends, lo, side="right"))
        k1 = int(np.searchsorted(ends, hi - 1, side="right")) + 1
        begin = ends[k0:k1] - counts[k0:k1]
        take = np.minimum(ends[k0:k1], hi) - np.maximum(begin, lo)
        local = np.repeat(np.arange(k1 - k0), take)
        offset = np.arange(lo, hi, dtype=np.int64) - begin[local]
        width = b_len[k0:k1][local]
        ia = offset // width
        yield a_start[k0:k1][local] + ia, b_start[k0:k1][local] + (offset - ia * width)


@dataclass
class _Substring:
    """The distinct hashes sorted and bucketed by one substring key.

    Positions refer to the sorted order: bucket k holds positions ``start[k] ..
    start[k] + count[k] - 1``, ``hashes[p]`` is the full hash at position p and ``order[p]``
    its index in the distinct-hash array.
    """

    shift: int
    width: int
    radius: int
    mask64: np.uint64  # the substring's bits in place, for the per-substring distance
    order: np.ndarray  # position -> distinct-hash index
    hashes: np.ndarray  # position -> full hash (u[order]), so verification needs no indirection
    sorted_keys: np.ndarray  # position -> substring key (ascending)
    keys: np.ndarray  # bucket -> key (ascending, distinct)
    start: np.ndarray  # bucket -> first position
    count: np.ndarray  # bucket -> size
    later: np.ndarray  # position -> members after it in its bucket
    table: np.ndarray | None  # dense key -> bucket (or -1), when 2^width is small enough

    @classmethod
    def build(cls, u: np.ndarray, shift: int, width: int, radius: int) -> _Substring:
        field = np.uint64((1 << width) - 1)
        key = (u >> np.uint64(shift)) & field
        order = np.argsort(key, kind="stable")
        sorted_keys = key[order]
        boundary = np.r_[True, sorted_keys[1:] != sorted_keys[:-1]]
        start = np.flatnonzero(boundary)
        count = np.diff(np.r_[start, len(u)])
        bucket_of = np.cumsum(boundary) - 1
        later = start[bucket_of] + count[bucket_of] - 1 - np.arange(len(u))
        keys = sorted_keys[start]
        table = None
        if width <= _DENSE_MAX_BITS and radius > 0:
            table = np.full(1 << width, -1, dtype=np.int32)
            table[keys] = np.arange(len(keys), dtype=np.int32)
        return cls(
            shift,
            width,
            radius,
            np.uint64(int(field) << shift),
            order,
            u[order],
            sorted_keys,
            keys,
            start,
            count,
            later,
            table,
        )

    def lookup(self, probe: np.ndarray) -> np.ndarray:
        """Bucket of each probed key, -1 when absent (table gather, or binary search if wide)."""
        if self.table is not None:
            return self.table[probe]
        pos = np.searchsorted(self.keys, probe)
        pos[pos == len(self.keys)] = 0
        return np.where(self.keys[pos] == probe, pos, -1)

    def masks(self, high_bit: int) -> Iterator[np.uint64]:
        """Probe masks of 1..radius bits whose highest bit is ``high_bit``."""
        bit = 1 << high_bit
        for k in range(self.radius):
            for lower in combinations(range(high_bit), k):
                yield np.uint64(bit | sum(1 << b for b in lower))

    def candidates(self, high_bit: int, chunk: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Position pairs (p, q) whose keys differ in <= radius bits, the highest being high_bit.

        ``high_bit == -1`` yields the pairs of equal keys (p < q in one bucket). Otherwise only
        positions whose key has ``high_bit`` clear probe ``key ^ mask``, so each unordered pair
        of buckets is met once, from the side without the bit. A hit names the other bucket;
        its members are enumerated by rank (all buckets at rank 0, those with > 1 member at rank
        1, ...), so the work is proportional to the candidates and a huge bucket -- thousands
        of hashes sharing the substring -- only lengthens the rank loop, never the arrays.
        Hits are gathered over masks up to ``chunk`` entries before they are expanded.
        """
        if high_bit < 0:
            p = np.flatnonzero(self.later > 0)
            left = self.later[p]
            rank = 1
            while len(p):
                yield p, p + rank
                keep = left > rank
                p, left = p[keep], left[keep]
                rank += 1
            return
        bit = np.uint64(1 << high_bit)
        pos = np.flatnonzero((self.sorted_keys & bit) == 0)
        base = self.sorted_keys[pos]
        pa_parts: list[np.ndarray] = []
        kb_parts: list[np.ndarray] = []
        pending = 0
        masks = list(self.masks(high_bit))
        for i, mask in enumerate(masks):
            kb = self.lookup(base ^ mask)
            hit = np.flatnonzero(kb >= 0)
            pa_parts.append(pos[hit])
            kb_parts.append(kb[hit])
            pending += len(hit)
            if pending < chunk and i + 1 < len(masks):
                continue
            pa = np.concatenate(pa_parts)
            kb = np.concatenate(kb_parts)
            pa_parts, kb_parts, pending = [], [], 0
            pb, size = self.start[kb], self.count[kb]
            yield pa, pb
            more = np.flatnonzero(size > 1)
            pa, pb, size = pa[more], pb[more], size[more]
            rank = 1
            while len(pa):
                yield pa, pb + rank
                keep = size > rank + 1
                pa, pb, size = pa[keep], pb[keep], size[keep]
                rank += 1


def _search_task(subs: list[_Substring], s: int, high_bits: Sequence[int], t: int, chunk: int) -> np.ndarray:
    """Verified pairs of distinct-hash indices first found in substring s (given high bits).

    A candidate is kept if its full distance is <= t (vectorized popcount) and no earlier
    substring s' < s is within its radius -- that substring reports the pair -- so every pair
    is reported exactly once without a global de-duplication of candidates.
    """
    sub = subs[s]
    found: list[np.ndarray] = []
    for high_bit in high_bits:
        for pa, pb in sub.candidates(high_bit, chunk):
            ok = np.flatnonzero(np.bitwise_count(sub.hashes[pa] ^ sub.hashes[pb]) <= t)
            if not len(ok):
                continue
            pa, pb = pa[ok], pb[ok]
            if s:
                z = sub.hashes[pa] ^ sub.hashes[pb]
                first = np.ones(len(z), dtype=bool)
                for prev in subs[:s]:
                    first &= np.bitwise_count(z & prev.mask64) > prev.radius
                pa, pb = pa[first], pb[first]
            x, y = sub.order[pa], sub.order[pb]
            found.append(np.stack([np.minimum(x, y), np.maximum(x, y)], axis=1))
    return np.concatenate(found) if found else _empty_pairs()


def _distinct_pairs(u: np.ndarray, t: int, plan: SearchPlan, workers: int, chunk: int) -> np.ndarray:
    """Pairs (a, b), a < b, of indices into the distinct hashes u within distance t."""
    if plan.method == "brute":
        return brute_force_pairs(u, t)
    subs: list[_Substring] = []
    shift = HASH_BITS
    for width, radius in zip(plan.widths, plan.radii):
        shift -= width
        subs.append(_Substring.build(u, shift, width, radius))
    # Tasks: (substring, its high bits). Probing cost grows with the high bit (more lower-bit
    # combinations), so high bits are dealt round-robin to balance the workers.
    tasks: list[tuple[int, list[int]]] = []
    n_groups = max(1, workers)
    for s, sub in enumerate(subs):
        bits = [-1] + list(range(sub.width if sub.radius > 0 else 0))
        for g in range(n_groups):
            if bits[g::n_groups]:
                tasks.append((s, bits[g::n_groups]))

    def run(task: tuple[int, list[int]]) -> np.ndarray:
        return _search_task(subs, task[0], task[1], t, chunk)

    if workers > 1:
        # numpy releases the GIL inside its array loops, so threads scale without copying data
        # and without child processes (which Celery's daemonic workers may not create).
        with ThreadPoolExecutor(max_workers=workers) as pool:
            parts = list(pool.map(run, tasks))
    else:
        parts = [run(task) for task in tasks]
    return np.concatenate(parts) if parts else _empty_pairs()


def near_duplicate_pairs(
    hashes: np.ndarray | Sequence[int],
    threshold: int = 8,
    *,
    workers: int = 1,
    plan: SearchPlan | None = None,
    chunk: int = 1 << 21,
) -> np.ndarray:
    """All pairs within ``threshold`` bits, exactly: shape (k, 2), ``i < j``, lexicographic.

    Identical to :func:`brute_force_pairs`, computed by multi-index hashing:

    1. Identical hashes are collapsed (``np.unique``); duplicates of one hash are all mutually
       paired at the end, so many copies of a template never enter the search.
    2. The 64 bits are cut into m disjoint substrings with radii r_s, ``sum(r_s + 1) > t``
       (generalized pigeonhole, see :func:`plan_search`): every pair within t bits is within
       r_s bits on at least one substring. m = t + 1 with r = 0 is the classic exact-match
       scheme, but its 7-bit substrings for t = 8 make buckets of n/128 hashes; the cost
       model usually picks 3 substrings of ~21 bits with radius 2 for large n.
    3. Per substring, hashes are sorted into buckets by key and the keys indexed in a dense
       2^w table. Each hash probes the keys within r_s bits of its own (one direction per
       key pair); members of a hit bucket are enumerated by rank, so a bucket of 10k
       near-identical hashes costs a longer loop, never a 10^8-element array (hits are
       expanded in batches of at most ``chunk``). Candidates are verified with a vectorized
       popcount on the full 64 bits.
    4. A pair is reported by the first substring within its radius only, so no global
       de-duplication of candidates is needed.

    Cost for 1M clustered hashes and t = 8: ~8 s on one core of the development VM (~5 s with
    ``workers=2``), ~0.5 GB peak; memory is O(n + output + chunk). ``workers > 1`` runs
    substring/high-bit tasks on threads (numpy releases the GIL). ``plan`` overrides the cost
    model (tests use it to exercise every substring layout). ``threshold >= 64`` returns every
    pair (n(n-1)/2 rows: mind the memory). ``int64`` input is read as the two's complement
    bit pattern.
    """
    h = _as_u64(hashes)
    t = _check_threshold(threshold)
    n = len(h)
    if n < 2:
        return _empty_pairs()
    if t >= HASH_BITS:
        i, j = np.triu_indices(n, 1)
        return np.stack([i, j], axis=1).astype(np.int64, copy=False)
    u, inverse = np.unique(h, return_inverse=True)
    inverse = inverse.reshape(-1)
    plan = plan or plan_search(len(u), t)
    if plan.method == "mih" and (sum(plan.widths) != HASH_BITS or sum(r + 1 for r in plan.radii) <= t):
        raise ValueError(f"plan does not cover 64 bits with sum(r + 1) > {t}: {plan}")
    distinct = _distinct_pairs(u, t, plan, max(1, int(workers)), chunk) if len(u) > 1 and t > 0 else _empty_pairs()
    if len(u) == n:  # no repeated hash: distinct-hash indices map to items one to one
        item_of = np.empty(n, dtype=np.int64)
        item_of[inverse] = np.arange(n)
        i, j = item_of[distinct[:, 0]], item_of[distinct[:, 1]]
        return _sorted_pairs(np.minimum(i, j), np.maximum(i, j), n)
    # Members of each distinct hash, in item order (CSR).
    members = np.argsort(inverse, kind="stable")
    count = np.bincount(inverse, minlength=len(u))
    start = np.r_[0, np.cumsum(count)[:-1]]
    ii: list[np.ndarray] = []
    jj: list[np.ndarray] = []
    a, b = distinct[:, 0], distinct[:, 1]
    for pa, pb in _cross_positions(start[a], count[a], start[b], count[b], chunk):
        x, y = members[pa], members[pb]
        ii.append(np.minimum(x, y))
        jj.append(np.maximum(x, y))
    dup = np.flatnonzero(count > 1)
    for pa, pb in _cross_positions(start[dup], count[dup], start[dup], count[dup], chunk):
        keep = pa < pb  # members ascend within a group, so members[pa] < members[pb]
        ii.append(members[pa[keep]])
        jj.append(members[pb[keep]])
    if not ii:
        return _empty_pairs()
    return _sorted_pairs(np.concatenate(ii), np.concatenate(jj), n)


def _sorted_pairs(i: np.ndarray, j: np.ndarray, n: int) -> np.ndarray:
    """Stack (i, j) rows sorted lexicographically (one sort on the key i * n + j)."""
    key = i.astype(np.int64) * n + j.astype(np.int64)
    key.sort()
    out = np.empty((len(key), 2), dtype=np.int64)
    np.divmod(key, n, out=(out[:, 0], out[:, 1]))
    return out


# --------------------------------------------------------------------------------------------
# Groups
# --------------------------------------------------------------------------------------------


def connected_groups(n: int, pairs: np.ndarray | Iterable[tuple[int, int]]) -> np.ndarray:
    """Connected components of the graph on 0..n-1 given by ``pairs``; id = smallest member.

    scipy's ``connected_components`` labels components arbitrarily; relabelling each by its
    smallest member makes the id deterministic and independent of the pair order.
    """
    edges = np.asarray(pairs if isinstance(pairs, np.ndarray) else list(pairs), dtype=np.int64).reshape(-1, 2)
    if len(edges) == 0:
        return np.arange(n, dtype=np.int64)
    if edges.min() < 0 or edges.max() >= n:
        raise ValueError("pair index out of range")
    graph = coo_matrix((np.ones(len(edges), dtype=np.int8), (edges[:, 0], edges[:, 1])), shape=(n, n))
    count, labels = connected_components(graph, directed=False)
    smallest = np.full(count, n, dtype=np.int64)
    np.minimum.at(smallest, labels, np.arange(n, dtype=np.int64))
    return smallest[labels]


def near_duplicate_groups(hashes: np.ndarray | Sequence[int], threshold: int = 8, **kwargs: object) -> np.ndarray:
    """Group id (smallest member index) per hash, linking every pair within ``threshold``.

    These are candidate groups for human review, not verified ones: a recurring template with a
    different caption is a distinct sample (Meme3W A.3).
    """
    h = _as_u64(hashes)
    return connected_groups(len(h), near_duplicate_pairs(h, threshold, **kwargs))  # type: ignore[arg-type]
