"""Pages and APIs: access (404 outsider, 403 wrong role), blindness on the wire, bad input."""

from __future__ import annotations

import pytest
from django.urls import reverse

from candidates.factories import replay_file_write
from candidates.models import Candidate, CandidateJob, Provider
from candidates.services import candidate_job_start, candidate_store, provider_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def replay_provider(project, settings):
    name = replay_file_write(
        project,
        [
            {
                "source_id": f"s{i}",
                "model": "hidden-model-x",
                "reply": {
                    "think": "t",
                    "label": "harmful",
                    "target_category": "group background",
                    "target_entity": "people from Planet Zorg",
                    "text_mention": "people from Planet Zorg",
                    "visual_region": [[10, 10, 500, 500]],
                },
            }
            for i in range(10)
        ],
    )
    return provider_create(
        project=project, name="HiddenProviderName", kind="replay", model="hidden-model-x", replay_file=name
    )


@pytest.fixture
def job(project, lead, items, replay_provider, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        return candidate_job_start(project=project, user=lead)


def lead_urls(project, job, provider, item):
    s = project.slug
    return [
        ("get", reverse("candidate_jobs", args=[s])),
        ("post", reverse("candidate_jobs", args=[s])),
        ("post", reverse("candidate_skip", args=[s])),
        ("get", reverse("candidate_providers", args=[s])),
        ("post", reverse("candidate_providers", args=[s])),
        ("get", reverse("candidate_provider_edit", args=[s, provider.pk])),
        ("post", reverse("candidate_provider_toggle", args=[s, provider.pk])),
        ("get", reverse("candidate_job", args=[s, job.pk])),
        ("post", reverse("candidate_job_retry", args=[s, job.pk])),
        ("get", reverse("api_candidate_providers", args=[s])),
        ("post", reverse("api_candidate_job_start", args=[s])),
        ("get", reverse("api_candidate_job", args=[s, job.pk])),
    ]


def test_outsider_gets_404_everywhere(project, job, replay_provider, items, outsider, client_for):
    c = client_for(outsider)
    urls = lead_urls(project, job, replay_provider, items[0]) + [
        ("get", reverse("candidate_item", args=[project.slug, items[0].pk])),
        ("get", reverse("candidate_item_anonymous", args=[project.slug, items[0].pk])),
        ("get", reverse("api_item_candidates", args=[project.slug, items[0].pk])),
    ]
    for method, url in urls:
        assert getattr(c, method)(url).status_code == 404, url


@pytest.mark.parametrize("persona", ["annotator_a", "reviewer", "auditor", "researcher"])
def test_wrong_roles_get_403_on_lead_pages_and_apis(request, persona, project, job, replay_provider, items, client_for):
    c = client_for(request.getfixturevalue(persona))
    for method, url in lead_urls(project, job, replay_provider, items[0]):
        assert getattr(c, method)(url).status_code == 403, (persona, url)
    assert Provider.objects.get(pk=replay_provider.pk).enabled  # the toggle did nothing


def test_ids_of_another_project_are_404_for_its_lead(project, job, replay_provider, outsider, client_for):
    from projects.models import Project

    other = Project.objects.get(slug="other")
    c = client_for(outsider)  # lead of "other"
    assert c.get(reverse("candidate_job", args=[other.slug, job.pk])).status_code == 404
    assert c.get(reverse("candidate_provider_edit", args=[other.slug, replay_provider.pk])).status_code == 404
    assert c.get(reverse("api_candidate_job", args=[other.slug, job.pk])).status_code == 404


@pytest.mark.parametrize("persona", ["reviewer", "auditor"])
def test_reviewers_and_auditors_never_get_candidates(request, persona, project, job, items, client_for):
    c = client_for(request.getfixturevalue(persona))
    assert c.get(reverse("candidate_item_anonymous", args=[project.slug, items[0].pk])).status_code == 403
    assert c.get(reverse("api_item_candidates", args=[project.slug, items[0].pk])).status_code == 403
    assert c.get(reverse("candidate_item", args=[project.slug, items[0].pk])).status_code == 403


def _assert_blind(body: bytes, candidates):
    for secret in [
        b"HiddenProviderName",
        b"hidden-model-x",
        b"replay",
        b"latency",
        b"prompt_version",
        b"raw_reply",
        b'"think"',
    ] + [f"candidate-{c.pk}".encode() for c in candidates]:
        assert secret not in body, secret


def _claimed_item(user, project):
    from annotation.factories import claim, ready

    return claim(ready(user, project), project).item


def test_annotator_gets_candidates_only_for_items_in_their_queue(project, job, items, annotator_a, client_for):
    item = _claimed_item(annotator_a, project)
    other = next(i for i in items if i.pk != item.pk)
    c = client_for(annotator_a)
    assert c.get(reverse("candidate_item_anonymous", args=[project.slug, other.pk])).status_code == 403
    assert c.get(reverse("api_item_candidates", args=[project.slug, other.pk])).status_code == 403
    assert c.get(reverse("api_item_candidates", args=[project.slug, item.pk])).status_code == 200


def test_annotator_html_fragment_is_anonymous(project, job, items, annotator_a, client_for):
    items = [_claimed_item(annotator_a, project)]
    resp = client_for(annotator_a).get(reverse("candidate_item_anonymous", args=[project.slug, items[0].pk]))
    assert resp.status_code == 200
    body = resp.content
    assert b"Candidate A" in body and b"people from Planet Zorg" in body and b"[10, 10, 500, 500]" in body
    _assert_blind(body, Candidate.objects.all())
    cand_id = str(Candidate.objects.get(item=items[0]).pk).encode()
    assert b"data-id" not in body and b"candidate_id" not in body
    assert b"data-fields" in body and cand_id not in body.split(b"data-letter")[1][:40]


def test_annotator_json_is_anonymous(project, job, items, annotator_a, client_for):
    items = [_claimed_item(annotator_a, project)]
    resp = client_for(annotator_a).get(reverse("api_item_candidates", args=[project.slug, items[0].pk]))
    assert resp.status_code == 200
    data = resp.json()
    assert data["anonymous"] is True
    assert data["candidates"] == [{"letter": "A", "fields": Candidate.objects.get(item=items[0]).fields}]
    _assert_blind(resp.content, Candidate.objects.all())


@pytest.mark.parametrize("persona", ["lead", "researcher"])
def test_leads_and_researchers_see_identities(request, persona, project, job, items, client_for):
    c = client_for(request.getfixturevalue(persona))
    data = c.get(reverse("api_item_candidates", args=[project.slug, items[0].pk])).json()
    assert data["anonymous"] is False and data["candidates"][0]["provider_name"] == "HiddenProviderName"
    page = c.get(reverse("candidate_item", args=[project.slug, items[0].pk]))
    assert b"HiddenProviderName" in page.content and b"hidden-model-x" in page.content


def test_providers_page_shows_env_name_and_state_never_the_key(project, lead, client_for, monkeypatch):
    monkeypatch.setenv("CONCORD_VIEW_TEST_KEY", "sk-very-secret-value-123")
    provider_create(
        project=project, name="openai-main", kind="openai", model="gpt-4o", api_key_env="CONCORD_VIEW_TEST_KEY"
    )
    provider_create(
        project=project, name="gem", kind="gemini", model="gemini-2.5-flash", api_key_env="CONCORD_UNSET_VAR"
    )
    c = client_for(lead)
    body = c.get(reverse("candidate_providers", args=[project.slug])).content.decode()
    assert "CONCORD_VIEW_TEST_KEY" in body and "sk-very-secret-value-123" not in body
    assert '<span class="ok key-state">set</span>' in body and '<span class="warn key-state">not set</span>' in body
    api = c.get(reverse("api_candidate_providers", args=[project.slug]))
    assert b"sk-very-secret" not in api.content
    assert {p["name"]: p["api_key_set"] for p in api.json()} == {"openai-main": True, "gem": False}


def test_add_edit_disable_provider_through_the_pages(project, lead, client_for):
    c = client_for(lead)
    url = reverse("candidate_providers", args=[project.slug])
    resp = c.post(
        url,
        {
            "name": "qwen",
            "kind": "openai-compatible",
            "model": "Qwen/Qwen2.5-VL-7B-Instruct",
            "base_url": "http://gpu:8000/v1",
            "api_key_env": "",
            "requests_per_minute": 30,
            "timeout_seconds": 90,
            "enabled": "on",
        },
    )
    assert resp.status_code == 302
    p = Provider.objects.get(project=project, name="qwen")
    assert p.enabled and p.requests_per_minute == 30
    edit = reverse("candidate_provider_edit", args=[project.slug, p.pk])
    assert b'value="http://gpu:8000/v1"' in c.get(edit).content
    resp = c.post(
        edit,
        {
            "name": "qwen",
            "kind": "openai-compatible",
            "model": "m2",
            "base_url": "http://gpu:8000/v1",
            "requests_per_minute": 30,
            "timeout_seconds": 90,
            "enabled": "on",
        },
    )
    assert resp.status_code == 302 and Provider.objects.get(pk=p.pk).model == "m2"
    c.post(reverse("candidate_provider_toggle", args=[project.slug, p.pk]))
    assert not Provider.objects.get(pk=p.pk).enabled


def test_bad_provider_input_shows_clear_messages(project, lead, client_for):
    c = client_for(lead)
    url = reverse("candidate_providers", args=[project.slug])
    resp = c.post(
        url,
        {
            "name": "x",
            "kind": "openai",
            "model": "gpt",
            "api_key_env": "sk-proj-abc123",
            "requests_per_minute": "lots",
            "timeout_seconds": 60,
        },
    )
    assert resp.status_code == 200
    body = resp.content.decode()
    assert "Enter a whole number." in body
    resp = c.post(
        url,
        {
            "name": "x",
            "kind": "openai",
            "model": "gpt",
            "api_key_env": "sk-proj-abc123",
            "requests_per_minute": 10,
            "timeout_seconds": 60,
        },
    )
    assert "never the key itself" in resp.content.decode()
    assert b"sk-proj-abc123" in resp.content  # echoed back in the form field for correction only
    assert not Provider.objects.filter(project=project).exists()


def test_generate_from_the_page_and_follow_progress(
    project, lead, items, replay_provider, client_for, django_capture_on_commit_callbacks
):
    c = client_for(lead)
    with django_capture_on_commit_callbacks(execute=True):
        resp = c.post(reverse("candidate_jobs", args=[project.slug]), {"item_ids": ""})
    job = CandidateJob.objects.get()
    assert resp.status_code == 302 and resp.url == reverse("candidate_job", args=[project.slug, job.pk])
    page = c.get(resp.url).content.decode()
    assert 'id="total-done">4<' in page and "finished" in page
    fragment = c.get(reverse("job_partial", args=[project.slug, "candidates", job.pk]), HTTP_HX_REQUEST="true")
    assert b"<html" not in fragment.content and f'id="job-candidates-{job.pk}"'.encode() in fragment.content


def test_running_job_polls_and_failed_tasks_offer_retry(project, lead, items, replay_provider, client_for):
    job = candidate_job_start(project=project, user=lead, enqueue=False)
    c = client_for(lead)
    body = c.get(reverse("candidate_job", args=[project.slug, job.pk])).content.decode()
    assert 'hx-trigger="every 1s"' in body and 'id="total-pending">4<' in body
    from candidates.models import CandidateTask
    from candidates.services import candidate_task_fail

    for t in CandidateTask.objects.filter(job=job):
        candidate_task_fail(task_id=t.pk, error="HTTP 503: upstream down")
    body = c.get(reverse("candidate_job", args=[project.slug, job.pk])).content.decode()
    assert "hx-trigger" not in body and "Retry 4 failed" in body and "HTTP 503: upstream down" in body


def test_generate_with_bad_ids_shows_a_message(project, lead, items, replay_provider, client_for):
    c = client_for(lead)
    resp = c.post(reverse("candidate_jobs", args=[project.slug]), {"item_ids": "1, two, 3"})
    assert resp.status_code == 200 and "Not item ids: two" in resp.content.decode()
    resp = c.post(reverse("candidate_jobs", args=[project.slug]), {"item_ids": "987654"})
    assert "No such item in this project: 987654" in resp.content.decode()
    assert not CandidateJob.objects.exists()


def test_generate_without_providers_shows_a_message(project, lead, items, client_for):
    resp = client_for(lead).post(reverse("candidate_jobs", args=[project.slug]), {"item_ids": ""})
    assert resp.status_code == 200 and "No enabled provider" in resp.content.decode()


def test_skip_candidates_button(project, lead, items, client_for):
    from projects.models import Item, Stage

    c = client_for(lead)
    resp = c.post(reverse("candidate_skip", args=[project.slug]), {"item_ids": str(items[0].pk)}, follow=True)
    assert "1 item(s) moved to annotation" in resp.content.decode()
    assert Item.objects.get(pk=items[0].pk).stage == Stage.ANNOTATING
    resp = c.post(reverse("candidate_skip", args=[project.slug]), {"item_ids": "nope"}, follow=True)
    assert "Not item ids: nope" in resp.content.decode()


def test_api_start_and_progress(project, lead, items, replay_provider, client_for, django_capture_on_commit_callbacks):
    c = client_for(lead)
    with django_capture_on_commit_callbacks(execute=True):
        resp = c.post(
            reverse("api_candidate_job_start", args=[project.slug]),
            {"item_ids": [items[0].pk, items[1].pk]},
            content_type="application/json",
        )
    assert resp.status_code == 202
    job_id = resp.json()["id"]
    data = c.get(reverse("api_candidate_job", args=[project.slug, job_id])).json()
    assert data["status"] == "done" and data["done"] == 2 and data["total"] == 2
    assert data["providers"][0]["provider_name"] == "HiddenProviderName"
    bad = c.post(
        reverse("api_candidate_job_start", args=[project.slug]), {"item_ids": ["x"]}, content_type="application/json"
    )
    assert bad.status_code == 400 and "item_ids" in bad.json()["errors"]
    unknown = c.post(
        reverse("api_candidate_job_start", args=[project.slug]), {"item_ids": [999999]}, content_type="application/json"
    )
    assert unknown.status_code == 400 and "999999" in unknown.json()["detail"]


def test_openapi_schema_documents_the_endpoints(lead, client_for):
    resp = client_for(lead).get(reverse("api_schema"))
    assert resp.status_code == 200
    body = resp.content.decode()
    for path in (
        "/api/projects/{slug}/candidate-providers/",
        "/api/projects/{slug}/candidate-jobs/",
        "/api/projects/{slug}/candidate-jobs/{job_id}/",
    ):
        assert path in body


def test_list_pages_do_not_grow_queries_with_rows(
    project, lead, items, replay_provider, client_for, django_assert_max_num_queries, settings
):
    c = client_for(lead)
    for i in range(3):
        candidate_job_start(project=project, user=lead, item_ids=[items[i].pk], enqueue=False)
        provider_create(
            project=project, name=f"extra{i}", kind="replay", model="m", replay_file=replay_provider.replay_file
        )
    for name in ("candidate_jobs", "candidate_providers"):
        with django_assert_max_num_queries(12):
            assert c.get(reverse(name, args=[project.slug])).status_code == 200
    job = CandidateJob.objects.first()
    with django_assert_max_num_queries(12):
        c.get(reverse("candidate_job", args=[project.slug, job.pk]))


def test_item_page_shows_removed_fields(project, lead, items, replay_provider, client_for):
    candidate_store(
        item=items[0],
        provider=replay_provider,
        prompt_version="v",
        model_name="m",
        latency_ms=5,
        reply_text='{"label": "harmful", "target_category": "aliens", "visual_region": [[0.1,0.2,0.3,0.4]]}',
        prompt_tokens=1,
        completion_tokens=2,
    )
    body = client_for(lead).get(reverse("candidate_item", args=[project.slug, items[0].pk])).content.decode()
    assert "must be one of" in body and "0-1 coordinates" in body
