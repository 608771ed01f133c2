"""Pages and REST endpoints: who may see what (404 outsider, 403 wrong role), what they show,
bad input answered with a message, downloads, htmx recompute, query counts."""

from __future__ import annotations

import json

import pytest

from quality import reports
from quality.models import AgreementReport
from quality.services import agreement_report_current, audit_create

LEAD_ONLY, READERS = "lead", "readers"


@pytest.fixture
def setup(project, gold_project, lead, auditor):
    audit = audit_create(project=project, created_by=lead, size=5, seed=3)
    report = agreement_report_current(project=project, filters=dict(reports.DEFAULT_FILTERS), user=lead)["row"]
    return {"audit": audit.pk, "report": report.pk}


def endpoints(ids):
    s = "p1"
    a, r = ids["audit"], ids["report"]
    return [
        ("get", f"/p/{s}/quality/", LEAD_ONLY),
        ("get", f"/p/{s}/quality/agreement/", READERS),
        ("get", f"/p/{s}/quality/agreement.json", READERS),
        ("get", f"/p/{s}/quality/agreement.csv", READERS),
        ("post", f"/p/{s}/quality/agreement/compute", LEAD_ONLY),
        ("get", f"/p/{s}/jobs/agreement/{r}/", LEAD_ONLY),
        ("get", f"/p/{s}/quality/audits/", READERS),
        ("post", f"/p/{s}/quality/audits/", LEAD_ONLY),
        ("get", f"/p/{s}/quality/audits/{a}/", READERS),
        ("get", f"/p/{s}/quality/audits/{a}.json", READERS),
        ("get", f"/p/{s}/quality/audits/{a}.csv", READERS),
        ("get", f"/p/{s}/quality/anchoring/", LEAD_ONLY),
        ("get", f"/p/{s}/quality/anchoring.json", LEAD_ONLY),
        ("get", f"/p/{s}/quality/anchoring.csv", LEAD_ONLY),
        ("get", f"/api/projects/{s}/quality/agreement/", READERS),
        ("post", f"/api/projects/{s}/quality/agreement/jobs/", LEAD_ONLY),
        ("get", f"/api/projects/{s}/quality/agreement/jobs/{r}/", LEAD_ONLY),
        ("get", f"/api/projects/{s}/quality/audits/", READERS),
        ("post", f"/api/projects/{s}/quality/audits/create/", LEAD_ONLY),
        ("get", f"/api/projects/{s}/quality/audits/{a}/", READERS),
        ("get", f"/api/projects/{s}/quality/anchoring/", LEAD_ONLY),
    ]


def test_every_endpoint_refuses_outsiders_and_wrong_roles(
    setup, client, client_for, lead, researcher, annotator_a, reviewer, auditor, outsider
):
    for method, url, who in endpoints(setup):
        client.logout()
        client_for(outsider)
        assert getattr(client, method)(url).status_code == 404, (url, "outsider")
        for user in (annotator_a, reviewer, auditor, *([researcher] if who == LEAD_ONLY else [])):
            client.logout()
            client_for(user)
            assert getattr(client, method)(url).status_code == 403, (url, user.username)
        client.logout()
        client_for(lead)
        assert getattr(client, method)(url).status_code in (200, 201, 202, 302, 400), (url, "lead")
        if who == READERS and method == "get":
            client.logout()
            client_for(researcher)
            assert client.get(url).status_code == 200, (url, "researcher")
        client.logout()
        assert getattr(client, method)(url).status_code in (302, 401, 403), (url, "anonymous")


def test_ids_of_another_project_are_not_reachable(setup, client_for, outsider):
    c = client_for(outsider)  # lead of project "other"
    assert c.get(f"/p/other/quality/audits/{setup['audit']}/").status_code == 404
    assert c.get(f"/p/other/jobs/agreement/{setup['report']}/").status_code == 404
    assert c.get(f"/api/projects/other/quality/audits/{setup['audit']}/").status_code == 404


def test_dashboard_shows_the_headline_figures_and_charts(
    project, gold_project, client_for, lead, django_assert_max_num_queries
):
    c = client_for(lead)
    c.get(f"/p/{project.slug}/quality/")  # fills the cache
    with django_assert_max_num_queries(30):
        page = c.get(f"/p/{project.slug}/quality/").content.decode()
    report = reports.agreement_report_for_export(project=project)
    for h in report["headline"]:
        assert f'id="fig-{h["field"]}">{h["value"]:.3f}<' in page
    assert 'style="' not in page and "<script>" not in page
    for section in ("pipeline", "over-time", "histograms", "throughput", "worst", "confusions", "anchoring-summary"):
        assert f'id="{section}"' in page
    assert page.count("<svg") >= 8
    assert f"/p/{project.slug}/items/" in page  # worst items link to the item history page


def test_lists_keep_a_constant_number_of_queries(
    project, gold_project, client_for, lead, auditor, django_assert_num_queries
):
    c = client_for(lead)
    audit_create(project=project, created_by=lead, size=5, seed=1)
    c.get(f"/p/{project.slug}/quality/audits/")
    with django_assert_num_queries(6) as one:  # the session cached, project and roles in one query
        c.get(f"/p/{project.slug}/quality/audits/")
    for seed in range(2, 5):
        audit_create(project=project, created_by=lead, size=5, seed=seed)
    with django_assert_num_queries(len(one.captured_queries)):
        assert c.get(f"/p/{project.slug}/quality/audits/").status_code == 200


def test_bad_filters_get_a_message_not_a_crash(project, annotated, client_for, lead):
    c = client_for(lead)
    page = c.get(
        f"/p/{project.slug}/quality/agreement/",
        {"source_dataset": "nope", "date_from": "2024-13-40", "scope": "weird", "category": "label=maybe"},
    )
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="filter-errors"' in text and "Enter a valid date" in text and "nope is not one of" in text
    text = c.get(f"/p/{project.slug}/quality/", {"date_from": "2025-02-01", "date_to": "2025-01-01"}).content.decode()
    assert "The start date is after the end date." in text
    api = c.get(f"/api/projects/{project.slug}/quality/agreement/", {"language": "xx"})
    assert api.status_code == 400 and "language" in api.json()["errors"]
    assert c.get(f"/api/projects/{project.slug}/quality/agreement/", {"colour": "red"}).status_code == 400
    assert c.get(f"/p/{project.slug}/quality/agreement.json", {"scope": "weird"}).status_code == 400


def test_filtered_report_and_downloads(project, annotated, client_for, researcher):
    c = client_for(researcher)
    data = c.get(f"/p/{project.slug}/quality/agreement.json", {"category": "target_category=gender"})
    assert data.status_code == 200 and data["Content-Disposition"].endswith('-agreement.json"')
    body = json.loads(data.content)
    assert body["n_items"] == 1 and body["filters"]["category"] == "target_category=gender"
    csv_text = c.get(f"/p/{project.slug}/quality/agreement.csv").content.decode()
    assert csv_text.splitlines()[0].startswith("field,type,figure,label,value,ci_low,ci_high,n")
    assert any(line.startswith("visual_region,boxes,share_0.75,") for line in csv_text.splitlines())
    api = c.get(f"/api/projects/{project.slug}/quality/agreement/")
    assert api.status_code == 200 and api.json()["n_items"] == 6
    assert api.json()["fields"][1]["figures"][0]["key"] == "kappa"


def test_large_projects_wait_for_the_job(
    project, annotated, client_for, lead, settings, django_capture_on_commit_callbacks
):
    settings.QUALITY_SYNC_MAX_ANNOTATIONS = 0
    c = client_for(lead)
    page = c.get(f"/p/{project.slug}/quality/agreement/").content.decode()
    assert 'id="report-missing"' in page and 'id="recompute"' in page
    assert c.get(f"/api/projects/{project.slug}/quality/agreement/").status_code == 202
    assert c.get(f"/p/{project.slug}/quality/agreement.json").status_code == 409
    with django_capture_on_commit_callbacks(execute=False):
        fragment = c.post(f"/p/{project.slug}/quality/agreement/compute", {"scope": "both"}, HTTP_HX_REQUEST="true")
    assert fragment.status_code == 200 and 'hx-trigger="every 1s"' in fragment.content.decode()
    row = AgreementReport.objects.get(project=project)
    assert row.status == "pending"
    pending = c.get(f"/api/projects/{project.slug}/quality/agreement/")
    assert pending.status_code == 202 and pending.json()["job"]["status"] == "pending"
    from quality.services import agreement_report_compute

    agreement_report_compute(report_id=row.pk)
    done = c.get(f"/p/{project.slug}/jobs/agreement/{row.pk}/", HTTP_HX_REQUEST="true")
    assert json.loads(done["HX-Trigger"])["job-finished"]["status"] == "done"
    assert c.get(f"/api/projects/{project.slug}/quality/agreement/jobs/{row.pk}/").json()["status"] == "done"
    assert c.get(f"/api/projects/{project.slug}/quality/agreement/").status_code == 200


def test_api_starts_a_job(project, annotated, client_for, lead, django_capture_on_commit_callbacks):
    c = client_for(lead)
    with django_capture_on_commit_callbacks(execute=True):
        r = c.post(f"/api/projects/{project.slug}/quality/agreement/jobs/?scope=all")
    assert r.status_code == 202 and r.json()["filters"]["scope"] == "all"
    assert AgreementReport.objects.get(pk=r.json()["id"]).status == "done"


def test_audit_pages(project, gold_project, client_for, lead, researcher, auditor):
    c = client_for(lead)
    page = c.post(f"/p/{project.slug}/quality/audits/", {"size": "500", "seed": "1"}).content.decode()
    assert "can be sampled; choose a size of at most" in page
    page = c.post(f"/p/{project.slug}/quality/audits/", {"size": "-3"}).content.decode()
    assert "greater than or equal to 1" in page
    page = c.post(f"/p/{project.slug}/quality/audits/", {"size": "3"}).content.decode()
    assert "smaller than the 5 non-empty strata" in page
    r = c.post(f"/p/{project.slug}/quality/audits/", {"size": "5", "seed": "9"})
    assert r.status_code == 302
    audit_id = int(r["Location"].rstrip("/").rsplit("/", 1)[1])
    page = c.get(r["Location"]).content.decode()
    assert 'id="table9-empty"' in page and "auditor" in page  # per-auditor progress for the lead
    api = c.post(
        f"/api/projects/{project.slug}/quality/audits/create/", {"size": 1000}, content_type="application/json"
    )
    assert api.status_code == 400 and "at most" in api.json()["detail"]
    api = c.post(
        f"/api/projects/{project.slug}/quality/audits/create/", {"size": 5, "seed": 4}, content_type="application/json"
    )
    assert api.status_code == 201 and api.json()["n_items"] == 5 and api.json()["seed"] == 4
    c.logout()
    rc = client_for(researcher)
    page = rc.get(f"/p/{project.slug}/quality/audits/{audit_id}/").content.decode()
    assert "Blind vs gold" in page and "<th>Auditor</th>" not in page  # researchers do not see who audited
    assert 'id="audit-create"' not in rc.get(f"/p/{project.slug}/quality/audits/").content.decode()
    assert (
        rc.get(f"/p/{project.slug}/quality/audits/{audit_id}.csv").content.decode().startswith("section,field,figure")
    )


def test_audit_form_explains_missing_auditors(project, gold_project, client_for, lead):
    from projects.models import Membership

    Membership.objects.filter(project=project, role="auditor").delete()
    page = client_for(lead).post(f"/p/{project.slug}/quality/audits/", {"size": "5"}).content.decode()
    assert "This project has no auditor yet" in page


def test_anchoring_page_and_project_links(project, annotated, client_for, lead, researcher):
    c = client_for(lead)
    assert c.get(f"/p/{project.slug}/quality/anchoring/").status_code == 200
    assert c.get(f"/p/{project.slug}/quality/anchoring.csv").content.decode().startswith("section,provider")
    assert 'id="link-quality"' in c.get(f"/p/{project.slug}/").content.decode()
    c.logout()
    page = client_for(researcher).get(f"/p/{project.slug}/").content.decode()
    assert "Agreement report" in page and "anchoring" not in page


def test_openapi_schema_documents_the_endpoints(client_for, lead):
    schema = client_for(lead).get("/api/schema/?format=json")
    assert schema.status_code == 200
    paths = json.loads(schema.content)["paths"]
    for p in ("agreement/", "agreement/jobs/", "audits/", "audits/create/", "audits/{audit_id}/", "anchoring/"):
        assert f"/api/projects/{{slug}}/quality/{p}" in paths
