"""Calibration of the judges against two human raters: kappas on Success checked against
sklearn's cohen_kappa_score, Spearman's rho against scipy's spearmanr, hostile uploads
refused with line numbers; pages and access."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import spearmanr
from sklearn.metrics import cohen_kappa_score

from core.errors import Invalid
from evaluation.calibration import calibration_create, calibration_labels_read
from evaluation.models import CalibrationSet
from evaluation.selectors import submission_scored
from evaluation.tests.conftest import records
from evaluation.tests.test_judging import _no_backoff, explanations, fake_llm, judge, judges, submit  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture
def judged(vikr_release, lead, judges):  # noqa: F811
    subs = []
    for n, name in enumerate(["Model A", "Model B", "Model C"]):
        rows = explanations(vikr_release)
        for k, r in enumerate(rows):
            if (k + n) % 3 == 0:  # each model misses a different third of the Knowledge
                r["explanation"] = r["explanation"].replace("background fact", "")
        sub = submit(vikr_release, lead, rows, name=name)
        assert judge(vikr_release, lead, sub, judges).status == "done"
        sub.refresh_from_db()
        subs.append(sub)
    return subs


def human_csv(sub, rng, *, flip=0.2) -> tuple[bytes, list, list]:
    """Per checklist item labels of two raters: rater 1 = the intersection decisions with a few
    flips, rater 2 = rater 1 with a few flips."""
    scored, _ = submission_scored(sub)
    lines = ["item_id,rater,checklist_item,label"]
    r1s, r2s = [], []
    for g in records(sub.release, "train"):
        items = [e["id"] for f in ("visual", "identity", "knowledge", "reasoning") for e in g["gold"][f]]
        i = scored.item_ids.index(g["item_id"])
        success = bool(scored.by_name()["success"].values[i])
        r1 = {rid: success or rid != "K1" for rid in items}
        if rng.random() < flip:
            r1["V1"] = not r1["V1"]
        r2 = dict(r1)
        if rng.random() < flip:
            r2["R1"] = not r2["R1"]
        for rater, lab in (("1", r1), ("2", r2)):
            for rid, ok in lab.items():
                lines.append(f"{g['item_id']},{rater},{rid},{'pass' if ok else 'fail'}")
        r1s.append(int(all(r1.values())))
        r2s.append(int(all(r2.values())))
    return ("\n".join(lines) + "\n").encode(), r1s, r2s


def test_kappas_equal_sklearn_and_rho_equals_scipy(judged, lead) -> None:
    sub = judged[0]
    data, r1, r2 = human_csv(sub, np.random.default_rng(3))
    cal = calibration_create(user=lead, submission=sub, data=data, name="pilot")
    rep = cal.report
    scored, _ = submission_scored(sub)
    figs = scored.by_name()
    order = [g["item_id"] for g in records(sub.release, "train")]
    idx = [scored.item_ids.index(i) for i in order]
    for name, prefix in (("judge1", "judge1."), ("judge2", "judge2."), ("intersection", "")):
        mine = figs[f"{prefix}success"].values[idx].astype(int).tolist()
        want = cohen_kappa_score(r1, mine)
        got = rep["success_kappa"][name]
        assert got["n"] == len(r1)
        if np.isnan(want):
            assert got["kappa"] is None
        else:
            assert got["kappa"] == pytest.approx(want, abs=1e-12)
    assert rep["human_kappa"]["kappa"] == pytest.approx(cohen_kappa_score(r1, r2), abs=1e-12)
    low, high = rep["human_kappa"]["ci"]
    assert low <= rep["human_kappa"]["kappa"] <= high
    assert rep["reference"] == "rater 1" and rep["n_both_raters"] == len(r1)
    # Spearman between the single-judge boards over the three submissions
    a = [s.scores["figures"]["judge1.success"]["value"] for s in judged]
    b = [s.scores["figures"]["judge2.success"]["value"] for s in judged]
    sp = rep["spearman"]
    assert sp["n_submissions"] == 3
    want_rho = spearmanr(a, b).statistic
    assert sp["figures"]["success"]["rho"] == pytest.approx(want_rho, abs=1e-12)
    assert CalibrationSet.objects.get().labels[str(order[0])]["1"].keys() == {"V", "I", "K", "R"}


def test_labels_per_layer_in_jsonl(judged, lead) -> None:
    sub = judged[0]
    rows = []
    for g in records(sub.release, "train"):
        for rater in (1, 2):
            rows.append(
                {"item_id": g["item_id"], "rater": rater, "layers": {"V": "pass", "I": 1, "K": "fail", "R": True}}
            )
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    labels, n = calibration_labels_read(submission=sub, data=data)
    assert n == 4 * len(rows) and all(v["1"] == {"V": 1, "I": 1, "K": 0, "R": 1} for v in labels.values())


HOSTILE = [
    (b"\xff\xfe\x00bad", "not UTF-8"),
    (b"item,who,what\n1,1,V1,pass\n", "header must be"),
    (b"", "empty"),
    (b"item_id,rater,checklist_item,label\n999999,1,V1,pass\n", "line 2: item_id '999999' is not an item"),
    (b"item_id,rater,checklist_item,label\n{item},3,V1,pass\n", "line 2: rater '3' must be 1 or 2"),
    (b"item_id,rater,checklist_item,label\n{item},1,V1,maybe\n", "line 2: label 'maybe' must be pass or fail"),
    (b"item_id,rater,checklist_item,label\n{item},1,Z9,pass\n", "line 2: 'Z9' is not a checklist item"),
    (
        b"item_id,rater,checklist_item,label\n{item},1,V1,pass\n{item},1,V1,fail\n",
        "line 3: item {item}, rater 1: V1 labelled twice (first on line 2)",
    ),
    (b"item_id,rater,checklist_item,label\n{item},1,V1,pass\n", "no label for I1"),
    (b"item_id,rater,layer,label\n{item},1,Q,pass\n", "line 2: layer 'Q' must be one of V, I, K, R"),
    (b'{{"item_id": {item}, "rater": 1}}\n[1]\nnot json\n', "line 1: needs one object"),
    (b'{{"item_id": {item}, "rater": 1}}\n[1]\nnot json\n', "line 3: not JSON"),
    (b"item_id,rater,checklist_item,label\n=cmd(),1,V1,pass\n", "is not an item"),
    (b"item_id,rater,checklist_item,label\n" + b"1,1,V1,pass\n" * 3 + b"\x00", "NUL"),
]


@pytest.fixture
def one_judged(vikr_release, lead, judges):  # noqa: F811
    sub = submit(vikr_release, lead, explanations(vikr_release))
    judge(vikr_release, lead, sub, judges)
    sub.refresh_from_db()
    return sub


@pytest.mark.parametrize(("data", "message"), HOSTILE)
def test_hostile_uploads_are_refused_with_line_numbers(one_judged, lead, data, message) -> None:
    sub = one_judged
    item = records(sub.release, "train")[0]["item_id"]
    data = data.replace(b"{item}", str(item).encode()).replace(b"{{", b"{").replace(b"}}", b"}")
    message = message.replace("{item}", str(item))
    with pytest.raises(Invalid) as exc:
        calibration_create(user=lead, submission=sub, data=data)
    problems = exc.value.errors["file"]
    text = str(exc.value) + " " + json.dumps(problems)
    assert message in text, text
    assert not CalibrationSet.objects.exists()


def test_a_huge_file_is_refused(one_judged, lead) -> None:
    with pytest.raises(Invalid, match="larger than 5 MB"):
        calibration_create(user=lead, submission=one_judged, data=b"x" * (6 << 20))


def test_calibration_needs_a_judged_submission(vikr_release, lead) -> None:
    sub = submit(vikr_release, lead, explanations(vikr_release))
    with pytest.raises(Invalid, match="Judge the submission first"):
        calibration_create(user=lead, submission=sub, data=b"item_id,rater,layer,label\n")


def test_pages_and_access(judged, lead, researcher, annotator_a, outsider, client_for, judges, tmp_path) -> None:  # noqa: F811
    sub = judged[0]
    base = f"/p/vk/releases/v{sub.release.number}"
    page = client_for(lead).get(f"{base}/leaderboard/?split=train").content.decode()
    assert 'id="judges"' in page and 'data-slot="2"' in page and 'id="judge-form"' in page
    assert "Model A" in page and "judge-gemini" in page
    research = client_for(researcher).get(f"{base}/leaderboard/?split=train").content.decode()
    assert 'id="judge-form"' not in research and 'id="judges"' in research
    for user, status in ((annotator_a, 403), (outsider, 404)):
        assert client_for(user).get(f"{base}/leaderboard/?split=train").status_code == status
        assert client_for(user).get(f"{base}/submissions/{sub.pk}/predictions.jsonl").status_code == status
    # only leads start judges or upload labels
    post = {"submission": sub.pk, "judge_1": judges[0].pk, "judge_2": judges[1].pk, "split": "train"}
    assert client_for(researcher).post(f"{base}/leaderboard/judge/", post).status_code == 403
    assert client_for(outsider).post(f"{base}/leaderboard/judge/", post).status_code == 404
    f = tmp_path / "labels.csv"
    f.write_bytes(b"item_id,rater,layer,label\n")
    with open(f, "rb") as fh:
        assert client_for(researcher).post(f"{base}/submissions/{sub.pk}/calibration/", {"file": fh}).status_code == 403
    # the download reproduces the stored judgements
    body = client_for(researcher).get(f"{base}/submissions/{sub.pk}/predictions.jsonl").content
    lines = [json.loads(x) for x in body.splitlines()]
    assert lines[0] == {"concord_release": {"project": "vk", "version": sub.release.number}}
    assert len(lines) == 1 + len(records(sub.release, "train")) and "judgements" in lines[1]
    # a hostile upload through the page: the message names the line, nothing stored
    f.write_bytes(b"item_id,rater,layer,label\n1,9,V,pass\n")
    with open(f, "rb") as fh:
        r = client_for(lead).post(f"{base}/submissions/{sub.pk}/calibration/", {"file": fh}, follow=True)
    assert r.status_code == 200 and "line 2" in r.content.decode()
    assert not CalibrationSet.objects.exists()
    subpage = client_for(lead).get(f"{base}/submissions/{sub.pk}/").content.decode()
    assert 'id="calibration-form"' in subpage and 'id="judged-download"' in subpage
