"""Publishing outward (issue 16): the release-page button and the management command push a
published release to a Hugging Face Hub dataset repo with huggingface_hub, here against a
local stand-in for the Hub's API on 127.0.0.1; release settings edited on the releases page."""

from __future__ import annotations

import hashlib

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from exports.hub import hub_files
from exports.models import HubPush, ReleaseSettings
from exports.selectors import release_dir
from exports.services import export_job_run, export_job_start
from exports.tests.hub_stub import HubStub

pytestmark = pytest.mark.django_db


@pytest.fixture
def release(project, dup_gold, lead):
    job = export_job_start(project=project, user=lead, enqueue=False)
    return export_job_run(job=job)


@pytest.fixture
def hub(monkeypatch):
    with HubStub() as stub:
        monkeypatch.setenv("HF_ENDPOINT", stub.url)
        monkeypatch.setenv("HF_TOKEN", "hf_secret_test_token")
        yield stub


def check_commit(stub: HubStub, release, repo: str) -> None:
    root = release_dir(release)
    assert stub.repos == [{"name": repo.split("/")[1], "organization": repo.split("/")[0], "type": "dataset"}]
    assert stub.tokens == {"Bearer hf_secret_test_token"}
    (commit,) = stub.commits
    assert commit["path"] == f"/api/datasets/{repo}/commit/main"
    assert f"v{release.number}" in commit["header"]["summary"]
    files = commit["files"]
    assert sorted(files) == hub_files(root)
    # exactly the release's bytes: every manifest file, the manifest, only redistributable images
    for name, meta in release.manifest["files"].items():
        assert hashlib.sha256(files[name]).hexdigest() == meta["sha256"], name
    assert hashlib.sha256(files["manifest.json"]).hexdigest() == release.manifest_sha256
    images = [n for n in files if n.startswith("images/")]
    assert images and all((root / n).is_file() for n in images)
    assert len(images) == release.manifest["counts"]["images_included"]
    assert files["README.md"].startswith(b"---\n")
    assert stub.validated and stub.validated[0]["content"].startswith("---")


def test_release_page_button_pushes_as_a_job(client, release, lead, hub, project, django_capture_on_commit_callbacks):
    ReleaseSettings.objects.create(project=project, hub_repo="zorg-lab/zorg-memes")
    client.force_login(lead)
    page = client.get(f"/p/{project.slug}/releases/v{release.number}/")
    assert b'id="push-to-hub"' in page.content and b"zorg-lab/zorg-memes" in page.content
    with django_capture_on_commit_callbacks(execute=True):
        r = client.post(f"/p/{project.slug}/releases/v{release.number}/push/", {"repo_id": "zorg-lab/zorg-memes"})
    assert r.status_code == 302
    push = HubPush.objects.get()
    assert push.status == "done", push.error
    assert push.commit_url.startswith(hub.url) and push.files == len(hub_files(release_dir(release)))
    check_commit(hub, release, "zorg-lab/zorg-memes")
    page = client.get(f"/p/{project.slug}/releases/v{release.number}/")
    assert push.commit_url.encode() in page.content


def test_management_command_pushes(release, hub, project, capsys):
    call_command("push_release_to_hub", project.slug, str(release.number), "--repo", "someone/dataset")
    assert "someone/dataset" in capsys.readouterr().out
    check_commit(hub, release, "someone/dataset")


def test_no_token_or_bad_repo_is_refused_before_anything_is_sent(release, hub, project, monkeypatch):
    monkeypatch.delenv("HF_TOKEN")
    with pytest.raises(CommandError, match="HF_TOKEN"):
        call_command("push_release_to_hub", project.slug, str(release.number), "--repo", "someone/dataset")
    monkeypatch.setenv("HF_TOKEN", "x")
    with pytest.raises(CommandError, match="repo id"):
        call_command("push_release_to_hub", project.slug, str(release.number), "--repo", "../etc")
    assert hub.requests == [] and not HubPush.objects.exists()


def test_push_button_is_for_leads_only(client, release, researcher, outsider, annotator_a, project, hub):
    url = f"/p/{project.slug}/releases/v{release.number}/push/"
    for user, status in ((researcher, 403), (annotator_a, 403), (outsider, 404)):
        client.force_login(user)
        assert client.post(url, {"repo_id": "a/b"}).status_code == status, user
    client.force_login(researcher)
    assert b'id="push-to-hub"' not in client.get(f"/p/{project.slug}/releases/v{release.number}/").content
    assert hub.requests == []


def test_release_settings_form(client, lead, researcher, outsider, project):
    url = f"/p/{project.slug}/releases/settings/"
    client.force_login(lead)
    page = client.get(f"/p/{project.slug}/releases/")
    assert b'id="release-settings"' in page.content and b'name="citation"' in page.content
    r = client.post(url, {"license": "Not A License!", "languages": "english", "homepage": "javascript:alert(1)"})
    assert r.status_code == 200  # the form again, with the reasons by the fields
    assert b'id="rs-license-error"' in r.content and b'id="rs-languages-error"' in r.content
    assert b'id="rs-homepage-error"' in r.content and not ReleaseSettings.objects.exists()
    r = client.post(
        url,
        {
            "license": "CC-BY-4.0",
            "languages": "en, hi",
            "creators": "Ada (Lab)",
            "citation": "@misc{x}",
            "hub_repo": "lab/ds",
            "prohibited_uses": "<script>alert(1)</script>",
        },
    )
    assert r.status_code == 302
    s = ReleaseSettings.objects.get(project=project)
    assert s.license == "cc-by-4.0" and s.languages == "en, hi" and s.updated_by == lead
    page = client.get(f"/p/{project.slug}/releases/")
    assert b"<script>alert(1)</script>" not in page.content and b"&lt;script&gt;" in page.content
    for user, status in ((researcher, 403), (outsider, 404)):
        client.force_login(user)
        assert client.post(url, {"license": "mit"}).status_code == status
    client.force_login(researcher)
    assert b'id="release-settings"' not in client.get(f"/p/{project.slug}/releases/").content
