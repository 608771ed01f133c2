"""HTML pages: roles, htmx review, job progress partial, release pages, token page, query counts."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token

from exports.models import NearDuplicatePair
from exports.services import export_job_run, export_job_start, near_duplicates_detect

pytestmark = pytest.mark.django_db


@pytest.fixture
def pairs(project, dup_items):
    near_duplicates_detect(project=project)
    return list(NearDuplicatePair.objects.order_by("item_a_id"))


@pytest.fixture
def release(project, gold_items, lead):
    return export_job_run(job=export_job_start(project=project, user=lead, enqueue=False))


def status_of(client_for, user, method, url, **data):
    client = client_for(user)
    response = client.post(url, data) if method == "post" else client.get(url)
    client.logout()
    return response.status_code


def test_page_roles(client_for, pairs, release, lead, reviewer, researcher, annotator_a, auditor, outsider):
    pair = pairs[0]
    job = release.project.export_jobs.get()  # ids are not 1 on PostgreSQL (sequences survive rollbacks)
    checks = [
        ("get", "/p/p1/duplicates/", {lead, reviewer}, {researcher, annotator_a, auditor}),
        ("post", f"/p/p1/duplicates/{pair.pk}/review/", {lead, reviewer}, {researcher, annotator_a}),
        ("post", "/p/p1/duplicates/scan/", {lead}, {reviewer, researcher}),
        ("get", "/p/p1/splits/", {lead}, {reviewer, researcher}),
        ("get", "/p/p1/releases/", {lead, researcher}, {reviewer, annotator_a, auditor}),
        ("get", "/p/p1/releases/v1/", {lead, researcher}, {reviewer, annotator_a}),
        ("get", "/p/p1/releases/diff/?from=1&to=1", {lead, researcher}, {reviewer, annotator_a}),
        ("get", f"/p/p1/jobs/release/{job.pk}/", {lead}, {researcher, reviewer}),
        ("post", "/p/p1/releases/build/", {lead}, {researcher, reviewer}),
    ]
    for method, url, allowed, refused in checks:
        data = {"decision": "different", "expected_status": "unreviewed"} if "review" in url else {}
        for user in allowed:
            assert status_of(client_for, user, method, url, **data) in (200, 302), (url, user)
            if "review" in url:  # judged: the next judge must say what they saw
                data["expected_status"] = "different"
        for user in refused:
            assert status_of(client_for, user, method, url, **data) == 403, (url, user)
        assert status_of(client_for, outsider, method, url, **data) == 404, url


def test_review_queue_shows_both_sides_and_judges_with_htmx(
    client_for, project, pairs, reviewer, lead, django_assert_num_queries
):
    client = client_for(reviewer)
    # user, project + roles, page count + page, groups, counts (2), scan, last done scan + count
    # (the session comes from the cache)
    with django_assert_num_queries(10):
        page = client.get("/p/p1/duplicates/")
    html = page.content.decode()
    pair = pairs[0]
    assert html.count('class="card nd-pair') == 2
    assert f"/p/p1/items/{pair.item_a_id}/image" in html and f"/p/p1/items/{pair.item_b_id}/image" in html
    assert "Zorg meme zero" in html and f"Hamming distance {pair.distance}" in html
    assert "scan-button" not in html  # scanning is for leads

    url = f"/p/p1/duplicates/{pair.pk}/review/"
    r = client.post(url, {"decision": "same", "expected_status": "unreviewed"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 200 and 'data-status="same"' in r.content.decode() and "<html" not in r.content.decode()
    assert NearDuplicatePair.objects.get(pk=pair.pk).status == "same"
    # someone else, who still saw it unreviewed: 409 with the current state
    other = client_for(lead)
    r = other.post(url, {"decision": "different", "expected_status": "unreviewed"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 409 and "judged this pair meanwhile" in r.content.decode()
    assert 'data-status="same"' in r.content.decode()
    r = other.post(url, {"decision": "perhaps", "expected_status": "same"}, HTTP_HX_REQUEST="true")
    assert r.status_code == 400 and "same" in r.content.decode()
    assert NearDuplicatePair.objects.get(pk=pair.pk).status == "same"
    assert other.get("/p/p1/duplicates/?status=same").content.decode().count('class="card nd-pair') == 1
    assert other.post("/p/p1/duplicates/99999/review/", {"decision": "same"}).status_code == 404


def test_query_count_of_the_queue_does_not_grow_with_pairs(
    client_for, project, pairs, tmp_path, lead, django_assert_num_queries
):
    from exports.factories import items_import, recompressed
    from projects.factories import image_bytes

    items_import(
        project,
        tmp_path / "more",
        [
            {"source_id": f"x{i}", "data": recompressed(image_bytes(100 + i), quality=q), "text": f"x{i}"}
            for i in range(3)
            for q in (90,)
        ]
        + [
            {"source_id": f"y{i}", "data": recompressed(image_bytes(100 + i), quality=30), "text": f"y{i}"}
            for i in range(3)
        ],
    )
    near_duplicates_detect(project=project)
    assert NearDuplicatePair.objects.count() >= 5
    client = client_for(lead)
    with django_assert_num_queries(10):
        client.get("/p/p1/duplicates/")


def test_scan_button_runs_the_task(client_for, project, dup_items, lead, django_capture_on_commit_callbacks):
    client = client_for(lead)
    assert 'id="not-scanned">12 items not scanned yet' in client.get("/p/p1/duplicates/").content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        r = client.post("/p/p1/duplicates/scan/")
    assert r.status_code == 302 and NearDuplicatePair.objects.filter(project=project).count() == 2
    html = client.get("/p/p1/duplicates/").content.decode()
    assert "not-scanned" not in html and "11 items, 2 new pairs" in html


def test_splits_page_shows_the_integrity_check(client_for, project, dup_gold, lead):
    near_duplicates_detect(project=project)
    html = client_for(lead).get("/p/p1/splits/").content.decode()
    assert 'id="integrity">passed' in html and "exact duplicate (same decoded pixels)" in html
    assert 'id="unreviewed-pairs">2<' in html


def test_releases_pages(
    client_for, project, release, lead, researcher, django_assert_num_queries, django_capture_on_commit_callbacks
):
    client = client_for(researcher)
    with django_assert_num_queries(3):  # user, project + roles, releases (session: cached)
        html = client.get("/p/p1/releases/").content.decode()
    assert "/p/p1/releases/v1/" in html and "build-release" not in html
    page = client.get("/p/p1/releases/v1/").content.decode()
    assert release.manifest["files"]["records.parquet"]["sha256"] in page and 'id="integrity">passed' in page
    assert "/api/projects/p1/releases/1/files/records.jsonl" in page and "## Motivation" in page
    assert "/api/projects/p1/releases/1/archive" in page
    assert client.get("/p/p1/releases/v9/").status_code == 404
    assert client.get("/p/p1/releases/diff/?from=1&to=x").status_code == 404

    lead_client = client_for(lead)
    assert "build-release" in lead_client.get("/p/p1/releases/").content.decode()
    with django_capture_on_commit_callbacks(execute=True):
        assert lead_client.post("/p/p1/releases/build/").status_code == 302
    job = release.project.export_jobs.order_by("-id").first()
    partial = lead_client.get(f"/p/p1/jobs/release/{job.pk}/").content.decode()
    assert "Published" in partial and "v2" in partial and "hx-trigger" not in partial
    assert release.project.releases.get(number=2).manifest_sha256 in partial
    diff = lead_client.get("/p/p1/releases/diff/?from=1&to=2").content.decode()
    assert 'id="identical"' in diff and 'id="n-changed">0<' in diff


def test_running_job_partial_polls(client_for, project, gold_items, lead):
    job = export_job_start(project=project, user=lead, enqueue=False)
    html = client_for(lead).get(f"/p/p1/jobs/release/{job.pk}/").content.decode()
    assert 'hx-trigger="every 1s"' in html and "<progress" in html


def test_token_page_creates_shows_and_replaces_the_users_own_token(client_for, researcher, lead):
    client = client_for(researcher)
    assert "create-token" in client.get("/account/api-token/").content.decode()
    client.post("/account/api-token/", {"action": "create"})
    token = Token.objects.get(user=researcher)
    assert token.key in client.get("/account/api-token/").content.decode()
    client.post("/account/api-token/", {"action": "regenerate"})
    new = Token.objects.get(user=researcher)
    assert new.key != token.key and new.key in client.get("/account/api-token/").content.decode()
    assert not Token.objects.filter(user=lead).exists()


def test_project_page_links_by_role(client_for, project, lead, researcher, annotator_a):
    lead_html = client_for(lead).get("/p/p1/").content.decode()
    assert "link-duplicates" in lead_html and "link-releases" in lead_html
    researcher_html = client_for(researcher).get("/p/p1/").content.decode()
    assert "link-releases" in researcher_html and "link-duplicates" not in researcher_html
    annotator_html = client_for(annotator_a).get("/p/p1/").content.decode()
    assert "link-releases" not in annotator_html and "link-duplicates" not in annotator_html


def test_splits_page_warns_when_a_split_gets_fewer_items_than_asked(
    client_for, project, dup_items, lead, annotator_a, annotator_b
):
    """Only s0 and its recompressed copy s1 (one near-duplicate group) are gold: at 50/50/0
    the group cannot be cut, so val gets nothing where one item is asked. The page says so."""
    from exports.factories import gold_create

    project.split_ratios = [0.5, 0.5, 0]
    project.save(update_fields=["split_ratios"])
    gold_create(project, dup_items[:2], [annotator_a, annotator_b])
    near_duplicates_detect(project=project)
    html = client_for(lead).get("/p/p1/splits/").content.decode()
    assert "split-shortfall" in html
    assert (
        "The val split has 0 items where the ratios ask for 1" in html
        or "The train split has 0 items where the ratios ask for 1" in html
    )
