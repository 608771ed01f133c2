"""MemeBench's whole construction pipeline on the REAL ``vikr`` preset, as a lead runs it on the
demo (issue 15 "Done means"): ``load_demo`` builds demo-vikr -> two annotators write reference
explanations (half Chinese) -> the LLM converts them (the demo's replay converter, once the real
openai SDK against candidates.tests.fake_llm) -> QC accepts, edits, removes with a reason ->
an independence study (stratified draw, two blind re-explainers, a third person judges, a
conflict adjudicated, a reference revised) -> a release with the construction counts,
independence_study.json and the QC'd checklists as single gold values -> two submitted models'
explanations judged by two replay judges -> the leaderboard (V, I, K, R, Success, 3 of 4, CIs)
-> a calibration upload gives the kappas.

Every figure is computed by hand for the tiny dataset (six kept memes), or against sklearn /
scipy."""

from __future__ import annotations

import json
import math

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.test import Client
from django.utils.html import escape
from scipy.stats import spearmanr
from sklearn.metrics import cohen_kappa_score

import candidates.tests.conftest as _candidates
from adjudication.models import GoldRecord
from annotation.factories import ready
from annotation.models import Annotation
from annotation.services import assignment_claim_next
from candidates.endpoints import replay_file_path
from candidates.models import Conversion, Provider
from candidates.services import provider_create
from core.errors import Invalid
from core.models import JobStatus
from evaluation.demo import VIKR_JUDGE_FILE, VIKR_JUDGES, VIKR_MODELS, demo_vikr_leaderboard, vikr_model_file
from evaluation.judging import judge_replay_key
from evaluation.models import CalibrationSet, JudgeVerdict, Submission
from evaluation.selectors import leaderboard
from evaluation.tests.vikr import fake_judge
from exports.models import Release
from exports.selectors import release_dir
from projects.models import Project, Stage
from projects.services import project_settings_save
from studies.models import Reexplanation, Study, StudyItem
from studies.selectors import study_report
from workflow.demo import CONVERTER, DEMO_VIKR
from workflow.services import annotation_submit, conversion_provider_set, item_flag

pytestmark = pytest.mark.django_db
fake_llm = _candidates.fake_llm  # the fixtures of candidates/tests/conftest.py
api_keys = _candidates.api_keys

SLUG = "demo-vikr"

#: source id -> the reference its writer submits: explanation, language, domain. MemeBench:
#: Chinese memes explained in Chinese, English ones in English.
REFERENCES = {
    "demo-00": ("外星人降落后第一句话就问WiFi密码：把星际来访的宏大场面和蹭网的小事并置。", "Chinese", "ACG"),
    "demo-01": (
        "The 'we came in peace' greeting of film aliens is undercut by a trivial motive.",
        "English",
        "Movies and TV",
    ),
    "demo-02": ("佐格星人用叉子喝咖啡，嘲讽外星人不懂地球的餐桌习惯。", "Chinese", "Daily life"),
    "demo-03": ("'Hits different' slang: Monday coffee feels unusually strong.", "English", "Daily life"),
    "demo-04": ("蓝月教团把猫当成小祭司：调侃猫主人对猫的崇拜。", "Chinese", "ACG"),
    "demo-05": ("A cat's blank stare as the face of feigned attention in meetings.", "English", "Daily life"),
    "demo-06": ("冰箱门一开猫就听见了，养猫人都懂。", "Chinese", "Daily life"),
    "demo-07": ("Glorbian monks are stingy with cat treats, against the monk stereotype.", "English", "ACG"),
}
FLAGGED_AT_REFERENCE = "demo-07"  # the writer removes it: image quality
REMOVED_AT_QC = "demo-05"  # the QC reviewer removes it: ambiguity
CONVERTED_BY_OPENAI = "demo-00"


def _client(user) -> Client:
    c = Client()
    c.force_login(user)
    return c


def _wilson(k: int, n: int) -> dict:
    """The Wilson score interval at 95% (z = 1.959964), by its formula, rounded as reported."""
    z, p = 1.959963984540054, k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return {"k": k, "n": n, "share": round(p, 4), "ci": [round(centre - half, 4), round(centre + half, 4)]}


def _ready_all(project, users) -> None:
    for u in users:
        ready(u, project)


def _source(item_or_annotation) -> str:
    item = getattr(item_or_annotation, "item", item_or_annotation)
    return item.source_id


def _vikr_demo_only(monkeypatch) -> None:
    from demo.management.commands import load_demo

    monkeypatch.setattr(load_demo, "DEMO_PROJECTS", [p for p in load_demo.DEMO_PROJECTS if p[0] == SLUG])


def test_load_demo_leaves_demo_vikr_ready_to_run_and_runs_nothing(monkeypatch, settings, capsys) -> None:
    """As demo-meme3w and demo-aha are left (items and replay models ready, nothing annotated):
    demo-vikr's memes wait for references, its converter is chosen, and the two demo models'
    files and the two replay judges wait for the lead's first release. Idempotent."""
    _vikr_demo_only(monkeypatch)
    call_command("load_demo")
    out = capsys.readouterr().out
    call_command("load_demo", "--quiet")
    project = Project.objects.get(slug=SLUG)
    assert project.items.filter(stage=Stage.ANNOTATING).count() == len(DEMO_VIKR) == project.items.count()
    assert not Annotation.objects.filter(item__project=project).exists()
    assert not Conversion.objects.filter(item__project=project).exists()
    assert not Release.objects.filter(project=project).exists() and not Submission.objects.exists()
    assert not Study.objects.exists()
    providers = Provider.objects.filter(project=project)
    assert sorted(p.name for p in providers) == sorted([CONVERTER, *VIKR_JUDGES])
    assert project.get_workflow().stage(1).model["provider"] == CONVERTER
    # six people for the independence study: the auditor also reviews here (and only here)
    assert set(project.memberships.filter(user__username="auditor").values_list("role", flat=True)) == {
        "auditor",
        "reviewer",
    }
    ids = {i.source_id: i.pk for i in project.items.all()}
    folder = settings.VAR_DIR / "demo_source" / f"{SLUG}-models"
    for model in VIKR_MODELS:
        path = vikr_model_file(folder, model, SLUG)
        assert str(path) in out
        rows = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines()]
        assert sorted(r["item_id"] for r in rows) == sorted(ids.values()) and all(r["explanation"] for r in rows)
    replay = replay_file_path(project.pk, VIKR_JUDGE_FILE).read_text(encoding="utf-8").splitlines()
    assert len(replay) == len(VIKR_JUDGES) * len(VIKR_MODELS) * len(DEMO_VIKR)  # not doubled by the second run
    # The thorough model names the entity of demo-00 (Identity), the literal one never does.
    thorough, literal = (
        {
            r["item_id"]: r["explanation"]
            for r in map(json.loads, vikr_model_file(folder, m, SLUG).read_text().splitlines())
        }
        for m in VIKR_MODELS
    )
    identity = DEMO_VIKR["demo-00"][1]["identity"][0]["text"]
    assert identity in thorough[ids["demo-00"]] and identity not in literal[ids["demo-00"]]


@pytest.fixture
def demo(monkeypatch, settings):
    """``load_demo`` restricted to the vikr project (the other demo projects are not this
    test's subject and cost a minute): the command's own code path for demo-vikr."""
    _vikr_demo_only(monkeypatch)
    call_command("load_demo", "--quiet")
    project = Project.objects.get(slug=SLUG)
    users = {m.user.username: m.user for m in project.memberships.select_related("user")}
    return project, users


def test_memebench_pipeline_on_the_demo_vikr_project(
    demo,
    settings,
    fake_llm,
    api_keys,
    client,
    django_capture_on_commit_callbacks,
) -> None:
    project, users = demo
    lead, writers = users["lead"], [users["annotator1"], users["annotator2"]]
    items = {i.source_id: i for i in project.items.all()}
    assert sorted(items) == sorted(DEMO_VIKR) and all(i.stage == Stage.ANNOTATING for i in items.values())
    assert project.get_workflow().stage(1).model["provider"] == CONVERTER
    _ready_all(project, writers)

    # ---------------------------------------------------------------- 1. references
    # demo-00 is converted by a real SDK: the lead points the conversion stage at an OpenAI
    # provider (the fake server) for it, then back at the demo's replay converter.
    gpt = provider_create(
        project=project,
        name="gpt-converter",
        kind="openai",
        model="gpt-conv",
        base_url=f"{fake_llm.url}/v1",
        api_key_env="CONCORD_TEST_OPENAI_KEY",
        requests_per_minute=6000,
        timeout_seconds=5,
    )
    fake_llm.reply_for = lambda text: DEMO_VIKR[CONVERTED_BY_OPENAI][1]
    edited = {
        "demo-02": {
            "visual": [
                {"id": "V1", "text": "一杯放在木桌上的咖啡，杯中有拉花"},
                {"id": "V2", "text": "一把叉子放在杯旁"},
            ]
        },
        "demo-03": {"identity": [{"id": "I1", "text": "The cup is the narrator's Monday coffee", "link": "V1"}]},
    }
    written_by: dict[str, object] = {}
    qc_by: dict[str, object] = {}

    def write(writer, mine) -> None:
        sid = _source(mine)
        explanation, language, domain = REFERENCES[sid]
        written_by[sid] = writer
        if sid == FLAGGED_AT_REFERENCE:
            with pytest.raises(Invalid):  # a QC reason is not a reference-stage reason
                item_flag(annotator=writer, item=mine.item, reason="ambiguity")
            item_flag(annotator=writer, item=mine.item, reason="image_quality", note="too blurry to read")
            return
        openai = sid == CONVERTED_BY_OPENAI
        if openai:
            conversion_provider_set(project=project, user=lead, stage_name="conversion", provider=gpt.name)
        with django_capture_on_commit_callbacks(execute=True):
            annotation_submit(
                annotator=writer,
                item=mine.item,
                values={"explanation": explanation, "language": language, "domain": domain},
                version=mine.version,
            )
        if openai:
            conversion_provider_set(project=project, user=lead, stage_name="conversion", provider=CONVERTER)

    def check(checker, review) -> None:
        sid = _source(review)
        assert written_by[sid] != checker  # nobody checks their own reference
        qc_by[sid] = checker
        if sid == REMOVED_AT_QC:
            item_flag(annotator=checker, item=review.item, reason="ambiguity", note="two readings")
            return
        if sid == "demo-03":  # as converted the link dangles: QC must fix it
            with pytest.raises(Invalid):
                annotation_submit(annotator=checker, item=review.item, values=review.values, version=review.version)
        annotation_submit(
            annotator=checker, item=review.item, values={**review.values, **edited.get(sid, {})}, version=review.version
        )

    # The two annotators work their queues in turn: the queue hands out QC of the other's
    # converted items (finishing items first) and new references.
    idle = 0
    while idle < 2:
        idle = 0
        for person in writers:
            result = assignment_claim_next(annotator=person, project=project)
            if result.annotation is None:
                idle += 1
                continue
            assert result.annotation.stage in (0, 2)
            (write if result.annotation.stage == 0 else check)(person, result.annotation)
    assert len(written_by) == len(items)

    # ---------------------------------------------------------------- 2. conversion
    conversions = {
        c.item.source_id: c for c in Conversion.objects.filter(item__project=project).select_related("item", "provider")
    }
    assert sorted(conversions) == sorted(set(DEMO_VIKR) - {FLAGGED_AT_REFERENCE})
    assert all(c.status == JobStatus.DONE for c in conversions.values()), {k: c.error for k, c in conversions.items()}
    assert conversions[CONVERTED_BY_OPENAI].provider == gpt
    assert {k for k, c in conversions.items() if c.provider.name == CONVERTER} == set(conversions) - {
        CONVERTED_BY_OPENAI
    }
    sent = fake_llm.for_model("gpt-conv")
    assert len(sent) == 1 and REFERENCES[CONVERTED_BY_OPENAI][0] in sent[0].user_text and sent[0].image_bytes
    # The automated checks flag, never fix: an entity named in V (demo-02), a dangling link (demo-03),
    # captions that transcribe a name (demo-01, demo-04).
    assert {k: sorted({f["check"] for f in c.flags}) for k, c in conversions.items() if c.flags} == {
        "demo-01": ["entity_in_visual"],
        "demo-02": ["entity_in_visual"],
        "demo-03": ["link"],
        "demo-04": ["entity_in_visual"],
    }
    assert conversions["demo-03"].values["identity"][0]["link"] == "V3"
    client.force_login(lead)
    page = client.get(f"/p/{SLUG}/conversions/").content.decode()
    assert "7 converted" in page and CONVERTER in page

    # ---------------------------------------------------------------- 3. QC
    assert sorted(qc_by) == sorted(conversions)
    golds = {
        g.item.source_id: g
        for g in GoldRecord.objects.filter(item__project=project, is_current=True).select_related("item")
    }
    kept = sorted(set(DEMO_VIKR) - {FLAGGED_AT_REFERENCE, REMOVED_AT_QC})
    assert sorted(golds) == kept
    g = golds["demo-02"].values
    assert g["explanation"] == REFERENCES["demo-02"][0] and g["language"] == "Chinese" and g["domain"] == "Daily life"
    assert g["visual"] == [{**v, "link": None} for v in edited["demo-02"]["visual"]]
    assert golds["demo-02"].provenance["visual"]["edited"] is True
    assert golds["demo-04"].provenance["visual"]["edited"] is False

    # ---------------------------------------------------------------- 4. independence study
    # The demo's own people: annotator1/2 wrote and checked every reference, so annotator3 and
    # the reviewer re-explain blind, the auditor (a reviewer in demo-vikr too) judges, the lead
    # adjudicates.
    blind = [users["annotator3"], users["reviewer"]]
    judge = users["auditor"]
    as_ = {u.username: _client(u) for u in [lead, judge, *blind]}
    response = as_["lead"].post(
        f"/p/{SLUG}/studies/new",
        {"name": "Independence", "sample_size": "4", "seed": "7", "strata_fields": ["language", "domain"]},
    )
    assert response.status_code == 302, response.content.decode()[:500]
    study = Study.objects.get(project=project)
    # Six kept memes in four language x domain strata (2, 2, 1, 1): four draws, one per stratum.
    assert study.reference_field == "explanation" and study.eligible == 6
    assert {s["key"]: (s["population"], s["sampled"]) for s in study.strata} == {
        "language=Chinese|domain=ACG": (2, 1),
        "language=Chinese|domain=Daily life": (2, 1),
        "language=English|domain=Daily life": (1, 1),
        "language=English|domain=Movies and TV": (1, 1),
    }
    drawn = {si.item.source_id: si for si in study.items.select_related("item")}
    assert {"demo-01", "demo-03"} <= set(drawn) and not {FLAGGED_AT_REFERENCE, REMOVED_AT_QC} & set(drawn)
    for sid, si in drawn.items():
        assert si.reference_text == REFERENCES[sid][0]
        # the writer and the QC reviewer saw the reference: never re-explainers
        assert {written_by[sid].pk, qc_by[sid].pk} <= set(si.blocked)
    assert as_["lead"].post(f"/p/{SLUG}/studies/{study.pk}/confirm").status_code == 302

    for person in blind:
        c = as_[person.username]
        response = c.post(f"/p/{SLUG}/studies/{study.pk}/reexplain/next")
        for _ in drawn:
            assert "/reexplain/" in response["Location"], response["Location"]
            page = c.get(response["Location"]).content.decode()
            assert not any(escape(r[0]) in page for r in REFERENCES.values())  # blind: the image only
            version = Reexplanation.objects.get(pk=int(response["Location"].rstrip("/").rsplit("/", 1)[1])).version
            response = c.post(
                response["Location"],
                {"text": f"{person.username}: 一个关于外星人和猫的笑话", "version": version, "action": "submit"},
            )
        assert response["Location"] == f"/p/{SLUG}/studies/"
    assert set(study.items.values_list("status", flat=True)) == {StudyItem.Status.JUDGING}

    chinese_acg = next(s for s in drawn if REFERENCES[s][1:] == ("Chinese", "ACG"))
    chinese_daily = next(s for s in drawn if REFERENCES[s][1:] == ("Chinese", "Daily life"))
    verdicts = {
        "demo-01": ["fully", "fully"],
        chinese_acg: ["fully", "fully"],
        "demo-03": ["partially", "not"],  # a conflict
        chinese_daily: ["not", "not"],  # agreed: the reference is off, the lead revises it
    }
    c = as_[judge.username]
    response = c.post(f"/p/{SLUG}/studies/{study.pk}/judge/next")
    given: dict[str, list[str]] = {}
    while "/judge/" in response["Location"]:
        r = Reexplanation.objects.select_related("study_item__item").get(
            pk=int(response["Location"].rstrip("/").rsplit("/", 1)[1])
        )
        sid = r.study_item.item.source_id
        assert (
            escape(REFERENCES[sid][0]) in c.get(response["Location"]).content.decode()
        )  # the judge sees the reference
        verdict = verdicts[sid][len(given.setdefault(sid, []))]
        given[sid].append(verdict)
        response = c.post(response["Location"], {"verdict": verdict})
    assert given == verdicts
    conflict = drawn["demo-03"]
    conflict.refresh_from_db()
    assert conflict.status == StudyItem.Status.ADJUDICATION
    response = as_["lead"].post(
        f"/p/{SLUG}/studies/{study.pk}/adjudicate/{conflict.pk}/", {"verdict": "partially", "note": "same joke"}
    )
    assert response.status_code == 302
    revised_text = "冰箱门一开，猫在三个房间外都能听见：夸张猫对食物声音的灵敏，养猫人都懂。"
    response = as_["lead"].post(
        f"/p/{SLUG}/studies/{study.pk}/items/{drawn[chinese_daily].pk}/revise",
        {
            "text": revised_text,
            "note": "both re-explainers read it otherwise",
            "expected": REFERENCES[chinese_daily][0],
        },
    )
    assert response.status_code == 302
    assert (
        GoldRecord.objects.get(item__source_id=chinese_daily, item__project=project, is_current=True).values[
            "explanation"
        ]
        == revised_text
    )
    report = study_report(study=study)
    assert report["sampled"] == 4 and report["decided"] == 4
    assert report["verdicts"] == {"fully": 2, "partially": 1, "not": 1}
    assert report["judge_verdicts"] == {"fully": 4, "partially": 1, "not": 3}
    assert report["compatible"] == {**_wilson(3, 4), "definition": "fully or partially compatible"}
    assert report["fully"] == _wilson(2, 4)
    assert report["conflicts"]["items"] == 1 and report["conflicts"]["adjudicated"] == 1
    assert report["revisions"] == {"count": 1, "items": [drawn[chinese_daily].item_id]}
    assert report["removals"]["count"] == 0
    page = as_["lead"].get(f"/p/{SLUG}/studies/{study.pk}/").content.decode()
    assert "<strong>75%</strong>" in page and "3 of 4 decided items" in page
    api = as_["lead"].get(f"/api/projects/{SLUG}/studies/{study.pk}/report/")
    assert api.status_code == 200 and api.json()["compatible"]["ci"] == report["compatible"]["ci"]

    # ---------------------------------------------------------------- 5. the release
    # MemeBench is an evaluation set ("all experiments use the full benchmark"): all in test.
    project_settings_save(project=project, settings={"split_ratios": [0, 0, 1]})
    with django_capture_on_commit_callbacks(execute=True):
        assert as_["lead"].post(f"/p/{SLUG}/releases/build/").status_code == 302
    release = Release.objects.get(project=project)
    folder = release_dir(release)
    c = release.manifest["construction"]
    assert (c["items"], c["removed"], c["kept"]) == (8, 2, 6)
    assert c["removed_by_reason"] == {"ambiguity": 1, "image_quality": 1}
    assert c["removed_by_stage"] == {"qc": {"ambiguity": 1}, "reference": {"image_quality": 1}}
    assert (c["reviewed_accepted"], c["reviewed_edited"]) == (4, 2)
    assert c["reviewed_fields_edited"] == {"identity": 1, "visual": 1}
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert "8 candidate items, 2 removed, 6 kept" in readme and "| qc | ambiguity | 1 |" in readme
    assert "## Reference-independence study" in readme and "**75.0% of references fully or partially" in readme
    study_file = json.loads((folder / "independence_study.json").read_text(encoding="utf-8"))
    assert [s["compatible"] for s in study_file["studies"]] == [report["compatible"]]
    assert study_file["studies"][0]["revisions"]["count"] == 1
    assert "independence_study.json" in release.manifest["files"]
    raw = (folder / "records.jsonl").read_text(encoding="utf-8")
    records = {r["source_id"]: r for r in map(json.loads, raw.splitlines())}
    assert sorted(records) == kept and {r["split"] for r in records.values()} == {"test"}
    for sid, r in records.items():
        gold = r["gold"]
        want_explanation = revised_text if sid == chinese_daily else REFERENCES[sid][0]
        assert (gold["explanation"], gold["language"], gold["domain"]) == (want_explanation, *REFERENCES[sid][1:])
        reply = DEMO_VIKR[sid][1]
        for layer in ("visual", "identity", "knowledge", "reasoning"):
            want = edited.get(sid, {}).get(layer, reply[layer])
            # one QC'd checklist per field (gold "value"), never a list of references
            assert gold[layer] == [{"link": None, **e} for e in want], (sid, layer)
    assert "一把叉子放在杯旁" in raw and "\\u" not in raw
    plan = json.loads((folder / "evaluation.json").read_text(encoding="utf-8"))
    assert plan["kind"] == "checklist_judges" and plan["layers"] == [
        ["V", "visual"],
        ["I", "identity"],
        ["K", "knowledge"],
        ["R", "reasoning"],
    ]

    # ---------------------------------------------------------------- 6. two models, two judges
    # load_demo left the demo models' files and the two replay judges ready for this release.
    models_folder = settings.VAR_DIR / "demo_source" / f"{SLUG}-models"
    judges = list(Provider.objects.filter(project=project, name__in=VIKR_JUDGES).order_by("name"))
    assert [j.name for j in judges] == list(VIKR_JUDGES)
    board_url = f"/p/{SLUG}/releases/v{release.number}/leaderboard/"
    subs = []
    for model in VIKR_MODELS:
        path = vikr_model_file(models_folder, model, SLUG)
        with open(path, "rb") as fh:
            response = as_["lead"].post(
                board_url + "submit/", {"model_name": model, "split": "test", "file": fh}, follow=False
            )
        assert response.status_code == 302, response.content.decode()[:300]
        sub = Submission.objects.get(release=release, model_name=model)
        # one line per demo meme: the two QC removed are not in the release, reported as such
        assert sub.report["counts"]["matched"] == 6 and sub.report["counts"]["extra"] == 2
        with django_capture_on_commit_callbacks(execute=True):
            response = as_["lead"].post(
                board_url + "judge/", {"submission": sub.pk, "judge_1": judges[0].pk, "judge_2": judges[1].pk}
            )
        assert response.status_code == 302
        sub.refresh_from_db()
        assert sub.scores.get("judging") == "done", sub.report.get("judging")
        subs.append(sub)
    assert JudgeVerdict.objects.filter(submission__release=release).count() == 2 * 2 * 6
    # By hand (evaluation.demo): the thorough model states every checklist item but the
    # humour of the fourth meme (demo-03); judge B fails Identity on every third meme (demo-00,
    # demo-03, demo-06); the literal one states V, and K on even memes (demo-00, -02, -04, -06).
    # Kept: demo-00, -01, -02, -03, -04, -06.
    thorough, literal = (s.scores["figures"] for s in subs)
    want = {
        "V": 1,
        "I": 3 / 6,  # not 00, 03, 06
        "K": 1,
        "R": 5 / 6,  # not 03
        "success": 3 / 6,  # 01, 02, 04
        "success_3of4": 5 / 6,  # all but 03 (I and R fail)
        "judge1.I": 1,
        "judge1.success": 5 / 6,
        "judge2.success": 3 / 6,
    }
    assert {k: thorough[k]["value"] for k in want} == pytest.approx(want)
    want_literal = {"V": 1, "I": 0, "K": 4 / 6, "R": 0, "success": 0, "success_3of4": 0}
    assert {k: literal[k]["value"] for k in want_literal} == pytest.approx(want_literal)
    assert thorough["V"]["ci"] == [1.0, 1.0] and literal["I"]["ci"] == [0.0, 0.0]  # no spread to resample
    for figs in (thorough, literal):
        for name in ("V", "I", "K", "R", "success", "success_3of4"):
            lo, hi = figs[name]["ci"]
            assert 0 <= lo <= figs[name]["value"] <= hi <= 1 and figs[name]["n"] == 6
    lo, hi = thorough["success"]["ci"]
    assert lo < 0.5 < hi
    by_language = subs[0].scores["breakdowns"]["gold.language"]
    assert {k: v["success"]["value"] for k, v in by_language.items()} == {"Chinese": 0.5, "English": 0.5}
    by_domain = subs[0].scores["breakdowns"]["gold.domain"]
    assert {k: v["success"]["value"] for k, v in by_domain.items()} == pytest.approx(
        {"ACG": 0.5, "Daily life": 1 / 3, "Movies and TV": 1.0}
    )

    board = leaderboard(release=release, split="test")
    assert [c["key"] for c in board["columns"]] == ["V", "I", "K", "R", "success", "success_3of4"]
    assert [r["model_name"] for r in board["rows"]] == list(VIKR_MODELS)  # ranked by Success
    rho = board["judge_agreement"]["figures"]["success"]
    want_rho = spearmanr([5 / 6, 0], [3 / 6, 0]).statistic
    assert (rho if not isinstance(rho, dict) else rho["rho"]) == pytest.approx(want_rho)
    page = as_["lead"].get(board_url + "?split=test").content.decode()
    assert all(f'<option value="{j.pk}"' in page for j in judges)  # the lead's judge form offers them
    for text in ("Visual (V)", "Identity (I)", "Knowledge (K)", "Reasoning (R)", "Success", "3 of 4", *VIKR_MODELS):
        assert text in page, text
    assert "50.0" in page and "83.3" in page

    # ---------------------------------------------------------------- 7. calibration
    # Two raters label four memes of the thorough model per layer (Success = all four).
    subset = ["demo-01", "demo-02", "demo-03", "demo-06"]
    human = {
        "1": {"demo-01": "1111", "demo-02": "1111", "demo-03": "1010", "demo-06": "1011"},
        "2": {"demo-01": "1111", "demo-02": "1101", "demo-03": "1010", "demo-06": "1011"},
    }
    lines = [
        json.dumps(
            {
                "item_id": records[sid]["item_id"],
                "rater": int(rater),
                "layers": dict(zip("VIKR", ("pass" if ch == "1" else "fail" for ch in labels[sid]))),
            }
        )
        for rater, labels in human.items()
        for sid in subset
    ]
    upload = SimpleUploadedFile("labels.jsonl", ("\n".join(lines) + "\n").encode(), "application/x-ndjson")
    response = as_["lead"].post(
        f"/p/{SLUG}/releases/v{release.number}/submissions/{subs[0].pk}/calibration/",
        {"name": "pilot", "file": upload},
    )
    assert response.status_code == 302, response.content.decode()[:300]
    cal = CalibrationSet.objects.get(submission=subs[0])
    rater1 = [int(human["1"][s] == "1111") for s in subset]  # 1, 1, 0, 0
    rater2 = [int(human["2"][s] == "1111") for s in subset]  # 1, 0, 0, 0
    machine = {
        "judge1": [1, 1, 0, 1],  # judge A fails only R of demo-03
        "judge2": [1, 1, 0, 0],  # judge B also fails I of demo-03 and demo-06
        "intersection": [1, 1, 0, 0],
    }
    rep = cal.report
    assert rep["n_both_raters"] == 4
    for name, decisions in machine.items():
        assert rep["success_kappa"][name]["kappa"] == pytest.approx(cohen_kappa_score(rater1, decisions)), name
    assert rep["success_kappa"]["intersection"]["kappa"] == pytest.approx(1.0)
    assert rep["human_kappa"]["kappa"] == pytest.approx(cohen_kappa_score(rater1, rater2))  # 0.5
    assert rep["spearman"]["n_submissions"] == 2
    assert rep["spearman"]["figures"]["success"]["rho"] == pytest.approx(want_rho)

    # The pages a lead opens along the way render on the real preset.
    for url in (
        f"/p/{SLUG}/studies/",
        f"/p/{SLUG}/releases/v{release.number}/",
        f"/p/{SLUG}/releases/v{release.number}/submissions/{subs[0].pk}/",
    ):
        assert as_["lead"].get(url).status_code == 200, url
    judged = as_["lead"].get(f"/p/{SLUG}/releases/v{release.number}/submissions/{subs[0].pk}/predictions.jsonl")
    header, *lines = [json.loads(x) for x in judged.content.decode().splitlines()]
    assert header == {"concord_release": {"project": SLUG, "version": release.number}}
    assert len(lines) == 6 and all(len(x["judgements"]) == 2 for x in lines)

    # ---------------------------------------------------------------- 8. a later removal, v2
    # The lead removes the conflict item after the study: counted in the study's report and in
    # the datasheet as a removal of the independence-study step, by its reason.
    response = as_["lead"].post(
        f"/p/{SLUG}/studies/{study.pk}/items/{conflict.pk}/remove", {"reason": "ambiguity", "note": "two jokes"}
    )
    assert response.status_code == 302
    with django_capture_on_commit_callbacks(execute=True):
        as_["lead"].post(f"/p/{SLUG}/releases/build/")
    v2 = Release.objects.get(project=project, number=2)
    c = v2.manifest["construction"]
    assert (c["items"], c["removed"], c["kept"]) == (8, 3, 5)
    assert c["removed_by_reason"] == {"ambiguity": 2, "image_quality": 1}
    assert c["removed_by_stage"] == {
        "independence study": {"ambiguity": 1},
        "qc": {"ambiguity": 1},
        "reference": {"image_quality": 1},
    }
    readme = (release_dir(v2) / "README.md").read_text(encoding="utf-8")
    assert "| independence study | ambiguity | 1 |" in readme
    study_v2 = json.loads((release_dir(v2) / "independence_study.json").read_text(encoding="utf-8"))["studies"][0]
    assert study_v2["removals"]["count"] == 1 and study_v2["removals"]["items"] == [conflict.item_id]
    # evaluation.demo.demo_vikr_leaderboard reads a release's gold (the real preset's single
    # QC'd values) and scores its own responses with the same two judges; k = the position in
    # the split (demo-00, -01, -02, -04, -06): R misses k=3, judge B fails I at k=0, 3.
    again = demo_vikr_leaderboard(release=v2, user=lead, folder=settings.VAR_DIR / "v2", split="test")
    figs = again[0].scores["figures"]
    assert again[0].model_name == VIKR_MODELS[0] and again[0].scores["judging"] == "done"
    assert {k: figs[k]["value"] for k in ("V", "I", "K", "R", "success")} == pytest.approx(
        {"V": 1, "I": 3 / 5, "K": 1, "R": 4 / 5, "success": 3 / 5}
    )
    # The judges' replay file gained v2's replies and kept those for the demo files (a lead who
    # judges them again, e.g. on v2, gets the same decisions).
    replay = [json.loads(x) for x in replay_file_path(project.pk, VIKR_JUDGE_FILE).read_text().splitlines()]
    keys = {(r["model"], r["replay_key"]) for r in replay}
    for line in lines:
        key = judge_replay_key(str(line["item_id"]), line["explanation"])
        assert {(name, key) for name in VIKR_JUDGES} <= keys
    assert len(keys) == len(replay)

    # ---------------------------------------------------------------- 9. a real SDK judge
    # The lead re-judges v1's thorough model with an OpenAI judge (the fake server grades an
    # item pass when the response states its text) next to Judge B: the request carries the
    # QC'd checklist, so demo-02's edited V2 ("一把叉子放在杯旁", which the demo response made
    # from the converted text does not state) fails, and the judge never sees the model's name.
    gpt_judge = provider_create(
        project=project,
        name="gpt-judge",
        kind="openai",
        model="gpt-judge",
        base_url=f"{fake_llm.url}/v1",
        api_key_env="CONCORD_TEST_OPENAI_KEY",
        requests_per_minute=6000,
        timeout_seconds=5,
    )
    fake_llm.reply_by_model = {"gpt-judge": fake_judge()}
    with django_capture_on_commit_callbacks(execute=True):
        response = as_["lead"].post(
            board_url + "judge/", {"submission": subs[0].pk, "judge_1": gpt_judge.pk, "judge_2": judges[1].pk}
        )
    assert response.status_code == 302
    sent = fake_llm.for_model("gpt-judge")
    assert len(sent) == 6 and all(VIKR_MODELS[0] not in r.user_text and r.image_bytes for r in sent)
    demo02 = next(r.user_text for r in sent if "一把叉子放在杯旁" in r.user_text)
    checklist = demo02.split("RESPONSE TO GRADE")[0]
    assert "- V2: 一把叉子放在杯旁" in checklist and "佐格星人的叉子" not in checklist
    subs[0].refresh_from_db()
    figs = subs[0].scores["figures"]
    assert {k: figs[k]["value"] for k in ("V", "I", "K", "R", "success", "judge1.success")} == pytest.approx(
        {"V": 5 / 6, "I": 3 / 6, "K": 1, "R": 5 / 6, "success": 2 / 6, "judge1.success": 4 / 6}
    )
    assert [j["name"] for j in subs[0].scores["judges"]] == ["gpt-judge", VIKR_JUDGES[1]]
