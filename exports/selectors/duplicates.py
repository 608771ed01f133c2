"""The near-duplicate review queue: pairs, their counts and candidate groups, the last scan."""

from __future__ import annotations

import numpy as np
from django.db.models import Count, Q
from django.http import Http404

from exports.models import DedupScan, NearDuplicatePair, PairStatus
from exports.splitting import (
    group_ids,
)
from projects.models import Item, Project

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
    rows = np.asarray(
        list(
            NearDuplicatePair.objects.filter(project=project)
            .filter(Q(status=PairStatus.SAME) | Q(status=PairStatus.UNREVIEWED, distance__lte=project.phash_threshold))
            .values_list("item_a_id", "item_b_id")
        ),
        dtype=np.int64,
    ).reshape(-1, 2)
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
