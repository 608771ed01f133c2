"""The MemeBench VIKR construction pipeline at service level (issue 15): a reference
explanation, its conversion by an LLM through the real openai and google-genai SDKs (against
candidates.tests.fake_llm), the automated checks, QC accept / edit / remove, and gold."""

from __future__ import annotations

import json

import pytest

from adjudication.models import GoldRecord, HistoryEvent
from annotation.factories import claim, items_open, ready
from annotation.selectors import workspace_for_annotator
from annotation.services import assignment_claim_next
from candidates.models import Conversion, ConversionJob
from candidates.services import provider_create
from candidates.services.conversion import conversions_retry_failed
from core.errors import Invalid
from core.models import JobStatus
from projects.factories import items_create, project_with_members
from projects.fieldtypes import SchemaError
from projects.models import Item, Stage
from projects.presets import PRESETS, VIKR_EVALUATION, VIKR_SCHEMA, VIKR_WORKFLOW
from projects.schema import Schema
from projects.services import project_create
from projects.workflow import Workflow
from workflow import services as workflow_services
from workflow.services import annotation_submit, item_flag

pytestmark = pytest.mark.django_db

REFERENCE = {
    "explanation": "图中男孩是《名侦探柯南》的江户川柯南，他指着观众说“真相只有一个”。这句口头禅被用在找不到袜子这种小事上。",
    "language": "Chinese",
    "domain": "ACG",
}
GOOD = {
    "visual": [
        {"id": "V1", "text": "一个戴眼镜、穿蓝色西装的男孩指着观众"},
        {"id": "V2", "text": "图上文字：真相只有一个"},
    ],
    "identity": [{"id": "I1", "text": "男孩是《名侦探柯南》中的江户川柯南", "link": "V1"}],
    "knowledge": [{"id": "K1", "text": "“真相只有一个”是柯南破案时的口头禅"}],
    "reasoning": [{"id": "R1", "text": "把破案的庄重口头禅用在找袜子这种小事上，形成反差"}],
    "entities": [{"id": "I1", "names": ["江户川柯南", "柯南"], "work": "名侦探柯南"}],
}


def vikr_reply(text: str) -> dict:
    return GOOD


@pytest.fixture
def people(make_user):
    return {name: make_user(name) for name in ("writer", "checker")}


@pytest.fixture
def vikr(lead, people, tmp_path, fake_llm, api_keys):
    fake_llm.reply_for = vikr_reply
    project = project_with_members("vk", preset="vikr", lead=[lead], annotator=list(people.values()))
    for u in people.values():
        ready(u, project)
    items = items_create(project, tmp_path / "src", 3, texts=["真相只有一个", "ONE TRUTH", "x"])
    items_open(items)
    return project, items


def _provider(project, fake_llm, kind: str):
    if kind == "gemini":
        return provider_create(
            project=project,
            name="converter",
            kind="gemini",
            model="gemini-conv",
            base_url=fake_llm.url,
            api_key_env="CONCORD_TEST_GEMINI_KEY",
            requests_per_minute=6000,
            timeout_seconds=2,
        )
    return provider_create(
        project=project,
        name="converter",
        kind="openai",
        model="gpt-conv",
        base_url=f"{fake_llm.url}/v1",
        api_key_env="CONCORD_TEST_OPENAI_KEY",
        requests_per_minute=6000,
        timeout_seconds=2,
    )


def _write_reference(project, user, django_capture_on_commit_callbacks, values=REFERENCE):
    mine = claim(user, project)
    assert mine.stage == 0
    with django_capture_on_commit_callbacks(execute=True):
        annotation_submit(annotator=user, item=mine.item, values=values, version=mine.version)
    return Item.objects.get(pk=mine.item_id)


# ---------------------------------------------------------------- the preset


def test_the_vikr_preset_loads_validates_and_carries_the_shared_contract(lead) -> None:
    project = project_create(name="VIKR", slug="vikr-one", preset="vikr", lead=lead)
    wf = project.get_workflow()
    assert [s.name for s in wf.stages] == ["reference", "conversion", "qc"]
    ref, conv, qc = wf.stages
    assert ref.fields == ("explanation", "language", "domain") and ref.model is None
    assert conv.model["source"] == 0 and conv.model["checks"] == ("vikr",) and not conv.open_to("anyone")
    assert qc.review == 1 and qc.fields == conv.fields and qc.exclude_workers_of == (0,) and qc.show_stages == (0,)
    assert set(qc.flags) == {"layer_separation", "checklist_consistency", "ambiguity", "image_quality", "safety"}
    assert all(s.gold == "value" for s in wf.stages) and wf.reference_fields() == []
    schema = project.get_schema()
    assert schema.by_name["language"]["choices"] == ["Chinese", "English"]
    assert schema.by_name["domain"]["choices"] == ["ACG", "Cross-domain", "Daily life", "Movies and TV", "Public life"]
    assert [(n, schema.by_name[n]["id_prefix"]) for n in ("visual", "identity", "knowledge", "reasoning")] == [
        ("visual", "V"),
        ("identity", "I"),
        ("knowledge", "K"),
        ("reasoning", "R"),
    ]
    assert schema.by_name["identity"]["link_to"] == "visual" and schema.by_name["identity"]["link_required"]
    assert PRESETS["vikr"]["evaluation"] == VIKR_EVALUATION and VIKR_EVALUATION["primary"] == "success"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda w: w.pop(2), "needs a later stage that reviews it"),
        (lambda w: w[1]["model"].update(checks=["spelling"]), "model.checks"),
        (lambda w: w[1]["model"].update(source="qc"), "model.source"),
        (lambda w: w[1]["model"].update(prompt=""), "model.prompt"),
        (lambda w: w[1]["model"].update(temperature=1), "unknown key(s) of model"),
        (lambda w: w[2].update(fields=["visual"]), "leave fields out"),
        (lambda w: w[2].update(gold="references"), "gold must be 'value'"),
        (lambda w: w[0].update(annotators=2), "annotators must be 1"),
        (lambda w: w[2].update(review="reference", fields=None) or w[2].pop("fields"), "needs a later stage"),
    ],
)
def test_bad_stage_data_is_refused_naming_the_rule(change, message) -> None:
    data = json.loads(json.dumps(VIKR_WORKFLOW))
    change(data)
    with pytest.raises(SchemaError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Workflow.from_data(data, schema=Schema(VIKR_SCHEMA))


# ---------------------------------------------------------------- conversion, QC, gold


@pytest.mark.parametrize("kind", ["openai", "gemini"])
def test_explanation_then_llm_conversion_then_qc_accept_gives_gold(
    vikr, people, fake_llm, kind, django_capture_on_commit_callbacks
) -> None:
    project, items = vikr
    provider = _provider(project, fake_llm, kind)
    item = _write_reference(project, people["writer"], django_capture_on_commit_callbacks)
    # The conversion ran as a job (eager Celery) with the image and the explanation.
    conv = Conversion.objects.get(item=item)
    assert conv.status == JobStatus.DONE, conv.error
    assert conv.provider == provider and conv.flags == []
    assert ConversionJob.objects.get(project=project).status == JobStatus.DONE
    sent = fake_llm.for_model(provider.model)
    assert len(sent) == 1 and REFERENCE["explanation"] in sent[0].user_text and sent[0].image_bytes
    assert sent[0].image_mime == "image/jpeg"
    item.refresh_from_db()
    assert (item.stage, item.workflow_stage) == (Stage.ANNOTATING, 2)

    # The writer never reviews their own item; the checker gets it, pre-filled, with the explanation.
    assert assignment_claim_next(annotator=people["writer"], project=project).annotation.item_id != item.pk
    review = claim(people["checker"], project)
    assert (review.item_id, review.stage) == (item.pk, 2)
    ws = workspace_for_annotator(annotation=review, audit=False)
    assert [f.name for f in ws.fields] == ["visual", "identity", "knowledge", "reasoning"]
    assert {f.name: f.value for f in ws.fields}["identity"] == [{**GOOD["identity"][0]}]
    assert ws.earlier[0].fields[0] == ("Reference explanation", [REFERENCE["explanation"]])
    assert ws.checks == [] and not ws.candidates
    annotation_submit(annotator=people["checker"], item=review.item, values=review.values, version=review.version)

    gold = GoldRecord.objects.get(item=item, is_current=True)
    assert gold.values["explanation"] == REFERENCE["explanation"] and gold.values["language"] == "Chinese"
    assert gold.values["visual"] == [{**v, "link": None} for v in GOOD["visual"]]  # a value, not a list of them
    assert gold.provenance["visual"]["edited"] is False and gold.provenance["visual"]["conversion"] == conv.pk
    assert gold.provenance["explanation"]["stage"] == "reference"


def test_flags_reach_the_reviewer_unfixed_and_an_edit_is_recorded(
    vikr, people, fake_llm, django_capture_on_commit_callbacks
) -> None:
    project, _ = vikr
    bad = json.loads(json.dumps(GOOD))
    bad["visual"][0]["text"] = "江户川柯南指着观众"  # names the entity
    bad["identity"][0]["link"] = "V7"  # dangling
    bad["knowledge"] = [{"id": f"K{i}", "text": f"背景 {i}"} for i in range(1, 6)]  # five items
    fake_llm.reply_for = lambda text: bad
    _provider(project, fake_llm, "openai")
    item = _write_reference(project, people["writer"], django_capture_on_commit_callbacks)
    conv = Conversion.objects.get(item=item)
    assert conv.status == JobStatus.DONE
    assert {f["check"] for f in conv.flags} == {"entity_in_visual", "link", "count"}
    assert len(conv.values["knowledge"]) == 5 and conv.values["identity"][0]["link"] == "V7"  # never silently fixed

    review = claim(people["checker"], project)
    ws = workspace_for_annotator(annotation=review, audit=False)
    assert {c["check"] for c in ws.checks} == {"entity_in_visual", "link", "count"}
    assert any(c["field"] == "Visual (V)" and "江户川柯南" in c["message"] for c in ws.checks)
    with pytest.raises(Invalid):  # as converted it does not validate: the reviewer must fix it
        annotation_submit(annotator=people["checker"], item=review.item, values=review.values, version=review.version)
    fixed = {
        "visual": [{"id": "V1", "text": "一个戴眼镜的男孩指着观众"}],
        "identity": [{"id": "I1", "text": "男孩是江户川柯南", "link": "V1"}],
        "knowledge": bad["knowledge"][:4],
        "reasoning": GOOD["reasoning"],
    }
    annotation_submit(annotator=people["checker"], item=review.item, values=fixed, version=review.version)
    gold = GoldRecord.objects.get(item=item, is_current=True)
    assert gold.provenance["visual"]["edited"] is True and gold.provenance["reasoning"]["edited"] is False


def test_qc_removal_excludes_the_item_with_its_reason_and_stage(
    vikr, people, fake_llm, django_capture_on_commit_callbacks
) -> None:
    project, _ = vikr
    _provider(project, fake_llm, "openai")
    item = _write_reference(project, people["writer"], django_capture_on_commit_callbacks)
    review = claim(people["checker"], project)
    with pytest.raises(Invalid):
        item_flag(annotator=people["checker"], item=review.item, reason="offensive")  # not a QC reason
    item_flag(annotator=people["checker"], item=review.item, reason="layer_separation", note="V names Conan")
    item.refresh_from_db()
    assert item.stage == Stage.EXCLUDED and item.excluded_reason == "layer_separation: V names Conan"
    event = HistoryEvent.objects.get(item=item, kind="excluded")
    assert event.new["flag"] == "layer_separation" and event.new["stage_name"] == "qc"
    assert not GoldRecord.objects.filter(item=item).exists()


@pytest.mark.parametrize("behaviour", ["prose", "401", 'body:{"verdict": "fine"}'])
def test_unreadable_replies_and_provider_errors_fail_visibly_and_a_retry_converts(
    vikr, people, fake_llm, lead, behaviour, django_capture_on_commit_callbacks
) -> None:
    project, _ = vikr
    provider = _provider(project, fake_llm, "openai")
    fake_llm.plan(provider.model, [behaviour])
    item = _write_reference(project, people["writer"], django_capture_on_commit_callbacks)
    conv = Conversion.objects.get(item=item)
    assert conv.status == JobStatus.FAILED and conv.error
    item.refresh_from_db()
    assert item.workflow_stage == 1 and item.stage == Stage.ANNOTATING  # waits in the model stage
    assert assignment_claim_next(annotator=people["checker"], project=project).annotation.item_id != item.pk
    with django_capture_on_commit_callbacks(execute=True):
        assert conversions_retry_failed(project=project, user=lead) == 1
    conv.refresh_from_db()
    assert conv.status == JobStatus.DONE and conv.error == ""
    item.refresh_from_db()
    assert item.workflow_stage == 2


def test_a_transient_error_is_tried_again_in_the_job(
    vikr, people, fake_llm, monkeypatch, django_capture_on_commit_callbacks
) -> None:
    monkeypatch.setattr(workflow_services, "RETRY_BACKOFF", 0.01)
    project, _ = vikr
    provider = _provider(project, fake_llm, "gemini")
    fake_llm.plan(provider.model, ["503", "429:0"])
    item = _write_reference(project, people["writer"], django_capture_on_commit_callbacks)
    conv = Conversion.objects.get(item=item)
    assert conv.status == JobStatus.DONE and conv.attempts == 3
    assert len(fake_llm.for_model(provider.model)) == 3


def test_several_enabled_providers_need_the_stage_to_name_one(
    vikr, people, fake_llm, lead, django_capture_on_commit_callbacks
) -> None:
    project, _ = vikr
    _provider(project, fake_llm, "openai")
    provider_create(
        project=project,
        name="other",
        kind="openai",
        model="gpt-other",
        base_url=f"{fake_llm.url}/v1",
        api_key_env="CONCORD_TEST_OPENAI_KEY",
    )
    item = _write_reference(project, people["writer"], django_capture_on_commit_callbacks)
    conv = Conversion.objects.get(item=item)
    assert conv.status == JobStatus.FAILED and "choose the one that converts" in conv.error
    workflow_services.conversion_provider_set(project=project, user=lead, stage_name="conversion", provider="converter")
    with django_capture_on_commit_callbacks(execute=True):
        conversions_retry_failed(project=project, user=lead)
    conv.refresh_from_db()
    assert conv.status == JobStatus.DONE and conv.provider.name == "converter"


def test_the_lead_sees_progress_failures_and_retries_annotators_never_see_the_model(
    vikr, people, fake_llm, lead, client, django_capture_on_commit_callbacks
) -> None:
    project, _ = vikr
    provider = _provider(project, fake_llm, "openai")
    fake_llm.plan(provider.model, ["prose"])
    failed = _write_reference(project, people["writer"], django_capture_on_commit_callbacks)
    converted = _write_reference(project, people["writer"], django_capture_on_commit_callbacks)
    url = f"/p/{project.slug}/conversions/"
    client.force_login(people["checker"])
    assert client.get(url).status_code == 403
    review = claim(people["checker"], project)
    assert review.item_id == converted.pk
    page = client.get(f"/p/{project.slug}/annotate/{converted.pk}/").content.decode()
    assert "Automated checks" in page and "no problem found" in page
    assert REFERENCE["explanation"] in page  # the explanation, as written (not escaped away)
    for secret in (provider.name, provider.model, "gpt-conv-served", "converter"):
        assert secret not in page

    client.force_login(lead)
    page = client.get(url).content.decode()
    assert "1 converted" in page and "1 failed" in page and "could not be read" in page
    assert f'data-item="{failed.pk}"' in page and provider.model in page
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, {"action": "retry"})
    assert response.status_code == 302
    assert Conversion.objects.get(item=failed).status == JobStatus.DONE
    response = client.post(url, {"action": "provider", "stage": "conversion", "provider": "nope"}, follow=True)
    assert "no provider" in response.content.decode() or "Choose one" in response.content.decode()
    client.post(url, {"action": "provider", "stage": "conversion", "provider": "converter"})
    project.refresh_from_db()
    assert project.get_workflow().stage(1).model["provider"] == "converter"


def test_release_counts_removals_by_reason_and_stage_accepted_and_edited_and_keeps_cjk_readable(
    vikr, people, fake_llm, lead, django_capture_on_commit_callbacks
) -> None:
    from exports.selectors import release_dir
    from exports.services import export_job_run, export_job_start

    project, items = vikr
    _provider(project, fake_llm, "gemini")
    for _ in items:
        _write_reference(project, people["writer"], django_capture_on_commit_callbacks)
    first = claim(people["checker"], project)  # accepted as converted
    annotation_submit(annotator=people["checker"], item=first.item, values=first.values, version=first.version)
    second = claim(people["checker"], project)  # edited
    edited = {**second.values, "reasoning": [{"id": "R1", "text": "口头禅与小事的反差制造笑点"}]}
    annotation_submit(annotator=people["checker"], item=second.item, values=edited, version=second.version)
    third = claim(people["checker"], project)  # removed
    item_flag(annotator=people["checker"], item=third.item, reason="ambiguity", note="两种解读")

    release = export_job_run(job=export_job_start(project=project, user=lead, enqueue=False))
    assert release is not None
    c = release.manifest["construction"]
    assert (c["items"], c["removed"], c["kept"]) == (3, 1, 2)
    assert c["removed_by_reason"] == {"ambiguity": 1} and c["removed_by_stage"] == {"qc": {"ambiguity": 1}}
    assert (c["reviewed_accepted"], c["reviewed_edited"]) == (1, 1) and c["reviewed_fields_edited"] == {"reasoning": 1}
    assert c["converted_by"] == [
        {"stage": "conversion", "provider": "converter", "model": "gemini-conv-001", "items": 3}
    ]
    folder = release_dir(release)
    readme = (folder / "README.md").read_text(encoding="utf-8")
    assert "3 candidate items, 1 removed, 2 kept" in readme and "| qc | ambiguity | 1 |" in readme
    raw = (folder / "records.jsonl").read_text(encoding="utf-8")
    assert "口头禅与小事的反差制造笑点" in raw and "\\u" not in raw  # CJK written as itself, not escaped
    records = {r["item_id"]: r for r in map(json.loads, raw.splitlines())}
    gold = records[second.item_id]["gold"]
    assert gold["reasoning"] == [{"id": "R1", "text": "口头禅与小事的反差制造笑点", "link": None}]
    assert gold["explanation"] == REFERENCE["explanation"] and gold["language"] == "Chinese" and gold["domain"] == "ACG"
    assert third.item_id not in records


def test_run_pending_starts_a_job_for_conversions_left_waiting_and_says_when_none_wait(
    vikr, people, fake_llm, lead, client, django_capture_on_commit_callbacks
) -> None:
    project, _ = vikr
    provider = _provider(project, fake_llm, "openai")
    fake_llm.plan(provider.model, ["prose"])
    item = _write_reference(project, people["writer"], django_capture_on_commit_callbacks)
    # A conversion left waiting with no job (its job was lost before it started).
    Conversion.objects.filter(item=item).update(status=JobStatus.PENDING, error="")
    ConversionJob.objects.filter(project=project).update(status=JobStatus.DONE)
    client.force_login(lead)
    url = f"/p/{project.slug}/conversions/"
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, {"action": "run"}, follow=True)
    assert "1 waiting conversion is running." in response.content.decode()
    conv = Conversion.objects.get(item=item)
    assert conv.status == JobStatus.DONE and len(fake_llm.for_model(provider.model)) == 2
    response = client.post(url, {"action": "run"}, follow=True)
    assert "No conversion is waiting" in response.content.decode()
