"""REST API: roles (outsider 404, wrong role 403), files with ETag and Range, records by split,
diffs, export jobs, token authentication."""

from __future__ import annotations

import io
import json

import pandas as pd
import pyarrow.parquet as pq
import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from exports.models import ExportJob, Release
from exports.selectors import release_dir
from exports.services import export_job_run, export_job_start

pytestmark = pytest.mark.django_db


def api(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def release(project, gold_items, lead):
    job = export_job_start(project=project, user=lead, enqueue=False)
    return export_job_run(job=job)


def urls(n=1):
    base = f"/api/projects/p1/releases/{n}"
    return [
        "/api/projects/p1/releases/",
        f"{base}/",
        f"{base}/manifest",
        f"{base}/records",
        f"{base}/records?split=test",
        f"{base}/files/records.jsonl",
        f"{base}/files/README.md",
        f"{base}/diff/{n}/",
        f"{base}/archive",
    ]


def test_researchers_and_leads_read_others_are_refused(
    release, researcher, lead, annotator_a, reviewer, auditor, outsider
):
    for url in urls():
        for user in (researcher, lead):
            assert api(user).get(url).status_code == 200, (url, user)
        for user in (annotator_a, reviewer, auditor):  # gold and model identities: not for them
            assert api(user).get(url).status_code == 403, (url, user)
        assert api(outsider).get(url).status_code == 404, url
        assert APIClient().get(url).status_code == 401, url


def test_release_list_and_detail(release, researcher, django_assert_num_queries):
    client = api(researcher)
    with django_assert_num_queries(4):  # token auth, project + roles, count, page
        data = client.get("/api/projects/p1/releases/").json()
    assert data["count"] == 1
    assert data["results"][0] | {"created_at": None} == {
        "number": 1,
        "version": "v1",
        "created_at": None,
        "record_count": 4,
        "manifest_sha256": release.manifest_sha256,
        "url": "/api/projects/p1/releases/1/",
    }
    detail = client.get("/api/projects/p1/releases/1/").json()
    names = [f["name"] for f in detail["files"]]
    assert "records.parquet" in names and names[-1] == "manifest.json"
    f = detail["files"][names.index("records.jsonl")]
    assert f["sha256"] == release.manifest["files"]["records.jsonl"]["sha256"]
    assert f["url"] == "/api/projects/p1/releases/1/files/records.jsonl"
    assert detail["manifest"]["counts"]["records"] == 4


def test_missing_release_file_and_bad_split_get_clear_errors(release, researcher):
    client = api(researcher)
    assert client.get("/api/projects/p1/releases/7/").status_code == 404
    r = client.get("/api/projects/p1/releases/7/files/records.jsonl")
    assert r.status_code == 404 and "v7" in r.json()["detail"]
    r = client.get("/api/projects/p1/releases/1/files/nope.csv")
    assert r.status_code == 404 and "nope.csv" in r.json()["detail"]
    for sneaky in ("../../../secret_key", "images/../manifest.json", "%2e%2e/x"):
        assert client.get(f"/api/projects/p1/releases/1/files/{sneaky}").status_code == 404, sneaky
    r = client.get("/api/projects/p1/releases/1/records?split=holdout")
    assert r.status_code == 400 and "split" in r.json()["errors"]
    assert client.get("/api/projects/p1/releases/1/diff/9/").status_code == 404


def body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def test_download_with_etag_and_ranges(release, researcher):
    client = api(researcher)
    url = "/api/projects/p1/releases/1/files/records.jsonl"
    data = (release_dir(release) / "records.jsonl").read_bytes()
    sha = release.manifest["files"]["records.jsonl"]["sha256"]
    r = client.get(url, HTTP_ACCEPT="application/x-ndjson")
    assert r.status_code == 200 and body(r) == data
    assert r["ETag"] == f'"{sha}"' and r["Accept-Ranges"] == "bytes" and r["Content-Length"] == str(len(data))
    assert r["Content-Type"] == "application/x-ndjson" and "attachment" in r["Content-Disposition"]
    assert client.get(url, HTTP_IF_NONE_MATCH=f'"{sha}"').status_code == 304
    assert client.get(url, HTTP_IF_NONE_MATCH='"other"').status_code == 200

    r = client.get(url, HTTP_RANGE="bytes=10-19")
    assert r.status_code == 206 and body(r) == data[10:20]
    assert r["Content-Range"] == f"bytes 10-19/{len(data)}" and r["Content-Length"] == "10"
    r = client.get(url, HTTP_RANGE="bytes=-5")
    assert r.status_code == 206 and body(r) == data[-5:]
    r = client.get(url, HTTP_RANGE=f"bytes=100-{len(data) + 50}")
    assert r.status_code == 206 and body(r) == data[100:]
    # resuming: the client's copy is this version -> range; another version -> the whole file
    assert client.get(url, HTTP_RANGE="bytes=5-", HTTP_IF_RANGE=f'"{sha}"').status_code == 206
    r = client.get(url, HTTP_RANGE="bytes=5-", HTTP_IF_RANGE='"stale"')
    assert r.status_code == 200 and body(r) == data
    r = client.get(url, HTTP_RANGE=f"bytes={len(data)}-")
    assert r.status_code == 416 and r["Content-Range"] == f"bytes */{len(data)}"
    assert client.get(url, HTTP_RANGE="bytes=0-1,4-5").status_code == 200  # several ranges: whole file

    manifest = client.get("/api/projects/p1/releases/1/manifest")
    assert manifest.status_code == 200 and manifest["ETag"] == f'"{release.manifest_sha256}"'
    assert json.loads(body(manifest)) == release.manifest


def test_records_by_split_load_in_pandas_and_parquet_in_pyarrow(release, researcher):
    client = api(researcher)
    everything = pd.read_json(io.BytesIO(body(client.get("/api/projects/p1/releases/1/records"))), lines=True)
    assert len(everything) == 4
    for split in ("train", "val", "test"):
        r = client.get(f"/api/projects/p1/releases/1/records?split={split}")
        assert r.status_code == 200 and r["Content-Type"] == "application/x-ndjson"
        raw = body(r)
        expected = everything[everything["split"] == split]
        if raw:
            df = pd.read_json(io.BytesIO(raw), lines=True)
            assert set(df["split"]) == {split} and df["item_id"].tolist() == expected["item_id"].tolist()
        else:
            assert expected.empty
    table = pq.read_table(io.BytesIO(body(client.get("/api/projects/p1/releases/1/files/records.parquet"))))
    assert table.column("item_id").to_pylist() == everything["item_id"].tolist()


def test_leads_start_builds_and_follow_progress(
    project, gold_items, lead, researcher, outsider, django_capture_on_commit_callbacks
):
    url = "/api/projects/p1/exports/"
    assert api(researcher).post(url).status_code == 403
    assert api(outsider).post(url).status_code == 404
    with django_capture_on_commit_callbacks(execute=True):
        r = api(lead).post(url)
    assert r.status_code == 202 and r.json()["status"] == "pending"
    job_url = f"{url}{r.json()['id']}/"
    job = api(lead).get(job_url).json()  # the eager task ran on commit
    assert job["status"] == "done" and job["percent"] == 100 and job["release"] == 1
    assert api(researcher).get(job_url).status_code == 403
    assert api(outsider).get(job_url).status_code == 404
    assert api(lead).get(f"{url}999/").status_code == 404
    ExportJob.objects.create(project=project, created_by=lead)  # pending elsewhere
    r = api(lead).post(url)
    assert r.status_code == 409 and "already being built" in r.json()["detail"]
    assert Release.objects.count() == 1


def test_start_without_gold_is_a_clear_400(project, lead):
    r = api(lead).post("/api/projects/p1/exports/")
    assert r.status_code == 400 and "no gold" in r.json()["detail"]


def test_diff_api(project, release, lead, researcher):
    v2 = export_job_run(job=export_job_start(project=project, user=lead, enqueue=False))
    r = api(researcher).get(f"/api/projects/p1/releases/1/diff/{v2.number}/").json()
    assert r["identical"] is True and r["from"] == 1 and r["to"] == 2
    assert r["counts"] == {"added": 0, "removed": 0, "changed": 0, "unchanged": 4} and r["changes"] == []


def test_openapi_schema_lists_the_release_endpoints(researcher):
    r = api(researcher).get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert r.status_code == 200
    paths = json.loads(r.content)["paths"]
    for p in (
        "/api/projects/{slug}/releases/",
        "/api/projects/{slug}/releases/{number}/records",
        "/api/projects/{slug}/releases/{number}/files/{name}",
        "/api/projects/{slug}/exports/{job_id}/",
    ):
        assert p in paths, p
