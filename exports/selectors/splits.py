"""The split plan of the next release: exact duplicates removed, groups, strata, the seeded
assignment and its integrity check (the allocation itself is exports.splitting).
"""

from __future__ import annotations

import hashlib
from array import array
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from django.db import connection
from django.db.models import Q, TextField
from django.db.models.fields.json import KeyTransform
from django.db.models.functions import Cast

from adjudication.models import GoldRecord
from core.streams import stream
from exports.models import NearDuplicatePair, PairStatus
from exports.selectors.duplicates import pair_counts
from exports.splitting import (
    SPLITS,
    IntegrityReport,
    check_ratios,
    exact_duplicate_groups,
    group_ids,
    integrity_check,
    split_shortfalls,
    stratified_group_split,
)
from exports.writers import json_loads
from lib.gcpause import gc_paused
from projects.fieldtypes import REGISTRY
from projects.models import Item, Project, Stage

NONE_LABEL = "(none)"
#: Item.split values (pinned by projects.workflow before a release) -> split codes.
PIN_CODES = {name: code for code, name in enumerate(SPLITS)} | {"validation": 1}


# ------------------------------------------------------------------------------------------
# Split plan
# ------------------------------------------------------------------------------------------


def _with_role(schema: dict, role: str) -> list[dict]:
    return [f for f in schema["fields"] if role in REGISTRY[f["type"]].roles]


def strata_fields(schema: dict) -> list[str]:
    """Stratification fields: the schema's first two fields whose type is a stratum (choices;
    meme3w: label and target_category; aha: is_hateful). None: one stratum."""
    return [f["name"] for f in _with_role(schema, "stratum")][:2]


def coco_fields(schema: dict) -> tuple[dict | None, dict | None]:
    """(region field, category field) for coco.json. The category is the category-typed field
    shown under the same condition as the boxes (meme3w: target_category), else the second one."""
    regions = _with_role(schema, "region")
    boxes = regions[0] if regions else None
    if boxes is None:
        return None, None
    choices = _with_role(schema, "category")
    same_condition = [f for f in choices if f.get("visible_if") and f.get("visible_if") == boxes.get("visible_if")]
    category = same_condition[0] if same_condition else (choices[1] if len(choices) > 1 else None)
    return boxes, category


def released_gold_queryset(*, project: Project):
    """Current gold of the project's items that may be released (not excluded by a lead)."""
    return GoldRecord.objects.filter(item__project=project, is_current=True).exclude(item__stage=Stage.EXCLUDED)


def order_key(seed: int, stable_key: str) -> int:
    """Seeded 64-bit order key of an item: same seed and data, same order, on any database."""
    return int.from_bytes(hashlib.blake2b(f"{seed}:{stable_key}".encode(), digest_size=8).digest(), "big")


class _Positions:
    """Position of an item id in the ascending ``ids``: a dict lookup per record (a numpy
    scalar searchsorted costs ~3 us, 7% of a release at 50k items) over a window of WINDOW ids
    that moves to where a lookup falls outside it: a release reads in item order, once per file
    family, so a pass costs one searchsorted per WINDOW ids and memory stays the window's (a
    dict of every id was ~2M objects, ~100 MB, at 1M items; bench/scale.py)."""

    WINDOW = 4096

    def __init__(self, ids: np.ndarray):
        self.ids = ids
        self._window: dict[int, int] = {}
        self._first = self._last = None

    def get(self, item_id: int) -> int | None:
        i = self._window.get(item_id)
        if i is not None:
            return i
        if self._last is not None and self._first <= item_id <= self._last:
            return None  # inside the window's range, not an id
        start = int(np.searchsorted(self.ids, item_id))
        if start >= len(self.ids):
            return None
        ids = self.ids[start : start + self.WINDOW].tolist()  # the next ids of an in-order pass
        self._window = dict(zip(ids, range(start, start + len(ids))))
        self._first, self._last = ids[0], ids[-1]
        return self._window.get(item_id)

    def __getitem__(self, item_id: int) -> int:
        i = self.get(item_id)
        if i is None:
            raise KeyError(item_id)
        return i


@dataclass
class SplitPlan:
    """Who is released, in which split, and why the others are not. Arrays are per project item
    (``node_ids`` ascending); see exports.splitting for the algorithm."""

    node_ids: np.ndarray
    released: np.ndarray
    splits: np.ndarray
    group_of: np.ndarray  # item id of the group's representative (smallest id), per node
    strata: np.ndarray
    strata_fields: list[str]
    strata_labels: list[tuple]
    excluded: list[dict]
    integrity: IntegrityReport
    pairs: dict
    ratios: tuple
    seed: int
    threshold: int
    edges_count: int
    sizes: dict = field(default_factory=dict)
    pinned: int = 0  # released items whose split a workflow stage pinned (Item.split)

    @property
    def shortfalls(self) -> list[dict]:
        """Splits with fewer items than the ratios ask for (exports.splitting.split_shortfalls)."""
        return split_shortfalls(sizes=self.sizes, ratios=self.ratios, total=int(self.released.sum()))

    @cached_property
    def _positions(self) -> _Positions:
        return _Positions(self.node_ids)

    @cached_property
    def _split_codes(self) -> bytes:
        # One byte per item (its split's index, len(SPLITS) when not released): indexing bytes
        # gives a cached small int, as fast as a list of the names, which was 8 MB at 1M items
        # in each process of a release (bench/scale.py).
        return np.where(self.released, self.splits, len(SPLITS)).astype(np.uint8).tobytes()

    _SPLIT_NAMES = (*SPLITS, None)

    def index_of(self, item_id: int) -> int | None:
        return self._positions.get(item_id)

    def split_of(self, item_id: int) -> str | None:
        """The item's split, or None when it is not released."""
        i = self._positions.get(item_id)
        return None if i is None else self._SPLIT_NAMES[self._split_codes[i]]

    def group_of_item(self, item_id: int) -> int:
        return int(self.group_of[self._positions[item_id]])

    @property
    def released_ids(self) -> np.ndarray:
        return self.node_ids[self.released]

    def stratum_table(self) -> list[dict]:
        """Per stratum: the stratum's values and its item count per split (released items)."""
        rows = []
        idx = np.flatnonzero(self.released)
        if not len(idx):
            return rows
        table = np.zeros((len(self.strata_labels), 3), dtype=np.int64)
        np.add.at(table, (self.strata[idx], self.splits[idx].astype(np.int64)), 1)
        for code, label in enumerate(self.strata_labels):
            counts = table[code].tolist()
            if sum(counts):
                rows.append(
                    {
                        "stratum": dict(zip(self.strata_fields, label)),
                        "counts": dict(zip(SPLITS, counts)),
                        "total": sum(counts),
                    }
                )
        rows.sort(key=lambda r: [str(v) for v in r["stratum"].values()])
        return rows

    def groups_summary(self, *, limit: int | None = None) -> list[dict]:
        """Multi-member groups among released items: representative, members, split."""
        idx = np.flatnonzero(self.released)
        # Only the items of groups with two released members or more: each such group has a
        # released member that is not its representative (ids are distinct). Sorting every
        # released item's group instead held ~90 MB of sort temporaries at 1M items, at the
        # end of the release (bench/scale.py).
        group = self.group_of[idx]
        linked = np.unique(group[group != self.node_ids[idx]])
        idx = idx[np.isin(group, linked)]
        del group
        # Members of a group are one run of a stable sort by representative (ascending items
        # within it): a mask over every item per group was quadratic, 23 s of a 1M-item
        # release's splits.json with 51k groups (bench/scale.py).
        order = np.argsort(self.group_of[idx], kind="stable")
        uniq, starts, counts = np.unique(self.group_of[idx][order], return_index=True, return_counts=True)
        out = []
        for g in np.flatnonzero(counts > 1).tolist():
            members = idx[order[starts[g] : starts[g] + counts[g]]]
            out.append(
                {
                    "group": int(uniq[g]),
                    "item_ids": self.node_ids[members].tolist(),
                    "split": SPLITS[self.splits[members[0]]],
                }
            )
            if limit is not None and len(out) >= limit:
                break
        return out

    def as_json(self, *, integrity: bool = True) -> dict:
        """splits.json (without per-item lists: every record carries its split)."""
        out = {
            "seed": self.seed,
            "ratios": dict(zip(SPLITS, [round(r, 6) for r in self.ratios])),
            "strata_fields": self.strata_fields,
            "sizes": self.sizes,
            "allocation": "largest remainder of the release's items over the ratios (every split asked for gets "
            "an item when there are enough), divided among strata by controlled rounding; near-duplicate groups "
            "kept whole; splits pinned on items by the workflow are kept",
            "pinned_items": self.pinned,
            "shortfalls": self.shortfalls,
            "by_stratum": self.stratum_table(),
            "excluded": self.excluded,
            "near_duplicates": {
                **self.pairs,
                "threshold": self.threshold,
                "rule": "pairs judged 'same' and unreviewed pairs within the threshold link items "
                "into one group; a group is assigned to one split",
            },
            "groups": self.groups_summary(),
        }
        if integrity:
            out["integrity"] = self.integrity.as_dict()
        return out


def _pixel_key(pixel_hash: str) -> int:
    return int(pixel_hash[:16], 16)


@gc_paused()
def split_plan(*, project: Project, chunk_size: int = 10_000) -> SplitPlan:
    """Compute the split assignment of the project's current gold (SPEC section 1 step 5).

    1. Released candidates: items with a current gold record, not excluded by a lead.
    2. Exact duplicates (same decoded pixels) among them: the earliest item is kept, the others
       are excluded with the reason (exports.splitting.exact_duplicate_groups).
    3. Groups: union-find over the near-duplicate pairs judged "same", the unreviewed pairs
       within the project's threshold (conservative) and the import's exact-duplicate links, on
       all project items, so a link through an item that is not released still counts.
    4. Stratified group split (exports.splitting) from project.split_seed.
    5. Integrity check of the result, recomputed from the raw links.

    Memory: a few numpy arrays per project item (about 40 bytes an item).
    """
    seed = project.split_seed
    rows = (
        Item.objects.filter(project=project)
        .order_by("id")
        .values_list("id", "pixel_hash", "duplicate_of_id", "import_key", "split")
    )
    # Arrays per chunk of rows, joined at the end: lists of every item's Python ints were
    # ~4M objects (+260 MB RSS that stays with the process) at 1M items (bench/scale.py).
    parts: list[tuple[np.ndarray, ...]] = []
    chunk: list[tuple] = []

    def convert() -> None:
        parts.append(
            (
                np.fromiter((r[0] for r in chunk), dtype=np.int64, count=len(chunk)),
                np.fromiter((_pixel_key(r[1]) for r in chunk), dtype=np.uint64, count=len(chunk)),
                np.fromiter((r[2] or -1 for r in chunk), dtype=np.int64, count=len(chunk)),
                np.fromiter((order_key(seed, r[3]) for r in chunk), dtype=np.uint64, count=len(chunk)),
                np.fromiter((PIN_CODES.get(r[4], -1) for r in chunk), dtype=np.int8, count=len(chunk)),
            )
        )
        chunk.clear()

    for row in stream(rows, chunk_size):
        chunk.append(row)
        if len(chunk) >= chunk_size:
            convert()
    convert()
    node_ids, pixel_arr, dup_arr, key_arr, pin_arr = (np.concatenate(column) for column in zip(*parts))
    parts.clear()
    n = len(node_ids)

    def index(item_ids: np.ndarray) -> np.ndarray:
        pos = np.searchsorted(node_ids, item_ids)
        pos = np.minimum(pos, max(n - 1, 0))
        found = node_ids[pos] == item_ids if n else np.zeros(len(item_ids), dtype=bool)
        return np.where(found, pos, -1)

    # 1. gold + strata
    fields = strata_fields(project.schema)
    eligible = np.zeros(n, dtype=bool)
    strata = np.zeros(n, dtype=np.int32)
    labels: dict[tuple, int] = {}
    # Key transforms, not the whole record: on PostgreSQL each value's JSON text, decoded once
    # per distinct text (strata have few values; Django's decoding per value was ~15% of the
    # plan at 1M items), elsewhere decoded values; None for null either way.
    gold = released_gold_queryset(project=project).order_by("item_id")
    as_text = connection.vendor == "postgresql"
    if as_text:
        texts = {f"s{k}": Cast(KeyTransform(name, "values"), TextField()) for k, name in enumerate(fields)}
        gold_rows = gold.annotate(**texts).values_list("item_id", *texts)
    else:
        gold_rows = gold.values_list("item_id", *[f"values__{name}" for name in fields])
    g_ids = array("q")  # raw int64s, not an object per item
    g_codes = array("q")
    codes: dict[tuple, int] = {}
    for item_id, *values in stream(gold_rows, chunk_size):
        key = tuple(values) if as_text else None  # texts (hashable); decoded values may be lists
        code = codes.get(key) if as_text else None
        if code is None:
            decoded = [json_loads(v) if v is not None else None for v in values] if as_text else values
            label = tuple(NONE_LABEL if v is None else str(v) for v in decoded)
            code = labels.setdefault(label, len(labels))
            if as_text:
                codes[key] = code
        g_ids.append(item_id)
        g_codes.append(code)
    if g_ids:
        pos = index(np.asarray(g_ids, dtype=np.int64))
        eligible[pos] = True
        strata[pos] = np.asarray(g_codes, dtype=np.int32)
    del g_ids, g_codes

    # 2. exact duplicates among the eligible: only hashes seen twice need their full value
    excluded: list[dict] = []
    released = eligible.copy()
    elig_idx = np.flatnonzero(eligible)
    if len(elig_idx):
        _, inverse, counts = np.unique(pixel_arr[elig_idx], return_inverse=True, return_counts=True)
        suspects = node_ids[elig_idx[counts[inverse.reshape(-1)] > 1]].tolist()
        if suspects:
            full = dict(Item.objects.filter(pk__in=suspects).values_list("id", "pixel_hash"))
            ordered = sorted(suspects)
            for indices in exact_duplicate_groups([full[i] for i in ordered]).values():
                kept = ordered[indices[0]]
                for k in indices[1:]:
                    removed = ordered[k]
                    released[index(np.asarray([removed]))[0]] = False
                    excluded.append(
                        {
                            "item_id": removed,
                            "duplicate_of": kept,
                            "reason": f"exact duplicate (same decoded pixels) of item {kept}, which is kept",
                        }
                    )
    excluded.sort(key=lambda e: e["item_id"])

    # 3. links
    threshold = project.phash_threshold
    pair_rows = (
        NearDuplicatePair.objects.filter(project=project)
        .filter(Q(status=PairStatus.SAME) | Q(status=PairStatus.UNREVIEWED, distance__lte=threshold))
        .values_list("item_a_id", "item_b_id")
    )
    pa_list: list[int] = []
    pb_list: list[int] = []
    for a, b in stream(pair_rows, chunk_size):
        pa_list.append(a)
        pb_list.append(b)
    edge_a = index(np.asarray(pa_list, dtype=np.int64))
    edge_b = index(np.asarray(pb_list, dtype=np.int64))
    has_dup = np.flatnonzero(dup_arr >= 0)
    dup_target = index(dup_arr[has_dup])
    edges = np.concatenate(
        [
            np.stack([edge_a, edge_b], axis=1).reshape(-1, 2),
            np.stack([has_dup, dup_target], axis=1).reshape(-1, 2),
        ]
    ).astype(np.int64)
    edges = edges[(edges >= 0).all(axis=1)]
    groups = group_ids(n, edges) if n else np.zeros(0, dtype=np.int64)

    # 4. split
    ratios = check_ratios(project.split_ratios)
    splits = np.full(n, -1, dtype=np.int8)
    rel_idx = np.flatnonzero(released)
    if len(rel_idx):
        splits[rel_idx] = stratified_group_split(
            groups=groups[rel_idx],
            strata=strata[rel_idx],
            order_keys=key_arr[rel_idx],
            ratios=ratios,
            pinned=pin_arr[rel_idx],
        )

    # 5. proof
    report = integrity_check(node_ids=node_ids, released=released, splits=splits, pixel_keys=pixel_arr, edges=edges)
    sizes = {name: int((splits[rel_idx] == code).sum()) for code, name in enumerate(SPLITS)}
    pairs = pair_counts(project=project)
    label_list = [None] * len(labels)
    for label, code in labels.items():
        label_list[code] = label
    return SplitPlan(
        node_ids=node_ids,
        released=released,
        splits=splits,
        group_of=node_ids[groups] if n else np.zeros(0, dtype=np.int64),
        strata=strata,
        strata_fields=fields,
        strata_labels=label_list,
        excluded=excluded,
        integrity=report,
        pairs={
            "same": pairs["same"],
            "different": pairs["different"],
            "unreviewed": pairs["unreviewed_within_threshold"],
            "unreviewed_beyond_threshold": pairs["unreviewed"] - pairs["unreviewed_within_threshold"],
        },
        ratios=ratios,
        seed=seed,
        threshold=threshold,
        edges_count=len(edges),
        sizes=sizes,
        pinned=int((pin_arr[rel_idx] >= 0).sum()),
    )
