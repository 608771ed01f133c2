"""Submissions through the services: scores equal the offline scorer, bad input is reported or
refused with nothing written, raw replies go through the candidates' parser, hidden candidate
models are entered once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from candidates.models import Candidate, Provider
from core.errors import Invalid
from evaluation.models import Source, Submission
from evaluation.selectors import leaderboard, submission_compare, worst_items
from evaluation.services import candidate_submissions_enter, submission_create
from evaluation.tests.conftest import jsonl, records, upload
from exports.selectors import release_dir
from metrics import evaluation as ev

pytestmark = pytest.mark.django_db


def test_release_ships_evaluate_py_plan_and_readme_line(release) -> None:
    folder = release_dir(release)
    assert (folder / "evaluate.py").read_text() == Path(ev.__file__).read_text(encoding="utf-8")
    plan = json.loads((folder / "evaluation.json").read_text())
    assert plan["primary"] == "jra" and plan["release"] == {"project": "p1"}
    assert "python evaluate.py predictions.jsonl --split test" in (folder / "README.md").read_text()
    assert {"evaluate.py", "evaluation.json"} <= set(release.manifest["files"])


def test_perfect_predictions_score_one_and_the_offline_script_agrees(release, researcher, tmp_path) -> None:
    rows = records(release, "train")
    preds = [{"item_id": r["item_id"], **r["gold"]} for r in rows]
    sub = submission_create(
        user=researcher, release=release, split="train", model_name="oracle", file=upload(jsonl(preds))
    )
    figs = sub.scores["figures"]
    assert figs["jra"]["value"] == 1.0 and figs["label.acc"]["value"] == 1.0
    assert figs["jra"]["n"] == sum(1 for r in rows if r["gold"]["label"] == "harmful")
    assert sub.report["counts"]["missing"] == 0
    path = tmp_path / "preds.jsonl"
    path.write_bytes(jsonl(preds))
    offline = ev.release_evaluate(release_dir(release), path, split="train")
    for name, fig in figs.items():
        assert offline["figures"][name]["value"] == pytest.approx(fig["value"], abs=1e-12), name
        assert offline["figures"][name]["n"] == fig["n"]


def test_offline_numbers_equal_the_leaderboard_to_1e_12_on_imperfect_predictions(release, lead, tmp_path) -> None:
    rows = records(release, "train")
    preds = []
    for k, r in enumerate(rows):
        g = dict(r["gold"])
        if k % 3 == 0:
            g["label"] = "non-harmful" if g["label"] == "harmful" else "harmful"
        if k % 4 == 1 and g.get("visual_region"):
            g["visual_region"] = [[90, 100, 400, 520]]
        if k % 5 == 2:
            g["target_entity"] = "Zorgians"
        if k % 7 == 3:
            continue  # missing
        preds.append({"source_id": r["source_id"], **g})
    preds.append({"item_id": rows[0]["item_id"], "label": "harmful"})  # duplicate
    data = jsonl(preds) + b"not json\n"
    sub = submission_create(user=lead, release=release, split="train", model_name="noisy", file=upload(data))
    path = tmp_path / "p.jsonl"
    path.write_bytes(data)
    offline = ev.release_evaluate(release_dir(release), path, split="train")
    assert offline["report"]["counts"] == sub.report["counts"]
    for name, fig in sub.scores["figures"].items():
        mine = offline["figures"][name]
        if fig["value"] is None:
            assert mine["value"] is None
            continue
        assert abs(mine["value"] - fig["value"]) <= 1e-12, name
        assert mine["ci"] == pytest.approx(fig["ci"], abs=1e-12), name
    assert sub.report["counts"]["duplicate"] == 1 and sub.report["counts"]["unreadable"] == 1
    assert sub.report["counts"]["missing"] >= 1


def test_refused_file_writes_nothing(release, lead) -> None:
    header = json.dumps({"concord_release": {"project": "p1", "version": 9}}).encode() + b"\n"
    with pytest.raises(Invalid) as err:
        submission_create(user=lead, release=release, split="train", model_name="m", file=upload(header))
    assert "not p1 v1" in err.value.message
    garbage = bytes(range(256)) * 4000
    with pytest.raises(Invalid) as err:
        submission_create(user=lead, release=release, split="train", model_name="m", file=upload(garbage))
    assert "refused" in err.value.message
    assert Submission.objects.count() == 0


def test_raw_replies_use_the_candidate_parser_and_broken_fields_are_malformed(release, lead) -> None:
    rows = [r for r in records(release, "train") if r["gold"]["label"] == "harmful"][:2]
    good = dict(rows[0]["gold"])
    reply_ok = "Thinking...\n```json\n" + json.dumps({"think": "steps", **good}) + "\n```"
    bad = dict(rows[1]["gold"], visual_region=[[5, 5, 1, 1]])
    reply_bad = json.dumps(bad)
    lines = [
        {"item_id": rows[0]["item_id"], "reply": reply_ok},
        {"item_id": rows[1]["item_id"], "reply": reply_bad},
    ]
    sub = submission_create(
        user=lead, release=release, split="train", model_name="raw", file=upload(jsonl(lines)), fmt="replies"
    )
    assert sub.source == Source.REPLIES
    assert sub.report["malformed_fields"]["visual_region"] == 1
    worst = {w["item_id"]: w for w in worst_items(sub)}
    assert worst[rows[1]["item_id"]]["score"] == 0.0


def test_hidden_candidate_models_are_entered_once_and_compared(release, project) -> None:
    rows = records(release, "train")
    p1 = Provider.objects.create(project=project, name="model-x", kind="openai", model="gpt-x")
    p2 = Provider.objects.create(project=project, name="model-y", kind="gemini", model="gem-y")
    for r in rows:
        Candidate.objects.create(item_id=r["item_id"], provider=p1, prompt_version="v", model_name="gpt-x",
                                 raw_reply="{}", fields=r["gold"])  # fmt: skip
        Candidate.objects.create(item_id=r["item_id"], provider=p2, prompt_version="v", model_name="gem-y",
                                 raw_reply="{}", fields={"label": "non-harmful"})  # fmt: skip
    created = candidate_submissions_enter(release=release, split="train")
    assert len(created) == 2
    assert candidate_submissions_enter(release=release, split="train") == []
    board = leaderboard(release=release, split="train")
    assert [r["model_name"] for r in board["rows"]] == ["model-x (gpt-x)", "model-y (gem-y)"]
    x, y = (Submission.objects.get(provider=p) for p in (p1, p2))
    diff = {d["key"]: d for d in submission_compare(x, y)}
    assert diff["jra"]["difference"] == 1.0 and diff["jra"]["ci"] == [1.0, 1.0]
    assert diff["label.acc"]["ci"][0] > 0
