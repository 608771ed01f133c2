"""Done means: a researcher with a token downloads demo release v1 over REST, loads it in pandas,
finds the demo's near-duplicate variants in one split, and a second build is byte-identical."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from exports.factories import annotate_all
from exports.models import NearDuplicatePair
from projects.demo import demo_truth
from projects.models import Item, Project

pytestmark = pytest.mark.django_db
VARIANTS = ["demo-00-recompressed", "demo-02-resized", "demo-08-cropped", "demo-11-recompressed", "demo-20-resized"]


def client_for(username: str) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=get_user_model().objects.get(username=username))
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def content(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def test_demo_release_over_rest(django_capture_on_commit_callbacks):
    call_command("load_demo", "--quiet")
    project = Project.objects.get(slug="demo-meme3w")
    # load_demo ran the near-duplicate scan: every variant is paired with its original
    items = {i.source_id: i for i in Item.objects.filter(project=project)}
    pairs = {(p.item_a_id, p.item_b_id) for p in NearDuplicatePair.objects.filter(project=project)}
    for variant in VARIANTS:
        assert (items[variant.rsplit("-", 1)[0]].pk, items[variant].pk) in pairs, variant
    users = get_user_model().objects
    annotate_all(
        project,
        [users.get(username="annotator1"), users.get(username="annotator2")],
        values_for=lambda item, user: demo_truth(item.text),
    )

    lead, researcher = client_for("lead"), client_for("researcher")
    for _ in range(2):
        with django_capture_on_commit_callbacks(execute=True):
            assert lead.post("/api/projects/demo-meme3w/exports/").status_code == 202
    releases = researcher.get("/api/projects/demo-meme3w/releases/").json()["results"]
    assert [r["number"] for r in releases] == [2, 1]
    assert researcher.post("/api/projects/demo-meme3w/exports/").status_code == 403

    v1 = researcher.get("/api/projects/demo-meme3w/releases/1/").json()
    records = pd.read_json(
        io.BytesIO(content(researcher.get("/api/projects/demo-meme3w/releases/1/records"))), lines=True
    )
    assert len(records) == v1["record_count"] == len(items) - 1  # the exact copy is removed
    split = dict(zip(records["source_id"], records["split"]))
    assert "demo-exact-copy" not in split
    for variant in VARIANTS:
        assert split[variant] == split[variant.rsplit("-", 1)[0]], variant
    test = pd.read_json(
        io.BytesIO(content(researcher.get("/api/projects/demo-meme3w/releases/1/records?split=test"))), lines=True
    )
    # 35 records at 85/5/10: largest remainder, no split left empty (issue 16), no shortfall
    assert v1["manifest"]["counts"]["by_split"] == {"train": 30, "val": 2, "test": 3}
    assert v1["manifest"]["split"]["shortfalls"] == []
    assert len(test) > 0 and set(test["split"]) == {"test"}
    splits = json.loads(content(researcher.get("/api/projects/demo-meme3w/releases/1/files/splits.json")))
    assert splits["integrity"]["ok"] and splits["excluded"][0]["item_id"] == items["demo-exact-copy"].pk

    # the second build of the same state: byte-identical, file by file
    v2 = researcher.get("/api/projects/demo-meme3w/releases/2/").json()
    assert v2["manifest_sha256"] == v1["manifest_sha256"]
    for f1, f2 in zip(v1["files"], v2["files"]):
        assert f1["name"] == f2["name"] and f1["sha256"] == f2["sha256"]
        assert content(researcher.get(f1["url"])) == content(researcher.get(f2["url"])), f1["name"]
    diff = researcher.get("/api/projects/demo-meme3w/releases/1/diff/2/").json()
    assert diff["identical"] and diff["counts"]["changed"] == 0
