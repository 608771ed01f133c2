"""exports.selectors.split_plan: the database side of the splits."""

from __future__ import annotations

import pytest

from exports.factories import gold_create
from exports.models import NearDuplicatePair, PairStatus
from exports.selectors import split_plan, strata_fields
from exports.services import near_duplicates_detect
from projects.models import Stage
from projects.presets import AHA_SCHEMA, MEME3W_SCHEMA, MEMECAP_SCHEMA
from projects.services import item_stage_set

pytestmark = pytest.mark.django_db


def by_sid(items):
    return {i.source_id: i for i in items}


def test_exact_duplicates_removed_groups_kept_together_and_integrity_proven(project, dup_gold):
    near_duplicates_detect(project=project)
    s = by_sid(dup_gold)
    plan = split_plan(project=project)
    assert plan.excluded == [
        {
            "item_id": s["s3"].pk,
            "duplicate_of": s["s2"].pk,
            "reason": f"exact duplicate (same decoded pixels) of item {s['s2'].pk}, which is kept",
        }
    ]
    assert plan.split_of(s["s3"].pk) is None and plan.split_of(s["s2"].pk) in ("train", "val", "test")
    assert plan.split_of(s["s0"].pk) == plan.split_of(s["s1"].pk)
    assert plan.split_of(s["s4"].pk) == plan.split_of(s["s5"].pk)  # unreviewed: kept together
    assert plan.group_of_item(s["s1"].pk) == s["s0"].pk and plan.group_of_item(s["s5"].pk) == s["s4"].pk
    assert plan.integrity.ok and plan.integrity.items_checked == 11 and plan.integrity.multi_member_groups == 2
    assert sum(plan.sizes.values()) == 11
    assert plan.pairs == {"same": 0, "different": 0, "unreviewed": 2, "unreviewed_beyond_threshold": 0}
    assert plan.strata_fields == ["label", "target_category"]
    strata = {tuple(r["stratum"].values()): r["total"] for r in plan.stratum_table()}
    assert strata == {("harmful", "group background"): 6, ("non-harmful", "(none)"): 5}
    again = split_plan(project=project)
    assert (again.splits == plan.splits).all()  # deterministic


def test_judged_different_pairs_and_pairs_beyond_the_threshold_do_not_link(project, dup_gold):
    near_duplicates_detect(project=project)
    s = by_sid(dup_gold)
    NearDuplicatePair.objects.filter(item_a=s["s0"]).update(status=PairStatus.DIFFERENT)
    project.phash_threshold = 1  # s4-s5 are 2 bits apart: still stored, no longer a candidate
    project.save(update_fields=["phash_threshold"])
    plan = split_plan(project=project)
    assert plan.group_of_item(s["s1"].pk) == s["s1"].pk and plan.group_of_item(s["s5"].pk) == s["s5"].pk
    assert plan.pairs == {"same": 0, "different": 1, "unreviewed": 0, "unreviewed_beyond_threshold": 1}
    assert plan.integrity.multi_member_groups == 0


def test_a_copy_whose_original_is_not_gold_is_released_and_linked_through_it(
    project, dup_items, annotator_a, annotator_b
):
    s = by_sid(dup_items)
    gold_create(project, [i for i in dup_items if i.source_id != "s2"], [annotator_a, annotator_b])
    item_stage_set(item=s["s7"], stage=Stage.EXCLUDED)  # a lead excluded it: never released
    plan = split_plan(project=project)
    assert plan.excluded == []
    assert plan.split_of(s["s3"].pk) is not None and plan.group_of_item(s["s3"].pk) == s["s2"].pk
    assert plan.split_of(s["s7"].pk) is None and plan.integrity.items_checked == 10


def test_strata_fields_come_from_the_schema():
    assert strata_fields(MEME3W_SCHEMA) == ["label", "target_category"]
    assert strata_fields(AHA_SCHEMA) == ["is_hateful"]
    assert strata_fields(MEMECAP_SCHEMA) == []
