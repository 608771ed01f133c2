"""Done means (issue 13): on the simulated-team demo, the three hidden models and one uploaded
predictions file are on the release's test-split leaderboard with Table 1's columns and CIs, a
researcher reads it over REST, and evaluate.py run on the downloaded release gives the same
numbers."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db
TABLE1 = [
    "label.acc",
    "label.f1",
    "jra",
    "target_category.acc",
    "target_entity.f1_rel",
    "text_mention.em",
    "text_mention.f1",
    "visual_region.iou50",
    "visual_region.iou75",
]


def content(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def test_demo_leaderboard_over_rest_equals_offline_evaluate_py(tmp_path) -> None:
    call_command("load_demo", "--quiet")
    researcher = APIClient()
    token, _ = Token.objects.get_or_create(user=get_user_model().objects.get(username="researcher"))
    researcher.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    base = "/api/projects/demo-meme3w-simulated/releases/1"
    board = researcher.get(f"{base}/evaluations/?split=test").json()
    names = [r["model_name"] for r in board["rows"]]
    assert len(names) == 4 and "Keyword baseline" in names, names
    assert sum(1 for r in board["rows"] if r["source"] == "candidates") == 3
    assert [c["key"] for c in board["columns"]][: len(TABLE1)] == TABLE1
    for row in board["rows"]:
        for key in TABLE1:
            fig = row["figures"][key]
            assert fig["n"] > 0 and (fig["value"] is None or fig["ci"] is not None), (row["model_name"], key)

    # download the release's evaluation code and gold, score the uploaded file offline
    folder = tmp_path / "release"
    folder.mkdir()
    for name in ("evaluate.py", "evaluation.json", "records.jsonl", "lexicon.json", "README.md"):
        (folder / name).write_bytes(content(researcher.get(f"{base}/files/{name}")))
    assert "python evaluate.py predictions.jsonl --split test" in (folder / "README.md").read_text()
    predictions = settings.VAR_DIR / "demo_source" / "demo-meme3w-simulated-predictions" / "baseline-v1-test.jsonl"
    out = subprocess.run(
        [sys.executable, "evaluate.py", str(predictions), "--split", "test", "--json"],
        cwd=folder,
        capture_output=True,
        text=True,
        check=True,
    )
    offline = json.loads(out.stdout)
    row = next(r for r in board["rows"] if r["model_name"] == "Keyword baseline")
    assert offline["report"]["counts"]["missing"] == row["missing"] > 0
    for key, fig in row["figures"].items():
        mine = offline["figures"][key]
        assert mine["n"] == fig["n"], key
        if fig["value"] is None:
            assert mine["value"] is None, key
            continue
        assert abs(mine["value"] - fig["value"]) <= 1e-12, key
        assert all(abs(x - y) <= 1e-12 for x, y in zip(mine["ci"], fig["ci"])), key
