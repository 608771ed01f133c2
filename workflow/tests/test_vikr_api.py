"""REST endpoints of the model stages (leads): progress, one conversion, retry of failures."""

from __future__ import annotations

import json

import pytest

from candidates.models import Conversion
from core.models import JobStatus
from projects.factories import items_create, project_with_members
from projects.services import membership_add
from workflow.tests.test_vikr import GOOD, _provider, _write_reference, people, vikr  # noqa: F401

pytestmark = pytest.mark.django_db


@pytest.fixture
def converted(vikr, people, fake_llm, django_capture_on_commit_callbacks):  # noqa: F811
    """Two explanations written: the first reply is prose (failed), the second one names an
    entity in Visual (done, flagged)."""
    project, _ = vikr
    provider = _provider(project, fake_llm, "openai")
    flagged = json.loads(json.dumps(GOOD))
    flagged["visual"][0]["text"] = "江户川柯南指着观众"
    fake_llm.plan(provider.model, ["prose", f"body:{json.dumps(flagged, ensure_ascii=False)}"])
    failed = _write_reference(project, people["writer"], django_capture_on_commit_callbacks)
    done = _write_reference(project, people["writer"], django_capture_on_commit_callbacks)
    return project, provider, Conversion.objects.get(item=failed), Conversion.objects.get(item=done)


def test_the_lead_reads_the_progress_with_failures_and_flags(converted, lead, client) -> None:
    project, provider, failed, done = converted
    client.force_login(lead)
    body = client.get(f"/api/projects/{project.slug}/conversions/").json()
    assert body["job"]["kind"] == "conversion" and body["job"]["status"] == JobStatus.DONE
    (stage,) = body["stages"]
    assert (stage["name"], stage["provider"]) == ("conversion", "")
    assert (stage["total"], stage["done"], stage["failed"], stage["pending"], stage["flagged"]) == (2, 1, 1, 0, 1)
    (failure,) = stage["failures"]
    assert (failure["id"], failure["item_id"], failure["provider"]) == (failed.pk, failed.item_id, provider.name)
    assert "could not be read" in failure["error"] and failure["attempts"] == 1
    (row,) = stage["flagged_conversions"]
    assert row["id"] == done.pk and row["model_name"] == f"{provider.model}-served"
    assert [f["check"] for f in row["flags"]] == ["entity_in_visual"] and row["flags"][0]["item"] == "V1"
    assert "江户川柯南" in row["flags"][0]["message"]


def test_one_conversion_in_detail_and_only_in_its_project(converted, lead, client, tmp_path, fake_llm) -> None:
    project, _, failed, done = converted
    client.force_login(lead)
    body = client.get(f"/api/projects/{project.slug}/conversions/{done.pk}/").json()
    assert body["stage"] == "conversion" and body["status"] == "done"
    assert json.loads(body["raw_reply"])["visual"][0]["text"] == "江户川柯南指着观众"  # verbatim
    assert body["values"]["identity"] == [{**GOOD["identity"][0]}] and body["prompt_sha"]
    prose = client.get(f"/api/projects/{project.slug}/conversions/{failed.pk}/").json()
    assert prose["status"] == "failed" and prose["raw_reply"] and prose["values"] == {}
    # Another project of the same lead: its ids do not reach this project's conversions.
    other = project_with_members("vk2", preset="vikr", lead=[lead])
    items_create(other, tmp_path / "o", 1)
    assert client.get(f"/api/projects/{other.slug}/conversions/{done.pk}/").status_code == 404
    assert client.get(f"/api/projects/{project.slug}/conversions/999999/").status_code == 404


def test_a_retry_queues_the_failed_conversions_and_they_convert(
    converted, lead, client, django_capture_on_commit_callbacks
) -> None:
    project, _, failed, done = converted
    client.force_login(lead)
    url = f"/api/projects/{project.slug}/conversions/retry"
    for bad in ({"conversion_ids": []}, {"conversion_ids": ["x"]}, {"conversion_ids": [0]}):
        response = client.post(url, bad, content_type="application/json")
        assert response.status_code == 400 and response.json()["code"] == "invalid", bad
    response = client.post(url, {"conversion_ids": [done.pk]}, content_type="application/json")
    assert response.status_code == 400 and "No failed conversion" in response.json()["detail"]  # done: not retried
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(url, {"conversion_ids": [failed.pk]}, content_type="application/json")
    assert response.status_code == 202, response.content
    assert response.json()["queued"] == 1
    assert response.json()["progress"]["stages"][0]["pending"] == 1  # as the retry left it
    failed.refresh_from_db()
    assert failed.status == JobStatus.DONE and failed.error == "" and failed.item.workflow_stage == 2
    body = client.get(f"/api/projects/{project.slug}/conversions/").json()
    assert (body["stages"][0]["done"], body["stages"][0]["failed"]) == (2, 0)
    response = client.post(url, {}, content_type="application/json")  # nothing failed any more
    assert response.status_code == 400 and "No failed conversion" in response.json()["detail"]


def test_only_the_lead_reads_or_retries(converted, people, reviewer, researcher, outsider, client) -> None:  # noqa: F811
    project, provider, failed, done = converted
    membership_add(project=project, user=reviewer, role="reviewer")
    membership_add(project=project, user=researcher, role="researcher")
    paths = [
        ("get", f"/api/projects/{project.slug}/conversions/"),
        ("get", f"/api/projects/{project.slug}/conversions/{done.pk}/"),
        ("post", f"/api/projects/{project.slug}/conversions/retry"),
    ]
    for method, path in paths:
        assert getattr(client, method)(path).status_code in (401, 403), path
    for user in (people["writer"], people["checker"], reviewer, researcher, outsider):
        client.force_login(user)
        for method, path in paths:
            response = getattr(client, method)(path, content_type="application/json")
            assert response.status_code in (403, 404), (user.username, path, response.status_code)
            assert provider.model not in response.content.decode() and provider.name not in response.content.decode()
    failed.refresh_from_db()
    assert failed.status == JobStatus.FAILED  # nobody but the lead retried it


def test_openapi_documents_the_conversion_endpoints(client, lead) -> None:
    client.force_login(lead)
    schema = client.get("/api/schema/?format=json").json()
    paths = schema["paths"]
    assert "get" in paths["/api/projects/{slug}/conversions/"]
    assert "get" in paths["/api/projects/{slug}/conversions/{conversion_id}/"]
    retry = paths["/api/projects/{slug}/conversions/retry"]["post"]
    assert "202" in retry["responses"] and "requestBody" in retry
    components = schema["components"]["schemas"]
    assert {"ConversionsOutput", "ConversionDetailOutput", "ConversionRetryInput"} <= set(components)
    assert "failures" in components["ConversionStageOutput"]["properties"]
    ids = [op["operationId"] for ops in paths.values() for op in ops.values() if isinstance(op, dict)]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
