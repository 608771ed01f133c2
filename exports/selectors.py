"""Read paths of the exports app: review queue, split plan, pseudonyms, releases, diffs.

``split_plan`` is the one place that turns the database into the arrays of exports.splitting;
the release build, the splits page and the tests all go through it.
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db.models import Count, Max, Min, Q
from django.db.models.functions import Coalesce
from django.http import Http404

from adjudication.models import GoldRecord
from annotation.models import Annotation
from candidates.models import Candidate
from exports.models import DedupScan, ExportJob, NearDuplicatePair, PairStatus, Release
from exports.splitting import (
    SPLITS,
    IntegrityReport,
    check_ratios,
    exact_duplicate_groups,
    group_ids,
    integrity_check,
    stratified_group_split,
)
from projects.fieldtypes import REGISTRY
from projects.models import Item, Project, Stage
from quality.selectors import agreement_report_for_export, audit_report_for_export

NONE_LABEL = "(none)"


# ------------------------------------------------------------------------------------------
# Near-duplicate review queue
# ------------------------------------------------------------------------------------------

def pair_counts(*, project: Project) -> dict[str, int]:
    rows = NearDuplicatePair.objects.filter(project=project).values("status").annotate(n=Count("id"))
    counts = {s.value: 0 for s in PairStatus}
    counts.update({r["status"]: r["n"] for r in rows})
    counts["unreviewed_within_threshold"] = NearDuplicatePair.objects.filter(
        project=project, status=PairStatus.UNREVIEWED, distance__lte=project.phash_threshold
    ).count()
    return counts


def pairs_for_review(*, project: Project, status: str = PairStatus.UNREVIEWED):
    """Pairs in review order: closest first (the likeliest true duplicates), then by items."""
    return (
        NearDuplicatePair.objects.filter(project=project, status=status)
        .select_related("item_a", "item_b", "reviewed_by")
        .order_by("distance", "item_a_id", "item_b_id")
    )


def candidate_groups(*, project: Project) -> dict[int, list[int]]:
    """{item id: the sorted ids of its candidate group} for items in groups of three or more.

    The links are the ones splitting uses (pairs judged "same" and unreviewed pairs within the
    threshold), so a reviewer sees which items would share a split if nothing else is judged.
    One query and a union-find over the stored pairs.
    """
    rows = np.asarray(list(
        NearDuplicatePair.objects.filter(project=project).filter(
            Q(status=PairStatus.SAME) | Q(status=PairStatus.UNREVIEWED, distance__lte=project.phash_threshold)
        ).values_list("item_a_id", "item_b_id")
    ), dtype=np.int64).reshape(-1, 2)
    if not len(rows):
        return {}
    ids, inverse = np.unique(rows, return_inverse=True)
    groups = group_ids(len(ids), inverse.reshape(-1, 2))
    out: dict[int, list[int]] = {}
    _, g_inv, counts = np.unique(groups, return_inverse=True, return_counts=True)
    for g in np.flatnonzero(counts > 2).tolist():
        members = ids[g_inv.reshape(-1) == g].tolist()
        for m in members:
            out[m] = members
    return out


def pair_get_for_project(*, project: Project, pair_id) -> NearDuplicatePair:
    try:
        return NearDuplicatePair.objects.select_related("item_a", "item_b", "reviewed_by").get(
            project=project, pk=int(pair_id)
        )
    except (NearDuplicatePair.DoesNotExist, TypeError, ValueError):
        raise Http404("No such pair") from None


def dedup_scan_latest(*, project: Project) -> DedupScan | None:
    return DedupScan.objects.filter(project=project).first()


def items_not_scanned(*, project: Project) -> int:
    """Items imported after the last finished scan (their pairs are not known yet)."""
    last = DedupScan.objects.filter(project=project, status=DedupScan.Status.DONE).first()
    qs = Item.objects.filter(project=project)
    return qs.filter(pk__gt=last.max_item_id).count() if last else qs.count()


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

    def index_of(self, item_id: int) -> int | None:
        i = int(np.searchsorted(self.node_ids, item_id))
        return i if i < len(self.node_ids) and self.node_ids[i] == item_id else None

    def split_of(self, item_id: int) -> str | None:
        """The item's split, or None when it is not released."""
        i = self.index_of(item_id)
        if i is None or not self.released[i]:
            return None
        return SPLITS[self.splits[i]]

    def group_of_item(self, item_id: int) -> int:
        return int(self.group_of[self.index_of(item_id)])

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
                rows.append({"stratum": dict(zip(self.strata_fields, label)), "counts": dict(zip(SPLITS, counts)),
                             "total": sum(counts)})
        rows.sort(key=lambda r: [str(v) for v in r["stratum"].values()])
        return rows

    def groups_summary(self, *, limit: int | None = None) -> list[dict]:
        """Multi-member groups among released items: representative, members, split."""
        idx = np.flatnonzero(self.released)
        reps = self.group_of[idx]
        uniq, inverse, counts = np.unique(reps, return_inverse=True, return_counts=True)
        inverse = inverse.reshape(-1)
        out = []
        for g in np.flatnonzero(counts > 1).tolist():
            members = idx[inverse == g]
            out.append({"group": int(uniq[g]), "item_ids": self.node_ids[members].tolist(),
                        "split": SPLITS[self.splits[members[0]]]})
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
            "by_stratum": self.stratum_table(),
            "excluded": self.excluded,
            "near_duplicates": {**self.pairs, "threshold": self.threshold,
                                "rule": "pairs judged 'same' and unreviewed pairs within the threshold link items "
                                        "into one group; a group is assigned to one split"},
            "groups": self.groups_summary(),
        }
        if integrity:
            out["integrity"] = self.integrity.as_dict()
        return out


def _pixel_key(pixel_hash: str) -> int:
    return int(pixel_hash[:16], 16)


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
    ids: list[int] = []
    pixel_keys: list[int] = []
    dup_of: list[int] = []
    keys: list[int] = []
    seed = project.split_seed
    rows = Item.objects.filter(project=project).order_by("id").values_list(
        "id", "pixel_hash", "duplicate_of_id", "import_key"
    )
    for item_id, pixel_hash, duplicate_of_id, import_key in rows.iterator(chunk_size=chunk_size):
        ids.append(item_id)
        pixel_keys.append(_pixel_key(pixel_hash))
        dup_of.append(duplicate_of_id or -1)
        keys.append(order_key(seed, import_key))
    node_ids = np.asarray(ids, dtype=np.int64)
    pixel_arr = np.asarray(pixel_keys, dtype=np.uint64)
    dup_arr = np.asarray(dup_of, dtype=np.int64)
    key_arr = np.asarray(keys, dtype=np.uint64)
    del ids, pixel_keys, dup_of, keys
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
    # Key transforms (decoded JSON values, None for null on every backend), not the whole record.
    gold_rows = released_gold_queryset(project=project).order_by("item_id").values_list(
        "item_id", *[f"values__{name}" for name in fields]
    )
    g_ids: list[int] = []
    g_codes: list[int] = []
    for item_id, *values in gold_rows.iterator(chunk_size=chunk_size):
        label = tuple(NONE_LABEL if v is None else str(v) for v in values)
        g_ids.append(item_id)
        g_codes.append(labels.setdefault(label, len(labels)))
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
                    excluded.append({"item_id": removed, "duplicate_of": kept,
                                     "reason": f"exact duplicate (same decoded pixels) of item {kept}, which is kept"})
    excluded.sort(key=lambda e: e["item_id"])

    # 3. links
    threshold = project.phash_threshold
    pair_rows = NearDuplicatePair.objects.filter(project=project).filter(
        Q(status=PairStatus.SAME) | Q(status=PairStatus.UNREVIEWED, distance__lte=threshold)
    ).values_list("item_a_id", "item_b_id")
    pa_list: list[int] = []
    pb_list: list[int] = []
    for a, b in pair_rows.iterator(chunk_size=chunk_size):
        pa_list.append(a)
        pb_list.append(b)
    edge_a = index(np.asarray(pa_list, dtype=np.int64))
    edge_b = index(np.asarray(pb_list, dtype=np.int64))
    has_dup = np.flatnonzero(dup_arr >= 0)
    dup_target = index(dup_arr[has_dup])
    edges = np.concatenate([
        np.stack([edge_a, edge_b], axis=1).reshape(-1, 2),
        np.stack([has_dup, dup_target], axis=1).reshape(-1, 2),
    ]).astype(np.int64)
    edges = edges[(edges >= 0).all(axis=1)]
    groups = group_ids(n, edges) if n else np.zeros(0, dtype=np.int64)

    # 4. split
    ratios = check_ratios(project.split_ratios)
    splits = np.full(n, -1, dtype=np.int8)
    rel_idx = np.flatnonzero(released)
    if len(rel_idx):
        splits[rel_idx] = stratified_group_split(
            groups=groups[rel_idx], strata=strata[rel_idx], order_keys=key_arr[rel_idx], ratios=ratios
        )

    # 5. proof
    report = integrity_check(node_ids=node_ids, released=released, splits=splits, pixel_keys=pixel_arr, edges=edges)
    sizes = {name: int((splits[rel_idx] == code).sum()) for code, name in enumerate(SPLITS)}
    pairs = pair_counts(project=project)
    label_list = [None] * len(labels)
    for label, code in labels.items():
        label_list[code] = label
    return SplitPlan(
        node_ids=node_ids, released=released, splits=splits,
        group_of=node_ids[groups] if n else np.zeros(0, dtype=np.int64),
        strata=strata, strata_fields=fields, strata_labels=label_list, excluded=excluded, integrity=report,
        pairs={"same": pairs["same"], "different": pairs["different"],
               "unreviewed": pairs["unreviewed_within_threshold"],
               "unreviewed_beyond_threshold": pairs["unreviewed"] - pairs["unreviewed_within_threshold"]},
        ratios=ratios, seed=seed, threshold=threshold, edges_count=len(edges), sizes=sizes,
    )


# ------------------------------------------------------------------------------------------
# Pseudonyms
# ------------------------------------------------------------------------------------------

PSEUDONYM_PREFIX = {"annotation": "annotator", "audit": "auditor"}


def annotator_pseudonyms(*, project: Project) -> dict[tuple[str, int], str]:
    """{(kind, user id): "annotator-01" / "auditor-01" / "reviewer-01"} for the project.

    Numbered by each person's first submission (first gold decision for reviewers), ties by
    user id: a person keeps their number as the project grows, and usernames never leave.
    """
    out: dict[tuple[str, int], str] = {}
    rows = (
        Annotation.objects.filter(item__project=project, status=Annotation.Status.SUBMITTED)
        .values("kind", "annotator_id")
        .annotate(first=Min(Coalesce("first_submitted_at", "submitted_at", "created_at")))
        .order_by("kind", "first", "annotator_id")
    )
    numbers: dict[str, int] = {}
    for r in rows:
        prefix = PSEUDONYM_PREFIX.get(r["kind"], r["kind"])
        numbers[prefix] = numbers.get(prefix, 0) + 1
        out[(r["kind"], r["annotator_id"])] = f"{prefix}-{numbers[prefix]:02d}"
    reviewers = (
        GoldRecord.objects.filter(item__project=project, decided_by__isnull=False)
        .values("decided_by_id").annotate(first=Min("created_at")).order_by("first", "decided_by_id")
    )
    for k, r in enumerate(reviewers, start=1):
        out[("reviewer", r["decided_by_id"])] = f"reviewer-{k:02d}"
    return out


# ------------------------------------------------------------------------------------------
# Candidates (bulk form of candidates.selectors.candidates_with_identity)
# ------------------------------------------------------------------------------------------

CANDIDATE_COLUMNS = ("id", "item_id", "provider_id", "provider__name", "provider__kind", "model_name",
                     "prompt_version", "fields", "removed", "think", "latency_ms", "prompt_tokens", "completion_tokens")


def candidates_by_item(*, project: Project, chunk_size: int = 2000) -> Iterator[tuple[int, list[dict]]]:
    """(item id, candidates) in item order, streamed: for each item, the latest successful
    candidate of each provider, sorted by provider name then id. Same rule as
    ``candidates.selectors.candidates_with_identity`` (a test holds them equal), one query for
    the whole project instead of one per item."""
    rows = (
        Candidate.objects.filter(item__project=project, parse_error="")
        .order_by("item_id", "provider_id", "-created_at", "-id")
        .values_list(*CANDIDATE_COLUMNS)
    )
    current: int | None = None
    latest: dict[int, dict] = {}
    for row in rows.iterator(chunk_size=chunk_size):
        rec = dict(zip(CANDIDATE_COLUMNS, row))
        if rec["item_id"] != current:
            if current is not None:
                yield current, sorted(latest.values(), key=lambda c: (c["provider__name"], c["id"]))
            current, latest = rec["item_id"], {}
        latest.setdefault(rec["provider_id"], rec)
    if current is not None:
        yield current, sorted(latest.values(), key=lambda c: (c["provider__name"], c["id"]))


# ------------------------------------------------------------------------------------------
# Quality reports (written by the quality app)
# ------------------------------------------------------------------------------------------

def quality_reports_for_export(*, project: Project) -> tuple[dict, dict]:
    """(agreement.json, audit.json) contents from ``quality.selectors``."""
    agreement = agreement_report_for_export(project=project)
    audit = audit_report_for_export(project=project)
    if audit is None:
        audit = {"status": "no audit", "reason": "no candidate-blind audit has been run on this project"}
    return agreement, audit


# ------------------------------------------------------------------------------------------
# Releases
# ------------------------------------------------------------------------------------------

def releases_root() -> Path:
    configured = getattr(settings, "CONCORD_RELEASES_DIR", "")
    return Path(configured) if configured else Path(settings.VAR_DIR) / "releases"


def releases_for_project(*, project: Project):
    return Release.objects.filter(project=project).select_related("created_by").order_by("-number")


def release_get_for_project(*, project: Project, number) -> Release:
    try:
        return Release.objects.get(project=project, number=int(number))
    except (Release.DoesNotExist, TypeError, ValueError):
        raise Http404(f"No release v{number} in this project") from None


def release_dir(release: Release) -> Path:
    return releases_root() / release.directory


_IMAGE_NAME = re.compile(r"^images/([0-9a-f]{64})\.(jpg|png|gif|webp)$")


@dataclass(frozen=True)
class ReleaseFile:
    name: str
    path: Path
    sha256: str
    bytes: int


def release_files(release: Release) -> list[dict]:
    """Top-level files of the release with their sha256 (from the manifest), manifest included."""
    files = [{"name": name, **meta} for name, meta in sorted(release.manifest.get("files", {}).items())]
    files.append({"name": "manifest.json", "sha256": release.manifest_sha256,
                  "bytes": (release_dir(release) / "manifest.json").stat().st_size})
    return files


def release_file_get(*, release: Release, name: str) -> ReleaseFile:
    """A file of the release by its name in the manifest (or an included image); 404 otherwise.

    Names are looked up, never joined blindly: nothing outside the release folder is reachable.
    """
    root = release_dir(release)
    if name == "manifest.json":
        path = root / name
        return ReleaseFile(name, path, release.manifest_sha256, path.stat().st_size)
    meta = release.manifest.get("files", {}).get(name)
    if meta is not None:
        return ReleaseFile(name, root / name, meta["sha256"], meta["bytes"])
    match = _IMAGE_NAME.match(name)
    if match:
        path = root / name
        if path.is_file():
            # Content-addressed: the name is the sha256 (listed with its size in images.jsonl).
            return ReleaseFile(name, path, match.group(1), path.stat().st_size)
    raise Http404(f"No file {name!r} in release v{release.number}")


def release_records(release: Release, *, split: str | None = None) -> Iterator[bytes]:
    """records.jsonl lines (bytes, newline included), optionally only one split's."""
    path = release_dir(release) / "records.jsonl"
    with open(path, "rb") as fh:
        for line in fh:
            if split is None or json.loads(line)["split"] == split:
                yield line


def _records_by_id(release: Release) -> Iterator[dict]:
    with open(release_dir(release) / "records.jsonl", "rb") as fh:
        for line in fh:
            yield json.loads(line)


def _changed_fields(a: dict, b: dict) -> list[str]:
    changed = []
    for key in sorted(set(a) | set(b)):
        if key == "gold":
            ga, gb = a.get("gold") or {}, b.get("gold") or {}
            changed += [f"gold.{k}" for k in sorted(set(ga) | set(gb)) if ga.get(k) != gb.get(k)]
        elif a.get(key) != b.get(key):
            changed.append(key)
    return changed


def release_diff(*, old: Release, new: Release, limit: int = 500) -> dict:
    """Items added, removed and changed (with the changed fields) from ``old`` to ``new``.

    Both records.jsonl files are sorted by item id, so this is a merge join: memory is flat in
    the number of records; at most ``limit`` changes are listed (the counts are complete).
    """
    counts = {"added": 0, "removed": 0, "changed": 0, "unchanged": 0}
    field_counts: dict[str, int] = {}
    changes: list[dict] = []

    def note(kind: str, rec: dict, fields: list[str] | None = None) -> None:
        counts[kind] += 1
        if len(changes) < limit:
            entry = {"kind": kind, "item_id": rec["item_id"], "source_id": rec.get("source_id", "")}
            if fields is not None:
                entry["fields"] = fields
            changes.append(entry)

    a_iter, b_iter = _records_by_id(old), _records_by_id(new)
    a, b = next(a_iter, None), next(b_iter, None)
    while a is not None or b is not None:
        if b is None or (a is not None and a["item_id"] < b["item_id"]):
            note("removed", a)
            a = next(a_iter, None)
        elif a is None or b["item_id"] < a["item_id"]:
            note("added", b)
            b = next(b_iter, None)
        else:
            fields = _changed_fields(a, b)
            if fields:
                for f in fields:
                    field_counts[f] = field_counts.get(f, 0) + 1
                note("changed", b, fields)
            else:
                counts["unchanged"] += 1
            a, b = next(a_iter, None), next(b_iter, None)
    return {
        "from": old.number, "to": new.number, "identical": old.manifest_sha256 == new.manifest_sha256,
        "counts": counts, "changed_fields": dict(sorted(field_counts.items())),
        "changes": changes, "truncated": sum(counts[k] for k in ("added", "removed", "changed")) > len(changes),
    }


# ------------------------------------------------------------------------------------------
# Export jobs
# ------------------------------------------------------------------------------------------

def export_jobs_for_project(*, project: Project, limit: int = 10):
    return ExportJob.objects.filter(project=project).select_related("release", "created_by")[:limit]


def export_job_get_for_project(*, project: Project, job_id) -> ExportJob:
    try:
        return ExportJob.objects.select_related("release").get(project=project, pk=int(job_id))
    except (ExportJob.DoesNotExist, TypeError, ValueError):
        raise Http404("No such export job") from None


def release_latest_at(project) -> datetime | None:
    """When the project's newest published release was built (None: never). Every gold record
    created before it may be in a release: adjudication locks reviewers' revisions by it."""
    return Release.objects.filter(project=project).aggregate(at=Max("created_at"))["at"]
