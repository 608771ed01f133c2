"""Creating projects, the schema as files, guideline versions, members and invitations (issue 12)."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from core.errors import Conflict, Forbidden, Invalid, NotFound, StaleVersion
from projects.factories import PASSWORD
from projects.guideline import render_markdown
from projects.members import (
    invitation_accept,
    invitation_create,
    member_add,
    member_deactivate,
    member_roles_set,
    members_import_csv,
)
from projects.models import GuidelineVersion, Invitation, Membership, Project, Role, SchemaVersion
from projects.presets import PRESETS
from projects.schema_io import schema_dump, schema_parse, schema_problems
from projects.services import (
    guideline_save,
    project_create_for_user,
    project_creator_set,
    project_schema_update,
    settings_clean,
    split_preview,
    user_can_create_projects,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def creator(make_user):
    user = make_user("creator")
    user.user_permissions.add(Permission.objects.get(codename="create_project"))
    return get_fresh(user)


def get_fresh(user):
    return type(user).objects.get(pk=user.pk)


# ---------------------------------------------------------------- creating projects


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_creates_a_project_with_its_settings(creator, preset):
    project = project_create_for_user(user=creator, name=f"Study {preset}", slug=f"s-{preset}", preset=preset)
    conf = PRESETS[preset]
    assert project.preset == preset and project.schema["fields"] == conf["schema"]["fields"]
    assert project.annotators_per_item == conf["annotators_per_item"]
    assert project.skip_reasons == conf["skip_reasons"]
    assert project.auto_merge_rules == conf.get("auto_merge_rules", [])
    assert Membership.objects.filter(project=project, user=creator, role=Role.LEAD, is_active=True).exists()
    assert SchemaVersion.objects.filter(project=project, version=1).exists()
    assert GuidelineVersion.objects.get(project=project, version=1).text == conf["guideline"]


def test_creating_needs_the_permission_that_staff_grant(make_user):
    staff = make_user("staffer", is_staff=True)
    user = make_user("wannabe")
    assert not user_can_create_projects(user)
    with pytest.raises(Forbidden):
        project_create_for_user(user=user, name="X", slug="x-1", preset="custom")
    with pytest.raises(Forbidden):  # a non-staff user cannot grant it
        project_creator_set(staff=user, user=user, allowed=True)
    project_creator_set(staff=staff, user=user, allowed=True)
    user = get_fresh(user)
    assert user_can_create_projects(user)
    project_create_for_user(user=user, name="X", slug="x-1", preset="custom")
    project_creator_set(staff=staff, user=user, allowed=False)
    assert not user_can_create_projects(get_fresh(user))


def test_bad_names_slugs_and_presets_are_named(creator, project):
    with pytest.raises(Invalid) as exc:
        project_create_for_user(user=creator, name="Again", slug="p1", preset="custom")
    assert "taken" in exc.value.errors["slug"]
    with pytest.raises(Invalid) as exc:
        project_create_for_user(user=creator, name="", slug="Bad Slug!", preset="nope")
    assert set(exc.value.errors) >= {"name", "slug"}
    with pytest.raises(Invalid) as exc:
        project_create_for_user(user=creator, name="Ok", slug="ok-1", preset="nope")
    assert "preset" in exc.value.errors
    assert Project.objects.filter(slug="ok-1").count() == 0


def test_copy_settings_only_from_a_project_one_leads(creator, project, lead):
    source = project_create_for_user(user=creator, name="Source", slug="source", preset="aha")
    project_schema_update(project=source, schema={"fields": [*source.schema["fields"][:1]]})
    source.refresh_from_db()
    source.split_seed = 42
    source.save()
    copy = project_create_for_user(user=creator, name="Copy", slug="copy", copy_from_slug="source")
    assert copy.schema["fields"] == source.schema["fields"] and copy.schema_version == 1
    assert copy.split_seed == 42 and copy.preset == "aha" and copy.annotators_per_item == 3
    assert not copy.items.exists()
    with pytest.raises(Invalid) as exc:  # creator is not a lead of p1
        project_create_for_user(user=creator, name="Steal", slug="steal", copy_from_slug=project.slug)
    assert "copy_from" in exc.value.errors


def test_create_page_and_api(client_for, creator, make_user):
    client = client_for(creator)
    assert client.get(reverse("project_create")).status_code == 200
    response = client.post(reverse("project_create"), {"name": "Page study", "slug": "page-study", "preset": "custom"})
    assert response.status_code == 302 and Project.objects.filter(slug="page-study").exists()
    response = client.post(reverse("project_create"), {"name": "Again", "slug": "page-study", "preset": "custom"})
    assert response.status_code == 200 and "taken" in response.content.decode()
    response = client.post("/api/projects/", {"name": "Api study", "preset": "meme3w"}, content_type="application/json")
    assert response.status_code == 201, response.content
    assert response.json()["slug"] == "api-study" and response.json()["roles"] == ["lead"]
    response = client.post(
        "/api/projects/", {"name": "x", "slug": "api-study", "preset": "meme3w"}, content_type="application/json"
    )
    assert response.status_code == 400 and "slug" in response.json()["errors"]
    other = make_user("nocreate")
    client.logout()
    client = client_for(other)
    assert client.get(reverse("project_create")).status_code == 403
    assert (
        client.post("/api/projects/", {"name": "n", "preset": "custom"}, content_type="application/json").status_code
        == 403
    )


def test_staff_page_grants_the_permission(client_for, make_user):
    staff = make_user("staffer", is_staff=True)
    user = make_user("future_lead")
    assert client_for(user).get(reverse("staff_creators")).status_code == 403
    client = client_for(staff)
    assert client.post(reverse("staff_creators"), {"user": user.pk, "allowed": "1"}).status_code == 302
    assert user_can_create_projects(get_fresh(user))
    response = client.post(
        "/api/staff/project-creators", {"username": user.username, "allowed": False}, content_type="application/json"
    )
    assert response.status_code == 200 and not user_can_create_projects(get_fresh(user))


def test_admin_add_form_goes_through_the_service(client, make_user):
    admin = make_user("root", is_staff=True, is_superuser=True)
    assert client.login(username=admin.username, password=PASSWORD)
    response = client.post(
        "/admin/projects/project/add/",
        {"name": "Admin study", "slug": "admin-study", "preset": "aha", "lead": admin.pk},
    )
    assert response.status_code == 302, response.content.decode()[:3000]
    project = Project.objects.get(slug="admin-study")
    assert project.annotators_per_item == 3 and project.auto_merge_rules == ["majority"]
    assert project.schema["fields"] == PRESETS["aha"]["schema"]["fields"]
    assert GuidelineVersion.objects.filter(project=project).count() == 1
    response = client.post("/admin/projects/project/add/", {"name": "Dup", "slug": "admin-study", "preset": "aha"})
    assert response.status_code == 200 and "taken" in response.content.decode()


# ---------------------------------------------------------------- schema files


def test_schema_problems_name_the_field_and_the_rule():
    problems = schema_problems(
        {
            "fields": [
                {"name": "label", "type": "choice", "choices": ["a", "b"]},
                {"name": "Bad Name", "type": "choice", "choices": ["x"]},
                {"name": "kinds", "type": "multichoice", "choices": ["x", "y"], "exclusive": ["z"]},
                {"name": "when", "type": "text", "visible_if": {"field": "label", "in": ["c"]}},
                {"name": "boxes", "type": "boxes", "colour": "red"},
                {"name": "score", "type": "entity", "threshold": 3},
            ]
        }
    )
    assert set(problems) == {
        "field 2 (Bad Name)",
        "field 3 (kinds)",
        "field 4 (when)",
        "field 5 (boxes)",
        "field 6 (score)",
    }
    assert "exclusive" in problems["field 3 (kinds)"]
    assert "c is not a choice of label" in problems["field 4 (when)"]
    assert "colour" in problems["field 5 (boxes)"]
    assert "threshold" in problems["field 6 (score)"]
    assert schema_problems({"fields": []}) == {"schema": "the list of fields is empty: add at least one field"}
    assert schema_problems("text") == {"schema": "a schema is an object with a list of fields"}


@pytest.mark.parametrize("fmt", ["json", "yaml"])
def test_schema_round_trips_through_json_and_yaml(fmt):
    schema = PRESETS["meme3w"]["schema"]
    assert schema_parse(schema_dump(schema, fmt=fmt), fmt=fmt) == schema


@pytest.mark.parametrize(
    ("text", "fmt", "needle"),
    [
        ("a: &x [1, 2]\nb: *x\n", "yaml", "aliases"),
        ("fields: [1, 2\n", "yaml", "line"),
        ('{"fields": [', "json", "line 1"),
        ("[" * 5000 + "]" * 5000, "json", "nested"),
        (b"\xff\xfe\x00", "json", "UTF-8"),
        ("!!python/object/apply:os.system ['true']", "yaml", "YAML"),
        ("x" * 300_000, "json", "longer"),
    ],
)
def test_hostile_schema_files_are_refused_with_a_message(text, fmt, needle):
    with pytest.raises(Invalid) as exc:
        schema_parse(text, fmt=fmt)
    assert needle in exc.value.message


def test_schema_update_checks_the_version_and_every_field(project):
    with pytest.raises(StaleVersion):
        project_schema_update(project=project, schema=PRESETS["meme3w"]["schema"], expected_version=7)
    with pytest.raises(Invalid) as exc:
        project_schema_update(project=project, schema={"fields": [{"name": "x", "type": "choice"}]})
    assert "field 1 (x)" in exc.value.errors
    project = project_schema_update(project=project, schema=PRESETS["meme3w"]["schema"], expected_version=1)
    assert project.schema_version == 2


# ---------------------------------------------------------------- guideline


def test_guideline_markdown_is_rendered_without_raw_html():
    html = render_markdown(
        "# Title\n\n<script>alert(1)</script> <img src=x onerror=alert(1)>\n\n[bad](javascript:alert(1)) [ok](https://example.org)"
    )
    assert "<h3>Title</h3>" in html
    assert "<script" not in html and "<img" not in html and "&lt;script&gt;" in html
    assert 'href="javascript' not in html and 'href="https://example.org"' in html


def test_guideline_versions(project, lead):
    first = project.guideline_version
    row = guideline_save(project=project, text="# New\n\nBe kind.", note="shorter", user=lead, expected_version=first)
    assert row.version == first + 1 and row.note == "shorter"
    project.refresh_from_db()
    assert project.guideline == "# New\n\nBe kind." and project.guideline_version == first + 1
    assert (
        guideline_save(project=project, text="# New\n\nBe kind.", user=lead).version == first + 1
    )  # unchanged: no new version
    with pytest.raises(StaleVersion):
        guideline_save(project=project, text="other", user=lead, expected_version=first)
    with pytest.raises(Invalid):
        guideline_save(project=project, text="   ", user=lead)


def test_guideline_page_and_api(client_for, project, lead, annotator_a, researcher):
    client = client_for(lead)
    assert client.get(reverse("guideline_page", args=[project.slug])).status_code == 200
    response = client.post(
        reverse("guideline_page", args=[project.slug]),
        {"text": "# Rules\n\n<b>x</b>", "note": "v2", "version": project.guideline_version, "action": "save"},
    )
    assert response.status_code == 302
    page = client.get(reverse("project_detail", args=[project.slug])).content.decode()
    assert "<h3>Rules</h3>" in page and "&lt;b&gt;x&lt;/b&gt;" in page
    response = client.post(
        f"/api/projects/{project.slug}/guideline/", {"text": "# Three"}, content_type="application/json"
    )
    assert response.status_code == 201 and response.json()["version"] == 3
    client.logout()
    client = client_for(annotator_a)
    assert client.get(f"/api/projects/{project.slug}/guideline/").json()[0]["version"] == 3
    assert (
        client.post(
            f"/api/projects/{project.slug}/guideline/", {"text": "x"}, content_type="application/json"
        ).status_code
        == 403
    )
    assert client.get(reverse("guideline_page", args=[project.slug])).status_code == 403
    client.logout()
    client = client_for(researcher)
    assert client.get(f"/api/projects/{project.slug}/guideline/").status_code == 403


# ---------------------------------------------------------------- members


def test_members_add_roles_and_the_last_lead(project, lead, make_user):
    newcomer = make_user("newcomer", email="New@Example.org")
    user, added = member_add(project=project, identifier="new@example.org", roles=["annotator", "reviewer"])
    assert user == newcomer and added == ["annotator", "reviewer"]
    with pytest.raises(Conflict):
        member_add(project=project, identifier="newcomer", roles="annotator")
    with pytest.raises(Invalid) as exc:
        member_add(project=project, identifier="nobody", roles="annotator")
    assert "invite" in exc.value.errors["identifier"]
    with pytest.raises(Invalid):
        member_add(project=project, identifier="newcomer", roles="boss")
    member_roles_set(project=project, user=newcomer, roles=["reviewer"])
    assert set(
        Membership.objects.filter(project=project, user=newcomer, is_active=True).values_list("role", flat=True)
    ) == {"reviewer"}
    with pytest.raises(Conflict):
        member_deactivate(project=project, user=lead)
    with pytest.raises(Conflict):
        member_roles_set(project=project, user=lead, roles=["annotator"])
    member_roles_set(project=project, user=newcomer, roles=["lead"])
    member_deactivate(project=project, user=lead)  # newcomer leads now
    assert not Membership.objects.filter(project=project, user=lead, is_active=True).exists()
    assert Membership.objects.filter(project=project, user=lead).exists()  # the rows stay


def test_a_deactivated_member_is_refused_everywhere(client_for, project, annotator_a):
    member_deactivate(project=project, user=annotator_a)
    client = client_for(annotator_a)
    assert client.get(reverse("project_detail", args=[project.slug])).status_code == 404
    assert client.get(reverse("annotate_home", args=[project.slug])).status_code == 404
    assert project.slug not in json.dumps(client.get("/api/projects/").json())


def test_invitation_is_one_time_and_expires(project, lead, annotator_a, client):
    annotator_a.email = "a@example.org"
    annotator_a.save()
    with pytest.raises(Conflict):
        invitation_create(project=project, email="A@example.org", roles=["annotator"], by=lead)
    with pytest.raises(Invalid):
        invitation_create(project=project, email="not-an-address", roles=["annotator"], by=lead)
    invitation, token = invitation_create(
        project=project, email="new@example.org", roles=["annotator", "auditor"], by=lead
    )
    assert token not in json.dumps(list(Invitation.objects.values()), default=str)
    with pytest.raises(Conflict):
        invitation_create(project=project, email="new@example.org", roles=["annotator"], by=lead)
    with pytest.raises(Invalid) as exc:
        invitation_accept(token=token, username="n", password="short", password2="short")
    assert "password" in exc.value.errors
    user, joined = invitation_accept(token=token, username="newbie", password=PASSWORD, password2=PASSWORD)
    assert joined == project and user.email == "new@example.org"
    assert set(Membership.objects.filter(project=project, user=user).values_list("role", flat=True)) == {
        "annotator",
        "auditor",
    }
    with pytest.raises(NotFound):
        invitation_accept(token=token, username="again", password=PASSWORD, password2=PASSWORD)
    assert client.get(reverse("invitation", args=[token])).status_code == 404
    expired, token2 = invitation_create(project=project, email="late@example.org", roles=["annotator"], by=lead)
    Invitation.objects.filter(pk=expired.pk).update(expires_at=expired.created_at)
    assert client.get(reverse("invitation", args=[token2])).status_code == 404


def test_invitation_page_sets_a_password_and_logs_in(project, lead, client):
    _, token = invitation_create(project=project, email="page@example.org", roles=["annotator"], by=lead)
    url = reverse("invitation", args=[token])
    assert "Join" in client.get(url).content.decode()
    response = client.post(url, {"username": "pageuser", "password": PASSWORD, "password2": "different"})
    assert response.status_code == 200 and "differ" in response.content.decode()
    response = client.post(url, {"username": "pageuser", "password": PASSWORD, "password2": PASSWORD})
    assert response.status_code == 302 and response["Location"] == reverse("project_detail", args=[project.slug])
    assert client.get(reverse("project_detail", args=[project.slug])).status_code == 200


def test_csv_lists_each_bad_row_and_adds_the_good_ones(project, lead, make_user):
    make_user("known", email="known@example.org")
    data = (
        b"username,email,roles\n"
        b"known,,annotator reviewer\n"
        b",fresh@example.org,annotator\n"
        b"ghost,,annotator\n"
        b"known,,annotator\n"
        b"x,bad-address,annotator\n"
        b"y,y@example.org,wizard\n"
        b"only,two\n"
        b",,\n"
        b"=cmd|' /C calc'!A0,evil@example.org,annotator\n"
    )
    result = members_import_csv(project=project, data=data, by=lead)
    assert [r["username"] for r in result.added] == ["known"]
    assert sorted(r["email"] for r in result.invited) == ["evil@example.org", "fresh@example.org"]
    problems = {p["row"]: p["problem"] for p in result.problems}
    assert set(problems) == {4, 5, 6, 7, 8}
    assert "invite" in problems[4] and "earlier row" in problems[5] and "email" in problems[6]
    assert "wizard" in problems[7] and "3 columns" in problems[8]
    with pytest.raises(Invalid):
        members_import_csv(project=project, data=b"\xff\xfe\x00\x00", by=lead)


# ---------------------------------------------------------------- settings


def test_settings_are_checked_and_explained(project):
    clean = settings_clean(
        project=project,
        data={"claim_timeout_minutes": "30", "split_ratios": ["8", "1", "1"], "thresholds": {"entity_f1": 0.5}},
    )
    assert clean == {"claim_timeout_minutes": 30, "split_ratios": [0.8, 0.1, 0.1], "thresholds": {"entity_f1": 0.5}}
    with pytest.raises(Invalid) as exc:
        settings_clean(
            project=project,
            data={
                "annotators_per_item": "0",
                "claim_timeout_minutes": "soon",
                "split_ratios": [1, -1, 0],
                "thresholds": {"entity_f1": 2},
                "auto_merge_rules": ["coin_flip"],
                "skip_reasons": [["disturbing", "x"]],
                "audit_strata": ["nope"],
                "colour": "red",
            },
        )
    assert set(exc.value.errors) == {
        "annotators_per_item",
        "claim_timeout_minutes",
        "split_ratios",
        "thresholds",
        "auto_merge_rules",
        "skip_reasons",
        "audit_strata",
        "__all__",
    }
    with pytest.raises(Invalid) as exc:
        settings_clean(project=project, data={"auto_merge_rules": ["majority"]})  # 2 annotators
    assert "3 or more" in exc.value.errors["auto_merge_rules"]
    assert settings_clean(project=project, data={"auto_merge_rules": ["majority"], "annotators_per_item": 3})


def test_split_preview_sizes_and_empty_splits():
    assert [s["items"] for s in split_preview(ratios=[0.85, 0.05, 0.10], n=100)] == [85, 5, 10]
    small = split_preview(ratios=[0.85, 0.05, 0.10], n=8)
    assert sum(s["items"] for s in small) == 8 and [s["split"] for s in small if s["empty"]] == ["val"]
    assert all(s["empty"] for s in split_preview(ratios=[1, 1, 1], n=0))


def test_staff_bring_in_a_new_project_creator_with_a_one_time_link(client_for, make_user, client):
    staff = make_user("staffer", is_staff=True)
    page = client_for(staff)
    response = page.post(
        reverse("staff_creators"), {"action": "invite", "username": "newlead", "email": "nl@example.org"}
    )
    body = response.content.decode()
    assert response.status_code == 200 and "/accounts/set-password/" in body
    link = body.split('id="creator-link"')[0].rsplit('value="', 1)[1].split('"')[0]
    assert "/accounts/set-password/" in link
    refused = page.post(
        reverse("staff_creators"), {"action": "invite", "username": "newlead", "email": "x@example.org"}
    )
    assert "taken" in refused.content.decode()
    page.logout()
    path = link.split("testserver", 1)[1]
    form_page = client.get(path, follow=True)
    assert form_page.status_code == 200 and "Set your password" in form_page.content.decode()
    done = client.post(
        form_page.redirect_chain[-1][0] if form_page.redirect_chain else path,
        {"new_password1": PASSWORD, "new_password2": PASSWORD},
    )
    assert done.status_code == 302
    assert client.login(username="newlead", password=PASSWORD)
    user = type(staff).objects.get(username="newlead")
    assert user_can_create_projects(user)
    client.logout()
    assert "not valid" in client.get(path, follow=True).content.decode()  # spent


def test_invitation_for_an_existing_account_asks_to_add_them(project, lead, make_user):
    make_user("has_account", email="has@example.org")
    with pytest.raises(Conflict) as exc:
        invitation_create(project=project, email="HAS@example.org", roles=["annotator"], by=lead)
    assert "add them" in exc.value.message
