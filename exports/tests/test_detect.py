"""Near-duplicate detection (stored pairs) and the review service."""

from __future__ import annotations

import pytest

from adjudication.models import HistoryEvent
from core.errors import Invalid, StaleVersion
from exports.factories import items_import, recompressed
from exports.models import DedupScan, NearDuplicatePair, PairStatus
from exports.services import near_duplicate_pair_review, near_duplicates_detect
from projects.factories import image_bytes

pytestmark = pytest.mark.django_db


def pair_set(project):
    return {
        (p.item_a.source_id, p.item_b.source_id): p.status
        for p in NearDuplicatePair.objects.filter(project=project).select_related("item_a", "item_b")
    }


def test_detect_stores_near_duplicates_skips_exact_copies_and_is_idempotent(project, dup_items, tmp_path):
    scan = near_duplicates_detect(project=project)
    assert scan.status == DedupScan.Status.DONE and scan.items_scanned == 11  # s3 is an exact copy of s2
    assert pair_set(project) == {("s0", "s1"): "unreviewed", ("s4", "s5"): "unreviewed"}
    pair = NearDuplicatePair.objects.get(item_a=dup_items[0])
    assert pair.item_b == dup_items[1] and pair.distance <= project.phash_threshold

    again = near_duplicates_detect(project=project)
    assert again.pairs_found == 2 and again.pairs_new == 0 and NearDuplicatePair.objects.count() == 2

    # a new item: only its pairs are added, earlier judgements stay
    NearDuplicatePair.objects.filter(item_a=dup_items[4]).update(status=PairStatus.DIFFERENT)
    items_import(
        project,
        tmp_path / "more",
        [{"source_id": "s12", "data": recompressed(image_bytes(0), quality=60), "text": "Zorg meme zero again"}],
    )
    third = near_duplicates_detect(project=project)
    assert third.pairs_new == 2 and third.max_item_id > again.max_item_id
    assert pair_set(project) == {
        ("s0", "s1"): "unreviewed",
        ("s4", "s5"): "different",
        ("s0", "s12"): "unreviewed",
        ("s1", "s12"): "unreviewed",
    }


def test_threshold_comes_from_the_project(project, dup_items):
    project.phash_threshold = 1
    project.save(update_fields=["phash_threshold"])
    near_duplicates_detect(project=project)
    assert pair_set(project) == {("s0", "s1"): "unreviewed"}  # s4-s5 are 2 bits apart


def test_review_marks_pairs_refuses_stale_writes_and_bad_input(project, dup_items, reviewer, lead):
    near_duplicates_detect(project=project)
    pair = NearDuplicatePair.objects.get(item_a=dup_items[0])
    near_duplicate_pair_review(pair=pair, reviewer=reviewer, decision="same", expected_status="unreviewed")
    pair.refresh_from_db()
    assert pair.status == "same" and pair.reviewed_by == reviewer and pair.reviewed_at is not None
    event = HistoryEvent.objects.get(kind="near_duplicate_review")
    assert event.actor == reviewer and event.new["status"] == "same"
    # the lead saw the pair unreviewed: their judgement is refused instead of silently overwriting
    with pytest.raises(StaleVersion):
        near_duplicate_pair_review(pair=pair, reviewer=lead, decision="different", expected_status="unreviewed")
    pair.refresh_from_db()
    assert pair.status == "same" and pair.reviewed_by == reviewer
    # a correction made knowingly is fine
    near_duplicate_pair_review(pair=pair, reviewer=lead, decision="different", expected_status="same")
    assert NearDuplicatePair.objects.get(pk=pair.pk).status == "different"
    with pytest.raises(Invalid):
        near_duplicate_pair_review(pair=pair, reviewer=lead, decision="maybe", expected_status="different")
    with pytest.raises(Invalid):
        near_duplicate_pair_review(pair=pair, reviewer=lead, decision="same", expected_status="bogus")


def test_candidate_groups_follow_same_and_unreviewed_links(project, dup_items, tmp_path, client_for, reviewer):
    from exports.selectors import candidate_groups

    items_import(
        project,
        tmp_path / "more",
        [{"source_id": "s12", "data": recompressed(image_bytes(0), quality=60), "text": "Zorg meme zero again"}],
    )
    near_duplicates_detect(project=project)
    ids = sorted(NearDuplicatePair.objects.filter(item_a=dup_items[0]).values_list("item_b_id", flat=True))
    trio = [dup_items[0].pk, *ids]
    assert candidate_groups(project=project) == dict.fromkeys(trio, trio)  # s4-s5 is only a pair
    html = client_for(reviewer).get("/p/p1/duplicates/").content.decode()
    assert html.count("candidate group of 3 items") == 3
    NearDuplicatePair.objects.filter(item_a=dup_items[0]).update(status=PairStatus.DIFFERENT)
    assert candidate_groups(project=project) == {}  # s1-s12 alone remain linked: a pair


def test_a_scan_with_no_item_since_the_last_finishes_from_it_and_a_higher_threshold_searches_again(
    project, dup_items, monkeypatch
):
    import exports.services as services

    first = near_duplicates_detect(project=project)
    assert first.phase != services.SCAN_REUSED and first.pairs_found == 2

    def no_search(*args, **kwargs):
        raise AssertionError("searched although no item came since the last scan")

    monkeypatch.setattr(services, "near_duplicate_pairs", no_search)
    again = near_duplicates_detect(project=project)
    again.refresh_from_db()
    assert again.status == DedupScan.Status.DONE and again.phase == services.SCAN_REUSED
    assert (again.items_scanned, again.pairs_found, again.pairs_new) == (11, 2, 0)
    assert again.max_item_id == first.max_item_id

    # an item committed after that scan with an id below its largest (an import that took its id
    # first): the same largest id, but not the same items, so it searches
    from projects.models import Item

    hidden = Item.objects.filter(project=project, duplicate_of__isnull=True).order_by("pk").first()
    Item.objects.filter(pk=hidden.pk).update(duplicate_of=dup_items[-1])  # not committed yet...
    monkeypatch.undo()
    assert near_duplicates_detect(project=project, full=True).items_scanned == 10
    monkeypatch.setattr(services, "near_duplicate_pairs", no_search)
    Item.objects.filter(pk=hidden.pk).update(duplicate_of=None)  # ...now it is, below the max id
    with pytest.raises(AssertionError, match="searched"):
        services._scan(
            DedupScan.objects.create(project=project, threshold=project.phash_threshold),
            lambda *a, **k: None,
            chunk_size=100,
        )
    monkeypatch.undo()
    assert near_duplicates_detect(project=project, full=True).items_scanned == 11  # (the real search)
    monkeypatch.setattr(services, "near_duplicate_pairs", no_search)

    project.phash_threshold = 1  # lower: the stored pairs cover it, counted under the new threshold
    project.save(update_fields=["phash_threshold"])
    lower = near_duplicates_detect(project=project)
    assert lower.phase == services.SCAN_REUSED and lower.pairs_found == 1

    project.phash_threshold = 12  # higher than any finished scan: pairs may be missing, so search
    project.save(update_fields=["phash_threshold"])
    with pytest.raises(AssertionError, match="searched"):
        services._scan(DedupScan.objects.create(project=project, threshold=12), lambda *a, **k: None, chunk_size=100)
    monkeypatch.undo()
    higher = near_duplicates_detect(project=project)
    assert higher.phase != services.SCAN_REUSED and higher.status == DedupScan.Status.DONE
    # and a full scan is always possible
    assert near_duplicates_detect(project=project, full=True).phase != services.SCAN_REUSED


def test_the_scan_page_says_when_a_scan_stood_on_the_last_one(project, dup_items, lead, client_for):
    near_duplicates_detect(project=project)
    again = near_duplicates_detect(project=project)
    page = client_for(lead).get(f"/p/{project.slug}/jobs/near-duplicates/{again.pk}/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "11 items scanned, 2 pairs within" in text and "no item since the last scan: its pairs stand" in text
    full = near_duplicates_detect(project=project, full=True)
    text = client_for(lead).get(f"/p/{project.slug}/jobs/near-duplicates/{full.pk}/").content.decode()
    assert "11 items scanned" in text and "its pairs stand" not in text
