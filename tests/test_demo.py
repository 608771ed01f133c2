from __future__ import annotations

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command

from projects.models import Item, Membership, Project

pytestmark = pytest.mark.django_db


def test_load_demo_builds_projects_users_and_is_idempotent(capsys):
    call_command("load_demo")
    out = capsys.readouterr().out
    assert "lead-demo-pass" in out and "annotator1-demo-pass" in out
    meme3w = Project.objects.get(slug="demo-meme3w")
    items = Item.objects.filter(project=meme3w)
    assert 34 <= items.count() <= 45
    # Near-duplicate variants exist (same caption, other source id) and one exact pixel copy.
    assert items.filter(source_id__endswith="-recompressed").count() >= 1
    assert items.filter(source_id__endswith="-cropped").count() >= 1
    exact = items.get(source_id="demo-exact-copy")
    assert exact.duplicate_of is not None and exact.duplicate_of.pixel_hash == exact.pixel_hash
    # One template reused with different captions: distinct samples.
    assert items.filter(metadata__template="chelsea").values("text").distinct().count() >= 4
    for role in ("lead", "annotator", "reviewer", "auditor", "researcher"):
        assert Membership.objects.filter(project=meme3w, role=role).exists()
    assert authenticate(username="annotator1", password="annotator1-demo-pass") is not None
    aha = Project.objects.get(slug="demo-aha")
    assert aha.annotators_per_item == 3 and aha.items.exists()
    # MemeBench: eight memes, four in Chinese, waiting for their reference explanation.
    vikr = Item.objects.filter(project__slug="demo-vikr")
    assert vikr.count() == 8 and vikr.filter(language="zh").count() == 4
    assert set(vikr.values_list("stage", "workflow_stage")) == {("annotating", 0)}
    call_command("load_demo", "--quiet")
    assert Item.objects.filter(project=meme3w).count() == items.count()
    assert Item.objects.filter(project__slug="demo-vikr").count() == 8


def test_demo_near_duplicates_are_perceptually_close():
    call_command("load_demo", "--quiet")
    import imagehash

    items = {i.source_id: i for i in Item.objects.filter(project__slug="demo-meme3w")}
    for variant in ("demo-00-recompressed", "demo-02-resized", "demo-08-cropped"):
        base = items[variant.rsplit("-", 1)[0]]
        d = imagehash.hex_to_hash(base.phash) - imagehash.hex_to_hash(items[variant].phash)
        assert d <= 8, (variant, d)


def test_simulated_demo_project_has_gold_an_audit_and_release_v1():
    from adjudication.models import AdjudicationTask, GoldRecord
    from exports.models import Release
    from quality.models import Audit

    call_command("load_demo", "--quiet")
    sim = Project.objects.get(slug="demo-meme3w-simulated")
    assert GoldRecord.objects.filter(item__project=sim, is_current=True).count() == sim.items.count()
    assert AdjudicationTask.objects.filter(item__project=sim, status="done").exists()
    assert Audit.objects.filter(project=sim).exists()
    assert list(Release.objects.filter(project=sim).values_list("number", flat=True)) == [1]
    call_command("load_demo", "--quiet")
    assert Release.objects.filter(project=sim).count() == 1
