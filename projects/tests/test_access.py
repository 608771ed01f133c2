from __future__ import annotations

import io
import zipfile

import pytest
from django.urls import reverse
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from projects.factories import image_bytes
from projects.models import ImportJob, Item

pytestmark = pytest.mark.django_db


def zip_upload(rows=2, bad=True):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        lines = [f'{{"image": "{i}.jpg", "text": "meme {i}", "source_id": "z{i}"}}' for i in range(rows)]
        if bad:
            lines.append('{"image": "missing.jpg", "text": "x", "source_id": "zbad"}')
        z.writestr("manifest.jsonl", "\n".join(lines) + "\n")
        for i in range(rows):
            z.writestr(f"{i}.jpg", image_bytes(i))
    buf.seek(0)
    buf.name = "batch.zip"
    return buf


def test_anonymous_is_sent_to_login(client, project):
    for url in ["/", f"/p/{project.slug}/", f"/p/{project.slug}/import/"]:
        r = client.get(url)
        assert r.status_code == 302 and r["Location"].startswith("/accounts/login/")


def test_home_lists_only_my_projects(client_for, annotator_a, project, outsider):
    r = client_for(annotator_a).get("/")
    assert b"P1" in r.content and b"OTHER" not in r.content


def test_outsider_gets_404_everywhere(client_for, outsider, project, items):
    c = client_for(outsider)
    item = items[0]
    for url in [
        f"/p/{project.slug}/",
        f"/p/{project.slug}/import/",
        f"/p/{project.slug}/items/{item.pk}/image",
        f"/p/{project.slug}/import/1/",
        "/p/does-not-exist/",
    ]:
        assert c.get(url).status_code == 404, url


def test_item_of_another_project_is_404_even_for_a_member(client_for, lead, project, outsider, tmp_path):
    from projects.factories import items_create
    from projects.models import Project

    other_item = items_create(Project.objects.get(slug="other"), tmp_path / "o", 1)[0]
    assert client_for(lead).get(f"/p/{project.slug}/items/{other_item.pk}/image").status_code == 404


def test_wrong_role_gets_403_on_lead_pages(client_for, annotator_a, researcher, project):
    for user in (annotator_a, researcher):
        assert client_for(user).get(f"/p/{project.slug}/import/").status_code == 403


def test_image_is_served_as_an_image_never_as_html(client_for, lead, project, items):
    # The lead: an annotator sees only images of items in their queue (tests/security/test_images.py).
    r = client_for(lead).get(f"/p/{project.slug}/items/{items[0].pk}/image")
    assert r.status_code == 200
    assert r["Content-Type"] == "image/jpeg"
    assert r["X-Content-Type-Options"] == "nosniff"
    assert "sandbox" in r["Content-Security-Policy"]
    assert b"".join(r.streaming_content)[:2] == b"\xff\xd8"


def test_lead_uploads_zip_and_reads_the_report(client_for, lead, project, django_capture_on_commit_callbacks):
    c = client_for(lead)
    with django_capture_on_commit_callbacks(execute=True):
        r = c.post(reverse("import_page", args=[project.slug]), {"file": zip_upload()})
    r = c.get(r["Location"])
    assert r.status_code == 200
    job = ImportJob.objects.get(project=project)
    assert job.status == "done" and job.imported == 2 and len(job.errors) == 1
    assert b"missing file missing.jpg" in r.content
    assert Item.objects.filter(project=project).count() == 2
    partial = c.get(reverse("job_partial", args=[project.slug, "import", job.pk]))
    assert partial.status_code == 200 and b"<html" not in partial.content and b"refused" in partial.content


def test_upload_that_is_not_a_zip_gets_a_message(client_for, lead, project):
    f = io.BytesIO(b"hello")
    f.name = "notes.txt"
    r = client_for(lead).post(reverse("import_page", args=[project.slug]), {"file": f})
    assert r.status_code == 200 and b"Upload a .zip file" in r.content
    assert not ImportJob.objects.exists()


def test_pages_carry_a_strict_csp_and_no_inline_script(client_for, lead, project):
    r = client_for(lead).get(f"/p/{project.slug}/import/")
    csp = r["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe-inline" not in csp
    assert b"<script>" not in r.content and b"style=" not in r.content


# ---------------------------------------------------------------- REST API


def api_for(user):
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def test_api_requires_authentication(project):
    assert APIClient().get("/api/projects/").status_code == 401


def test_api_lists_only_member_projects(researcher, project, outsider, django_assert_max_num_queries):
    client = api_for(researcher)
    with django_assert_max_num_queries(5):
        r = client.get("/api/projects/")
    assert [p["slug"] for p in r.json()["results"]] == ["p1"]
    assert client.get("/api/projects/other/").status_code == 404
    detail = client.get("/api/projects/p1/").json()
    assert detail["roles"] == ["researcher"] and detail["schema"]["fields"][0]["name"] == "label"


def test_api_import_lead_only(lead, annotator_a, researcher, outsider, project, django_capture_on_commit_callbacks):
    assert (
        api_for(outsider).post("/api/projects/p1/imports/", {"file": zip_upload()}, format="multipart").status_code
        == 404
    )
    for user in (annotator_a, researcher):
        assert (
            api_for(user).post("/api/projects/p1/imports/", {"file": zip_upload()}, format="multipart").status_code
            == 403
        )
    with django_capture_on_commit_callbacks(execute=True):
        r = api_for(lead).post("/api/projects/p1/imports/", {"file": zip_upload(bad=False)}, format="multipart")
    assert r.status_code == 202 and r.json()["status"] == "pending"
    job_id = r.json()["id"]
    status = api_for(lead).get(f"/api/projects/p1/imports/{job_id}/").json()
    assert status["status"] == "done" and status["imported"] == 2
    assert api_for(outsider).get(f"/api/projects/p1/imports/{job_id}/").status_code == 404
    bad = api_for(lead).post("/api/projects/p1/imports/", {}, format="multipart")
    assert bad.status_code == 400 and "file" in bad.json()["errors"]


def test_openapi_schema_and_docs_are_served(client_for, researcher, project):
    c = client_for(researcher)
    schema = c.get("/api/schema/")
    assert schema.status_code == 200 and b"/api/projects/" in schema.content
    docs = c.get("/api/docs/")
    assert docs.status_code == 200
