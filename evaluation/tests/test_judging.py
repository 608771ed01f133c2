"""Two-judge evaluation of VIKR explanations (core.jobs): the real openai and google-genai SDKs
talk to candidates.tests.fake_llm; the judges never see the model's identity; verdicts are
stored so a resumed or repeated run never pays twice; the figures follow the paper's rule
and are recomputed offline by the release's own evaluate.py from the judged predictions."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from candidates.services import provider_create
from candidates.tests.fake_llm import FakeLLM
from core.models import JobStatus
from evaluation import judge_runs
from evaluation.judge_runs import judge_run_start
from evaluation.models import JudgeRun, JudgeVerdict, ProviderRun, Submission
from evaluation.selectors import predictions_unpack
from evaluation.services import provider_run_start, submission_create
from evaluation.tasks import judge_run_task, provider_run_task
from evaluation.tests.conftest import jsonl, records, upload
from evaluation.tests.vikr import explanation_covering, fake_judge
from exports.selectors import release_dir

pytestmark = pytest.mark.django_db
SECRET_NAME = "SecretModel-XYZ-9000"
SECRET_DESCRIPTION = "Trained by ACME-Labs-Internal on private data"


@pytest.fixture
def fake_llm():
    server = FakeLLM().start()
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def _no_backoff(monkeypatch):
    monkeypatch.setattr(judge_runs, "RETRY_BASE_SECONDS", 0.0)


@pytest.fixture
def judges(vikr_project, fake_llm, monkeypatch):
    monkeypatch.setenv("CONCORD_TEST_OPENAI_KEY", "sk-test-openai-0123456789")
    monkeypatch.setenv("CONCORD_TEST_GEMINI_KEY", "gm-test-gemini-0123456789")
    # judge 2 (Gemini) is stricter: it never passes a third Visual item
    fake_llm.reply_by_model = {"gpt-judge": fake_judge(), "gemini-judge": fake_judge(fails={"V3"})}
    common = {"project": vikr_project, "requests_per_minute": 6000, "timeout_seconds": 2}
    return [
        provider_create(
            name="judge-gpt",
            kind="openai",
            model="gpt-judge",
            base_url=f"{fake_llm.url}/v1",
            api_key_env="CONCORD_TEST_OPENAI_KEY",
            **common,
        ),
        provider_create(
            name="judge-gemini",
            kind="gemini",
            model="gemini-judge",
            base_url=fake_llm.url,
            api_key_env="CONCORD_TEST_GEMINI_KEY",
            **common,
        ),
    ]


def explanations(release, split="train"):
    """Even items: every layer covered; odd items: no Reasoning."""
    out = []
    for n, g in enumerate(records(release, split)):
        layers = ("visual", "identity", "knowledge", "reasoning") if n % 2 == 0 else ("visual", "identity", "knowledge")
        out.append({"item_id": g["item_id"], "explanation": explanation_covering(g, layers=layers)})
    return out


def submit(release, user, rows, name=SECRET_NAME):
    return submission_create(
        user=user,
        release=release,
        split="train",
        model_name=name,
        description=SECRET_DESCRIPTION,
        file=upload(jsonl(rows)),
    )


def expected(release, split="train"):
    """Hand-computed per item (intersection rule): Success needs R (even items) and, because
    judge 2 fails every V3, a gold Visual list without a third item."""
    out = []
    for n, g in enumerate(records(release, split)):
        has_v3 = any(e["id"] == "V3" for e in g["gold"]["visual"])
        out.append({"V": int(not has_v3), "R": int(n % 2 == 0), "success": int(n % 2 == 0 and not has_v3)})
    return out


def judge(release, lead, sub, judges):
    run = judge_run_start(user=lead, submission=sub, judge_1_id=judges[0].pk, judge_2_id=judges[1].pk, enqueue=False)
    judge_run_task.apply(args=[run.pk])
    run.refresh_from_db()
    return run


def test_two_sdk_judges_score_every_item_blind_to_the_model(vikr_release, lead, judges, fake_llm) -> None:
    rows = explanations(vikr_release)
    sub = submit(vikr_release, lead, rows)
    assert sub.scores["judging"] == "pending" and sub.scores["figures"] == {}
    run = judge(vikr_release, lead, sub, judges)
    assert run.status == JobStatus.DONE, run.error
    gpt, gem = fake_llm.for_model("gpt-judge"), fake_llm.for_model("gemini-judge")
    assert len(gpt) == len(gem) == len(rows)
    assert gem[0].path == "/v1beta/models/gemini-judge:generateContent"
    for rec in gpt + gem:
        body = json.dumps(rec.body, ensure_ascii=False)
        assert SECRET_NAME not in body and "SecretModel" not in body and "ACME" not in body
        assert str(sub.pk) not in rec.user_text.split("RESPONSE TO GRADE")[0].split("CHECKLIST")[0]
        assert rec.image_mime == "image/jpeg" and rec.image_bytes[:2] == b"\xff\xd8"
        assert "CHECKLIST" in rec.user_text and "<<<RESPONSE" in rec.user_text
    system = gpt[0].body["messages"][0]["content"]
    assert "EXACT entity identification" in system and "semantically" in system
    sub.refresh_from_db()
    want = expected(vikr_release)
    figs = sub.scores["figures"]
    assert figs["success"]["value"] == pytest.approx(sum(w["success"] for w in want) / len(want))
    assert figs["R"]["value"] == pytest.approx(sum(w["R"] for w in want) / len(want))
    assert figs["V"]["value"] == pytest.approx(sum(w["V"] for w in want) / len(want))
    assert figs["judge1.V"]["value"] == 1.0  # judge 1 alone passes every Visual item
    assert figs["success"]["n"] == len(rows) and figs["success"]["ci"] is not None
    assert figs["success_3of4"]["value"] >= figs["success"]["value"]
    assert set(sub.scores["breakdowns"]) == {"gold.language", "gold.domain"}
    assert [j["name"] for j in sub.scores["judges"]] == ["judge-gpt", "judge-gemini"]
    assert JudgeVerdict.objects.filter(submission=sub).count() == 2 * len(rows)

    # the same judges again: every verdict is reused, nothing is asked, the figures are the same
    asked = len(fake_llm.requests)
    again = judge(vikr_release, lead, sub, judges)
    assert again.status == JobStatus.DONE and len(fake_llm.requests) == asked
    assert again.counts["reused"] == 2 * len(rows)
    sub.refresh_from_db()
    assert sub.scores["figures"]["success"] == figs["success"]


def test_offline_evaluate_py_recomputes_the_figures_from_the_judged_predictions(
    vikr_release, lead, judges, tmp_path
) -> None:
    sub = submit(vikr_release, lead, explanations(vikr_release))
    judge(vikr_release, lead, sub, judges)
    sub.refresh_from_db()
    folder = release_dir(vikr_release)
    preds = tmp_path / "judged.jsonl"
    preds.write_text(
        "".join(
            json.dumps({"item_id": int(k), **v}, ensure_ascii=False) + "\n" for k, v in predictions_unpack(sub).items()
        )
    )
    out = subprocess.run(
        [
            sys.executable,
            str(folder / "evaluate.py"),
            str(preds),
            "--split",
            "train",
            "--json",
            "--release",
            str(folder),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    offline = json.loads(out.stdout)
    for key, fig in sub.scores["figures"].items():
        assert offline["figures"][key]["value"] == fig["value"], key
        assert offline["figures"][key]["ci"] == fig["ci"], key
        assert offline["figures"][key]["n"] == fig["n"], key


def test_transient_errors_are_retried(vikr_release, lead, judges, fake_llm) -> None:
    sub = submit(vikr_release, lead, explanations(vikr_release))
    fake_llm.plan("gpt-judge", ["429:0", "503"])
    fake_llm.plan("gemini-judge", ["500"])
    run = judge(vikr_release, lead, sub, judges)
    assert run.status == JobStatus.DONE, run.error
    assert run.counts["transient_errors"] == 3
    assert JudgeVerdict.objects.filter(submission=sub).count() == 2 * len(records(vikr_release, "train"))


def test_a_run_that_fails_on_transient_errors_resumes_without_paying_twice(
    vikr_release, lead, judges, fake_llm
) -> None:
    rows = explanations(vikr_release)
    sub = submit(vikr_release, lead, rows)
    # item 1 both judges ok, item 2: gpt ok, gemini down four times
    fake_llm.plan("gemini-judge", ["ok", "503", "503", "503", "503"])
    run = judge(vikr_release, lead, sub, judges)
    assert run.status == JobStatus.FAILED and "judge-gemini" in run.error and "resume" in run.error
    kept = JudgeVerdict.objects.filter(submission=sub).count()
    assert kept == 3
    before = len(fake_llm.requests)
    again = judge(vikr_release, lead, sub, judges)
    assert again.status == JobStatus.DONE, again.error
    # only the 2 * n - 3 missing verdicts were asked
    assert len(fake_llm.requests) - before == 2 * len(rows) - kept
    assert again.counts["reused"] == kept


def test_missing_decisions_are_asked_again_then_counted_as_fail(vikr_release, lead, judges, fake_llm) -> None:
    rows = explanations(vikr_release)
    sub = submit(vikr_release, lead, rows)
    # gpt: the first reply is prose (asked again, then fine); gemini never decides R1
    fake_llm.plan("gpt-judge", ["prose"])
    fake_llm.reply_by_model["gemini-judge"] = fake_judge(fails={"V3"}, silent={"R1"})
    run = judge(vikr_release, lead, sub, judges)
    assert run.status == JobStatus.DONE, run.error
    assert run.counts["asked_again"] == 1 + len(rows)
    sub.refresh_from_db()
    assert sub.scores["figures"]["R"]["value"] == 0.0  # undecided = fail
    assert sub.scores["figures"]["judge1.R"]["value"] == 0.5
    undecided = sub.report["judging"]["undecided"]
    assert len(undecided) == len(rows) and all(
        u == {"item_id": u["item_id"], "judge": 2, "ids": ["R1"]} for u in undecided
    )
    assert "counted as fail" in sub.report["judging"]["rule"]
    v = JudgeVerdict.objects.get(submission=sub, provider=judges[0], item_id=str(rows[0]["item_id"]))
    assert len(v.replies) == 2 and v.undecided == []


def test_a_permanent_error_fails_the_run_and_publishes_nothing(vikr_release, lead, judges, fake_llm) -> None:
    sub = submit(vikr_release, lead, explanations(vikr_release))
    fake_llm.plan("gpt-judge", ["401"])
    run = judge(vikr_release, lead, sub, judges)
    assert run.status == JobStatus.FAILED and "refused" in run.error
    sub.refresh_from_db()
    assert sub.scores["judging"] == "pending"


def test_missing_and_empty_explanations_cost_nothing_and_fail(vikr_release, lead, judges, fake_llm) -> None:
    rows = explanations(vikr_release)
    rows[1]["explanation"] = "   "
    sub = submit(vikr_release, lead, rows[1:])  # the first item has no line at all
    assert sub.report["counts"]["missing"] == 1 and sub.report["counts"]["empty_explanations"] == 1
    run = judge(vikr_release, lead, sub, judges)
    assert run.status == JobStatus.DONE
    assert len(fake_llm.for_model("gpt-judge")) == len(rows) - 2
    sub.refresh_from_db()
    assert sub.scores["figures"]["V"]["n"] == len(rows)


def test_uploaded_decisions_are_ignored(vikr_release, lead, judges) -> None:
    rows = [{**r, "judgements": [{"V1": "pass"}, {"V1": "pass"}]} for r in explanations(vikr_release)]
    sub = submit(vikr_release, lead, rows)
    assert all(set(p) == {"explanation"} for p in predictions_unpack(sub).values())
    assert sub.scores["figures"] == {}


def test_the_judges_must_differ_and_belong_to_the_project(vikr_release, lead, judges, outsider) -> None:
    from core.errors import Invalid, NotFound

    sub = submit(vikr_release, lead, explanations(vikr_release))
    with pytest.raises(Invalid):
        judge_run_start(user=lead, submission=sub, judge_1_id=judges[0].pk, judge_2_id=judges[0].pk, enqueue=False)
    other = provider_create(
        project=outsider.memberships.first().project,
        name="x",
        kind="openai-compatible",
        model="m",
        base_url="http://127.0.0.1:9/v1",
    )
    with pytest.raises(NotFound):
        judge_run_start(user=lead, submission=sub, judge_1_id=judges[0].pk, judge_2_id=other.pk, enqueue=False)
    assert not JudgeRun.objects.exists()


def test_provider_run_asks_for_a_closed_book_explanation(vikr_release, lead, judges, fake_llm, vikr_project) -> None:
    fake_llm.reply_by_model["explainer"] = lambda text: {"explanation": "It shows 柯南 making a pun."}
    model = provider_create(
        project=vikr_project,
        name="explainer",
        kind="openai-compatible",
        model="explainer",
        base_url=f"{fake_llm.url}/v1",
        requests_per_minute=6000,
        timeout_seconds=2,
    )
    fake_llm.plan("explainer", ["prose"])  # a reply without JSON is the explanation itself
    run = provider_run_start(user=lead, release=vikr_release, split="train", provider_id=model.pk, enqueue=False)
    provider_run_task.apply(args=[run.pk])
    run = ProviderRun.objects.get(pk=run.pk)
    assert run.status == JobStatus.DONE, run.error
    reqs = fake_llm.for_model("explainer")
    assert len(reqs) == len(records(vikr_release, "train"))
    assert all(r.user_text == "Explain this meme." and r.image_bytes for r in reqs)  # image only, no item text
    sub = Submission.objects.get(pk=run.submission_id)
    preds = predictions_unpack(sub)
    texts = sorted(p["explanation"] for p in preds.values())
    assert texts[0] == "I cannot help with that request." and texts[-1] == "It shows 柯南 making a pun."
    assert sub.scores["judging"] == "pending"
    done = judge(vikr_release, lead, sub, judges)
    assert done.status == JobStatus.DONE
