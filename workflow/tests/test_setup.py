"""Study setup pages and endpoints that depend on saved work (issue 12): schema editor and its
impact, study settings (annotators per item explained, majority vote), members with progress,
guideline versions on annotations, and who may use each page and endpoint."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from adjudication.models import AdjudicationTask, GoldRecord
from adjudication.services import adjudication_next, gold_decide
from annotation.factories import MEME3W_HARMFUL, MEME3W_NOT_HARMFUL, claim, items_open, ready
from annotation.models import Annotation, Assignment
from core.errors import Conflict
from projects.factories import items_create, project_with_members
from projects.members import invitation_create, member_deactivate
from projects.models import Item, Stage
from projects.presets import MEME3W_SCHEMA
from projects.services import guideline_save, membership_add
from workflow.services import annotation_submit
from workflow.setup import SchemaChangeNeedsConfirmation, schema_change, schema_change_impact, study_settings_update

pytestmark = pytest.mark.django_db


def submit(user, project, values):
    ready(user, project)
    annotation = claim(user, project)
    return annotation_submit(annotator=user, item=annotation.item, values=values, version=annotation.version)


def _form(schema: dict, **extra) -> dict:
    """The schema editor's POST for a schema (as the page's inputs send it)."""
    data = {"count": str(len(schema["fields"]))}
    for i, spec in enumerate(schema["fields"]):
        p = f"f-{i}-"
        data[p + "name"] = spec["name"]
        data[p + "type"] = spec["type"]
        data[p + "label"] = spec.get("label", "")
        if spec.get("required"):
            data[p + "required"] = "1"
        data[p + "choices"] = "\n".join(spec.get("choices", []))
        data[p + "exclusive"] = "\n".join(spec.get("exclusive", []))
        if spec.get("visible_if"):
            data[p + "visible_field"] = spec["visible_if"]["field"]
            data[p + "visible_in"] = "\n".join(spec["visible_if"]["in"])
        extra_keys = {k: v for k, v in spec.items() if k in ("source", "max_boxes")}
        if extra_keys:
            data[p + "extra"] = json.dumps(extra_keys)
    data.update(extra)
    return data


CUSTOM = {
    "fields": [
        {
            "name": "stance",
            "type": "choice",
            "label": "Stance",
            "choices": ["attack", "support", "neutral"],
            "required": True,
        },
        {
            "name": "tactics",
            "type": "multichoice",
            "label": "Tactics",
            "choices": ["irony", "slur", "none of these"],
            "exclusive": ["none of these"],
            "visible_if": {"field": "stance", "in": ["attack"]},
            "required": True,
        },
        {"name": "where", "type": "boxes", "label": "Where", "visible_if": {"field": "stance", "in": ["attack"]}},
    ]
}


# ---------------------------------------------------------------- schema editor


def test_schema_editor_round_trip_saves_in_place_before_annotation(client_for, project, lead):
    client = client_for(lead)
    url = reverse("schema_editor", args=[project.slug])
    assert client.get(url).status_code == 200
    response = client.post(url, _form(CUSTOM, action="save", version="1"))
    assert response.status_code == 302, response.content.decode()[:2000]
    project.refresh_from_db()
    assert project.schema_version == 1  # nobody annotated yet: the version is rewritten
    assert [f["name"] for f in project.schema["fields"]] == ["stance", "tactics", "where"]
    assert project.schema["fields"][1]["exclusive"] == ["none of these"]
    assert project.schema["fields"][1]["visible_if"] == {"field": "stance", "in": ["attack"]}


def test_schema_editor_buttons_keep_what_was_typed(client_for, project, lead):
    client = client_for(lead)
    url = reverse("schema_editor", args=[project.slug])
    page = client.post(url, _form(CUSTOM, action="add")).content.decode()
    assert 'value="field_4"' in page and 'value="stance"' in page
    page = client.post(url, _form(CUSTOM, action="down:0")).content.decode()
    assert page.index('value="tactics"') < page.index('value="stance"')
    page = client.post(url, _form(CUSTOM, action="remove:2")).content.decode()
    assert 'value="where"' not in page and 'value="tactics"' in page


def test_schema_editor_names_each_problem_and_saves_nothing(client_for, project, lead):
    bad = {
        "fields": [
            {"name": "stance", "type": "choice", "choices": []},
            {**CUSTOM["fields"][1], "visible_if": {"field": "stance", "in": ["zzz"]}},
        ]
    }
    response = client_for(lead).post(
        reverse("schema_editor", args=[project.slug]), _form(bad, action="save", version="1")
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert "field 1 (stance)" in page and "choices must be a non-empty list" in page
    assert "field 2 (tactics)" in page
    project.refresh_from_db()
    assert project.schema["fields"] == MEME3W_SCHEMA["fields"]


def test_schema_import_export_and_preview(client_for, project, lead, items):
    client = client_for(lead)
    url = reverse("schema_editor", args=[project.slug])
    yaml_text = client.get(reverse("schema_export", args=[project.slug]) + "?format=yaml").content.decode()
    assert "target_category" in yaml_text
    upload = SimpleUploadedFile("s.yaml", yaml_text.replace("target_entity", "target_who").encode())
    page = client.post(url, {"action": "import_file", "file": upload}).content.decode()
    assert 'value="target_who"' in page and "Imported into the editor" in page
    project.refresh_from_db()
    assert project.schema_version == 1 and "target_who" not in json.dumps(project.schema)  # not saved
    page = client.post(url, {"action": "import_text", "format": "json", "text": "{not json"}).content.decode()
    assert "Not valid JSON" in page
    preview = client.post(reverse("schema_preview", args=[project.slug]), _form(CUSTOM)).content.decode()
    assert (
        'data-widget="radio"' in preview and 'data-widget="checkboxes"' in preview and 'data-widget="boxes"' in preview
    )
    assert 'data-visible-field="stance"' in preview
    check = client.post(
        reverse("schema_preview_check", args=[project.slug]),
        json.dumps({"schema": CUSTOM, "values": {"stance": "attack", "tactics": ["irony", "none of these"]}}),
        content_type="application/json",
    ).json()
    assert not check["ok"] and "cannot be combined" in check["errors"]["tactics"]


def test_schema_change_after_annotation_is_a_new_version_with_its_impact(client_for, project, lead, annotator_a, items):
    items_open(items)
    submit(annotator_a, project, MEME3W_HARMFUL)
    narrower = json.loads(json.dumps(MEME3W_SCHEMA))
    narrower["fields"][1]["choices"] = ["gender", "religion and caste"]  # drops "group background"
    impact = schema_change_impact(project=project, schema=narrower)
    assert impact.started and impact.invalid_annotations == 1 and impact.by_field == {"target_category": 1}
    assert impact.invalid[0]["annotator"] == "annotator_a"
    with pytest.raises(SchemaChangeNeedsConfirmation):
        schema_change(project=project, schema=narrower, expected_version=1)
    client = client_for(lead)
    url = reverse("schema_editor", args=[project.slug])
    response = client.post(url, _form(narrower, action="save", version="1"))
    assert response.status_code == 409 and "invalid" in response.content.decode()
    project.refresh_from_db()
    assert project.schema_version == 1
    response = client.post(url, _form(narrower, action="save", version="1", confirm="1"))
    assert response.status_code == 302
    project.refresh_from_db()
    assert project.schema_version == 2
    assert Annotation.objects.get(annotator=annotator_a).schema_version == 1  # kept its version
    # REST: dry run, then PUT with the confirmation
    api = f"/api/projects/{project.slug}/schema/"
    check = client.post(api + "check", {"schema": MEME3W_SCHEMA}, content_type="application/json").json()
    assert check["ok"] and check["impact"]["invalid_annotations"] == 0
    response = client.post(
        api, {"schema": narrower | {"fields": narrower["fields"][:1]}, "version": 1}, content_type="application/json"
    )
    assert response.status_code == 409 and response.json()["code"] == "stale"
    response = client.post(api, {"text": "fields: []", "format": "yaml"}, content_type="application/json")
    assert response.status_code == 400 and "schema" in response.json()["errors"]
    response = client.post(api, {"schema": MEME3W_SCHEMA, "version": 2}, content_type="application/json")
    assert response.status_code == 200 and response.json()["version"] == 3


# ---------------------------------------------------------------- guideline versions on annotations


def test_annotations_record_the_guideline_version_and_see_it_changed(client_for, project, lead, annotator_a, items):
    items_open(items)
    submit(annotator_a, project, MEME3W_NOT_HARMFUL)
    assert Annotation.objects.get(annotator=annotator_a).guideline_version == 1
    client = client_for(annotator_a)
    home = reverse("annotate_home", args=[project.slug])
    assert "The guideline changed" not in client.get(home).content.decode()
    guideline_save(project=project, text="# Rule 7\n\nNew rule.", note="added rule 7", user=lead)
    page = client.get(home).content.decode()
    assert "The guideline changed" in page and "added rule 7" in page
    submit(annotator_a, project, MEME3W_NOT_HARMFUL)
    assert Annotation.objects.filter(annotator=annotator_a).order_by("id").last().guideline_version == 2
    client.post(reverse("annotate_guideline_seen", args=[project.slug]), {"version": "2"})
    assert "The guideline changed" not in client.get(home).content.decode()


# ---------------------------------------------------------------- settings


def test_lowering_annotators_is_explained_then_applied_on_confirmation(
    client_for, project, lead, annotator_a, annotator_b, items
):
    items_open(items)
    submit(annotator_a, project, MEME3W_HARMFUL)  # item 1 has one submission
    with pytest.raises(Conflict) as exc:
        study_settings_update(project=project, data={"annotators_per_item": 1})
    assert "routes them at once" in exc.value.message
    project.refresh_from_db()
    assert project.annotators_per_item == 2  # not silently applied
    client = client_for(lead)
    url = reverse("settings_page", args=[project.slug])
    response = client.post(url, {"annotators_per_item": "1", "claim_timeout_minutes": "60"})
    assert response.status_code == 409 and "routes them at once" in response.content.decode()
    response = client.post(url, {"annotators_per_item": "1", "claim_timeout_minutes": "60", "confirm": "1"})
    assert response.status_code == 302
    project.refresh_from_db()
    assert project.annotators_per_item == 1
    assert Item.objects.get(pk=items[0].pk).stage == Stage.GOLD  # routed by the change
    response = client.post(
        f"/api/projects/{project.slug}/settings/",
        {"settings": {"split_ratios": [1, 0, 0]}, "dry_run": True},
        content_type="application/json",
    )
    assert response.status_code == 200
    assert [s["empty"] for s in response.json()["split_preview"]] == [False, True, True]
    response = client.post(
        f"/api/projects/{project.slug}/settings/",
        {"settings": {"claim_timeout_minutes": 1}},
        content_type="application/json",
    )
    assert response.status_code == 400 and "claim_timeout_minutes" in response.json()["errors"]


def test_settings_page_shows_errors_and_keeps_the_input(client_for, project, lead, items):
    client = client_for(lead)
    url = reverse("settings_page", args=[project.slug])
    page = client.get(url).content.decode()
    assert "Annotators per item" in page and "split-preview" in page
    response = client.post(
        url,
        {
            "thresholds_present": "1",
            "threshold_entity_f1": "1.5",
            "split_train": "0.9",
            "split_val": "0",
            "split_test": "0.1",
            "skip_reasons": "disturbing: too much\nother: Other",
        },
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert "entity_f1: a number between 0 and 1" in page and 'value="1.5"' in page
    preview = client.post(
        reverse("settings_split_preview", args=[project.slug]),
        {"split_train": "0.9", "split_val": "0", "split_test": "0.1"},
    ).content.decode()
    assert 'data-empty-split="val"' in preview
    response = client.post(url, {"skip_reasons": "disturbing: Too much for me\nother: Something else"})
    assert response.status_code == 302
    project.refresh_from_db()
    assert project.skip_reasons == [["disturbing", "Too much for me"], ["other", "Something else"]]


@pytest.fixture
def aha_project(lead, annotator_a, annotator_b, annotator_c, reviewer, tmp_path):
    project = project_with_members(
        "aha1", preset="aha", lead=[lead], annotator=[annotator_a, annotator_b, annotator_c], reviewer=[reviewer]
    )
    items_open(items_create(project, tmp_path / "aha", 1))
    return project


HATE = {"is_hateful": "Hateful", "hateful_type": ["Mocking"], "targeted_categories": ["religion"]}


def test_majority_vote_settles_2_of_3_and_sends_the_rest_to_a_reviewer(
    aha_project, annotator_a, annotator_b, annotator_c, reviewer
):
    assert aha_project.auto_merge_rules == ["majority"]
    submit(annotator_a, aha_project, HATE)
    submit(annotator_b, aha_project, {**HATE, "hateful_type": ["Slurs"]})
    result = submit(annotator_c, aha_project, {**HATE, "targeted_categories": ["race"], "hateful_type": ["Contempt"]})
    # is_hateful 3/3 (identical), targeted_categories 2/3 (majority), hateful_type 1/1/1 (reviewer)
    assert result.routed_to == "adjudication"
    task = AdjudicationTask.objects.get(item__project=aha_project)
    assert set(task.settled) == {"targeted_categories"} and task.settled["targeted_categories"]["votes"] == 2
    task = adjudication_next(project=aha_project, reviewer=reviewer)
    record = gold_decide(
        task=task, reviewer=reviewer, decisions={"hateful_type": {"pick": 2}}, note="", version=task.version
    )
    assert record.values["targeted_categories"] == ["religion"] and record.values["hateful_type"] == ["Slurs"]
    assert record.provenance["targeted_categories"] == {"source": "majority", "votes": 2, "of": 3}
    assert record.provenance["is_hateful"] == {"source": "identical"}
    assert record.provenance["hateful_type"]["source"] == "reviewer"


def test_majority_alone_makes_gold_without_a_reviewer(aha_project, annotator_a, annotator_b, annotator_c):
    submit(annotator_a, aha_project, HATE)
    submit(annotator_b, aha_project, HATE)
    other = {"is_hateful": "Not-Hateful", "non_hateful_type": ["Humor"]}
    assert submit(annotator_c, aha_project, other).routed_to == "gold"
    gold = GoldRecord.objects.get(item__project=aha_project)
    assert gold.values["is_hateful"] == "Hateful" and gold.values["non_hateful_type"] == []
    assert {p["source"] for p in gold.provenance.values()} == {"majority"}


# ---------------------------------------------------------------- members page


def test_members_page_lists_progress_and_acts(client_for, project, lead, annotator_a, annotator_b, items, make_user):
    items_open(items)
    submit(annotator_a, project, MEME3W_HARMFUL)
    client = client_for(lead)
    url = reverse("members_page", args=[project.slug])
    page = client.get(url).content.decode()
    assert 'id="member-annotator_a"' in page
    row = page[page.index('id="member-annotator_a"') :]
    assert "<td>1</td>" in row[:3000]
    make_user("joiner", email="joiner@example.org")
    assert (
        client.post(
            url, {"action": "add", "identifier": "joiner@example.org", "roles": ["annotator", "reviewer"]}
        ).status_code
        == 302
    )
    page = client.post(url, {"action": "invite", "email": "fresh@example.org", "roles": ["annotator"]}).content.decode()
    assert "/invite/" in page and "shown only once" in page
    response = client.post(
        url,
        {"action": "invite", "email": "fresh@example.org", "roles": ["annotator"]},
        HTTP_REFERER="http://testserver" + url,
    )
    assert response.status_code == 302  # refused with a message on the page
    assert "pending invitation" in client.get(url).content.decode()
    csv_file = SimpleUploadedFile("m.csv", b"username,email,roles\nannotator_b,,auditor\nnobody,,annotator\n")
    page = client.post(url, {"action": "csv", "file": csv_file}).content.decode()
    assert "1 added" in page and "nobody" in page
    assert client.post(url, {"action": "deactivate", "user": annotator_a.pk}).status_code == 302
    api = client.get(f"/api/projects/{project.slug}/members/").json()
    a = next(m for m in api if m["username"] == "annotator_a")
    assert not a["active"] and a["progress"]["submitted"] == 1  # past work stays, counted
    response = client.post(
        f"/api/projects/{project.slug}/members/{lead.pk}/", {"active": False}, content_type="application/json"
    )
    assert response.status_code == 409 and "last lead" in response.json()["detail"]
    response = client.post(
        f"/api/projects/{project.slug}/invitations/",
        {"email": "api@example.org", "roles": ["reviewer"]},
        content_type="application/json",
    )
    assert response.status_code == 201 and response.json()["token"]
    accepted = client.post(
        "/api/invitations/accept",
        {
            "token": response.json()["token"],
            "username": "apiuser",
            "password": "correct-horse-battery-staple",
            "password2": "correct-horse-battery-staple",
        },
        content_type="application/json",
    )
    assert accepted.status_code == 201 and accepted.json()["project"] == project.slug


# ---------------------------------------------------------------- access: outsiders and wrong roles


def _setup_endpoints(slug, user_id):
    return [
        ("get", reverse("schema_editor", args=[slug]), None),
        ("post", reverse("schema_preview", args=[slug]), {}),
        ("get", reverse("schema_export", args=[slug]), None),
        ("get", reverse("members_page", args=[slug]), None),
        ("post", reverse("members_page", args=[slug]), {"action": "add", "identifier": "x", "roles": ["annotator"]}),
        ("get", reverse("settings_page", args=[slug]), None),
        ("post", reverse("settings_split_preview", args=[slug]), {}),
        ("get", reverse("guideline_page", args=[slug]), None),
        ("get", f"/api/projects/{slug}/schema/", None),
        ("post", f"/api/projects/{slug}/schema/", {"schema": MEME3W_SCHEMA}),
        ("post", f"/api/projects/{slug}/schema/check", {"schema": MEME3W_SCHEMA}),
        ("get", f"/api/projects/{slug}/members/", None),
        ("post", f"/api/projects/{slug}/members/", {"identifier": "x", "roles": ["annotator"]}),
        ("post", f"/api/projects/{slug}/members/{user_id}/", {"active": False}),
        ("get", f"/api/projects/{slug}/invitations/", None),
        ("post", f"/api/projects/{slug}/invitations/", {"email": "z@example.org", "roles": ["annotator"]}),
        ("get", f"/api/projects/{slug}/settings/", None),
        ("post", f"/api/projects/{slug}/settings/", {"settings": {"split_seed": 3}}),
    ]


def _call(client, method, url, data):
    if method == "get":
        return client.get(url)
    if url.startswith("/api/"):
        return getattr(client, method)(url, json.dumps(data or {}), content_type="application/json")
    return client.post(url, data or {})


@pytest.mark.parametrize("who", ["annotator_a", "reviewer", "auditor", "researcher"])
def test_wrong_roles_are_refused_every_setup_endpoint(client_for, project, who, request, annotator_b):
    client = client_for(request.getfixturevalue(who))
    for method, url, data in _setup_endpoints(project.slug, annotator_b.pk):
        assert _call(client, method, url, data).status_code == 403, (method, url)
    project.refresh_from_db()
    assert project.split_seed == 0 and project.schema_version == 1


def test_outsiders_get_404_on_every_setup_endpoint(client_for, project, outsider, annotator_b):
    client = client_for(outsider)  # a lead of another project
    for method, url, data in _setup_endpoints(project.slug, annotator_b.pk):
        assert _call(client, method, url, data).status_code == 404, (method, url)


def test_a_lead_cannot_reach_another_projects_member_or_invitation(client_for, project, lead, outsider):
    invitation, _ = invitation_create(project=project, email="q@example.org", roles=["annotator"], by=lead)
    other_slug = "other"
    client = client_for(outsider)
    assert client.post(f"/api/projects/{other_slug}/invitations/{invitation.pk}/revoke").status_code == 404
    assert (
        client.post(
            f"/api/projects/{other_slug}/members/{lead.pk}/", {"active": False}, content_type="application/json"
        ).status_code
        == 404
    )


def test_anonymous_users_are_sent_to_login_or_refused(client, project):
    assert client.get(reverse("schema_editor", args=[project.slug])).status_code == 302
    assert client.get(reverse("project_create")).status_code == 302
    assert client.get(f"/api/projects/{project.slug}/settings/").status_code in (401, 403)
    assert client.post("/api/projects/", {"name": "x"}, content_type="application/json").status_code in (401, 403)


def test_openapi_documents_the_setup_endpoints(client_for, lead):
    paths = client_for(lead).get("/api/schema/?format=json").json()["paths"]
    for p in (
        "/api/projects/",
        "/api/projects/{slug}/guideline/",
        "/api/projects/{slug}/schema/",
        "/api/projects/{slug}/schema/check",
        "/api/projects/{slug}/members/",
        "/api/projects/{slug}/members/{user_id}/",
        "/api/projects/{slug}/members/csv",
        "/api/projects/{slug}/invitations/",
        "/api/projects/{slug}/invitations/{invitation_id}/revoke",
        "/api/projects/{slug}/settings/",
        "/api/invitations/accept",
        "/api/staff/project-creators",
    ):
        assert p in paths, p
    assert "post" in paths["/api/projects/"]


def test_membership_add_still_works_for_several_roles(project, annotator_a):
    membership_add(project=project, user=annotator_a, role="reviewer")
    assert set(annotator_a.memberships.filter(project=project).values_list("role", flat=True)) == {
        "annotator",
        "reviewer",
    }


def test_deactivation_gives_back_claims_and_claimed_adjudications(
    project, lead, annotator_a, annotator_b, reviewer, items
):
    items_open(items)
    submit(annotator_a, project, MEME3W_HARMFUL)
    submit(annotator_b, project, {**MEME3W_HARMFUL, "target_category": "gender"})
    ready(annotator_a, project)
    held = claim(annotator_a, project)  # a live claim on the next item
    task = adjudication_next(project=project, reviewer=reviewer)
    assert task.status == "claimed"
    member_deactivate(project=project, user=annotator_a)
    member_deactivate(project=project, user=reviewer)
    assert not Assignment.objects.filter(annotator=annotator_a, status="active").exists()
    assert Annotation.objects.filter(pk=held.pk).exists()  # the draft stays
    assert Annotation.objects.filter(annotator=annotator_a, status="submitted").count() == 1  # past work counts
    task.refresh_from_db()
    assert task.status == "open" and task.reviewer is None


def test_preview_check_answers_bad_bodies_without_a_server_error(client_for, project, lead):
    url = reverse("schema_preview_check", args=[project.slug])
    client = client_for(lead)
    assert client.post(url).status_code == 302  # a plain form post: back with the message
    response = client.post(url, "[1, 2]", content_type="application/json")
    assert response.status_code == 400 and "JSON object" in response.json()["detail"]
    response = client.post(url, json.dumps({"schema": "x"}), content_type="application/json")
    assert response.status_code == 200 and response.json()["errors"] == {
        "schema": "a schema is an object with a list of fields"
    }
    response = client.post(url, "{not json", content_type="application/json")
    assert response.status_code == 400


def test_stages_are_edited_in_the_study_settings(lead, make_user, tmp_path, client):
    """Issue 14: a lead edits the rounds (who works each, how many, what it shows) on the
    settings page; a broken workflow is refused naming the stage and the rule; once items are
    under way the stages and their fields stay."""
    import json as _json

    from django.urls import reverse

    from annotation.factories import items_open
    from projects.factories import items_create, project_with_members
    from projects.models import Project

    project = project_with_members("mc", preset="memecap", lead=[lead])
    client.force_login(lead)
    url = reverse("settings_page", args=[project.slug])
    page = client.get(url).content.decode()
    assert 'id="workflow"' in page and "exclude_workers_of" in page
    stages = _json.loads(_json.dumps(project.workflow))
    stages[0]["workers"] = ["lit1", "lit2"]
    r = client.post(url, {"workflow": _json.dumps(stages), "ocr_present": "1", "ocr_on_import": "on"})
    assert r.status_code == 302
    assert Project.objects.get(pk=project.pk).workflow[0]["workers"] == ["lit1", "lit2"]
    r = client.post(url, {"workflow": "[{not json", "ocr_present": "1"})
    assert r.status_code == 400 and "not valid JSON" in r.content.decode()
    broken = [dict(stages[0], fields=["no_such_field"]), stages[1]]
    r = client.post(url, {"workflow": _json.dumps(broken), "ocr_present": "1", "ocr_on_import": "on"})
    body = r.content.decode()
    assert r.status_code == 400 and "stage 1 (literal)" in body and "no_such_field" in body
    assert "[{not json" not in body and Project.objects.get(pk=project.pk).workflow[0]["fields"] == ["image_caption"]
    # Under way: counts and people may change, the stages' fields may not.
    items_open(items_create(project, tmp_path / "src", 2))
    swapped = [dict(stages[0], fields=["image_caption", "meme_caption"]), dict(stages[1], fields=["metaphors"])]
    r = client.post(url, {"workflow": _json.dumps(swapped), "ocr_present": "1", "ocr_on_import": "on"})
    assert r.status_code == 400 and "annotation has started" in r.content.decode()
    stages[1]["annotators"] = {"by": "split", "values": {"train": 1, "val": 1, "test": 3}, "default": 1}
    r = client.post(url, {"workflow": _json.dumps(stages), "ocr_present": "1"})
    assert r.status_code == 302
    fresh = Project.objects.get(pk=project.pk)
    assert fresh.workflow[1]["annotators"]["values"]["test"] == 3 and not fresh.ocr_on_import
    # REST: the same service and rules.
    api = reverse("api_settings", args=[project.slug])
    got = client.get(api).json()
    assert got["workflow"][1]["annotators"]["values"]["test"] == 3 and got["ocr_on_import"] is False
