"""REST: a lead starts the judges and uploads human labels; researchers read the judged
leaderboard, calibration and judged predictions; other roles and projects are refused."""

from __future__ import annotations

import io

import pytest
from rest_framework.test import APIClient

from evaluation.demo import demo_vikr_leaderboard, vikr_demo_judges, vikr_demo_material
from evaluation.models import JudgeRun
from evaluation.tasks import judge_run_task
from evaluation.tests.conftest import jsonl, records

pytestmark = pytest.mark.django_db


def api(user):
    c = APIClient()
    c.force_authenticate(user)
    return c


def test_judge_and_calibrate_over_rest(vikr_release, lead, researcher, annotator_a, outsider, tmp_path) -> None:
    subs = demo_vikr_leaderboard(release=vikr_release, user=lead, folder=tmp_path, split="train")
    base = f"/api/projects/vk/releases/{vikr_release.number}/evaluations"
    board = api(researcher).get(f"{base}/?split=train").json()
    assert board["judged"] is True and [c["key"] for c in board["columns"]][:5] == ["V", "I", "K", "R", "success"]
    assert [b["slot"] for b in board["judge_boards"]] == [1, 2] and len(board["judge_boards"][0]["rows"]) == 2
    assert "success" in board["judge_agreement"]["figures"]
    for user, code in ((annotator_a, 403), (outsider, 404)):
        assert api(user).get(f"{base}/?split=train").status_code == code
        assert api(user).get(f"{base}/{subs[0].pk}/predictions.jsonl").status_code == code
    text = api(researcher).get(f"{base}/{subs[0].pk}/predictions.jsonl").content.decode()
    assert text.count("\n") == 1 + len(records(vikr_release, "train")) and '"judgements"' in text

    # a new submission judged over REST (only leads)
    rows, replay = vikr_demo_material(release=vikr_release, split="train")
    judges = vikr_demo_judges(project=vikr_release.project, replay_lines=replay)
    f = io.BytesIO(jsonl(rows["Thorough explainer"]))
    f.name = "again.jsonl"
    sub = api(lead).post(f"{base}/", {"file": f, "model_name": "Again", "split": "train"}, format="multipart").json()
    body = {"judge_1": judges[0].pk, "judge_2": judges[1].pk}
    assert api(researcher).post(f"{base}/{sub['id']}/judge/", body, format="json").status_code == 403
    r = api(lead).post(f"{base}/{sub['id']}/judge/", body, format="json")
    assert r.status_code == 202, r.content
    judge_run_task.apply(args=[r.json()["id"]])  # enqueued on commit; the test transaction never commits
    assert JudgeRun.objects.get(pk=r.json()["id"]).status == "done"
    assert api(researcher).get(f"{base}/{sub['id']}/").json()["figures"]["success"]["n"] == len(
        rows["Thorough explainer"]
    )
    assert (
        api(lead)
        .post(f"{base}/{sub['id']}/judge/", {"judge_1": judges[0].pk, "judge_2": judges[0].pk}, format="json")
        .status_code
        == 400
    )

    labels = "item_id,rater,layer,label\n" + "".join(
        f"{g['item_id']},{rater},{x},pass\n" for g in records(vikr_release, "train") for rater in (1, 2) for x in "VIKR"
    )
    up = io.BytesIO(labels.encode())
    up.name = "labels.csv"
    assert (
        api(researcher).post(f"{base}/{subs[0].pk}/calibration/", {"file": up}, format="multipart").status_code == 403
    )
    up.seek(0)
    r = api(lead).post(f"{base}/{subs[0].pk}/calibration/", {"file": up, "name": "all pass"}, format="multipart")
    assert r.status_code == 201, r.content
    rep = r.json()["report"]
    assert rep["reference"] == "rater 1" and rep["human_kappa"]["kappa"] is None  # both raters constant
    bad = io.BytesIO(b"item_id,rater,layer,label\n1,7,V,pass\n")
    bad.name = "bad.csv"
    r = api(lead).post(f"{base}/{subs[0].pk}/calibration/", {"file": bad}, format="multipart")
    assert r.status_code == 400 and "line 2" in r.content.decode()
    assert len(api(researcher).get(f"{base}/{subs[0].pk}/calibration/").json()) == 1
