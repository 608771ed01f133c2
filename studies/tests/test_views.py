"""Study pages and endpoints: blindness of the participant's page and JSON, who may use what,
and the lead's actions through the forms."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse
from django.utils.html import escape

from projects.models import Item
from studies.models import Reexplanation, StudyItem
from studies.services import (
    judgement_claim_next,
    judgement_submit,
    reexplanation_claim_next,
    reexplanation_save,
    study_confirm,
    study_draw,
)

pytestmark = pytest.mark.django_db
STRATA = ["language", "domain"]


@pytest.fixture
def study(study_project, lead):
    project, _, _ = study_project
    s = study_draw(project=project, lead=lead, sample_size=4, seed=5, strata_fields=STRATA)
    return study_confirm(study=s, lead=lead)


def _forbidden_texts(si: StudyItem, other: Reexplanation | None) -> list[str]:
    item = Item.objects.get(pk=si.item_id)
    texts = [si.reference_text, item.text, item.source_id, si.stratum, si.stratum_label, "Reference "]
    texts += [f"item {item.pk}", f"/items/{item.pk}/", "English", "Chinese", "ACG", "Daily life"]
    if other is not None and other.text:
        texts.append(other.text)
    return texts


def test_participant_page_and_json_show_only_the_image_and_their_own_text(study, people, client_for):
    p1, p2 = people["part1"], people["part2"]
    first = reexplanation_claim_next(study=study, participant=p1)
    first = reexplanation_save(
        reexplanation=first, participant=p1, text="Zorblax the cat mocks Mondays", version=0, submit=True
    )
    mine = reexplanation_claim_next(study=study, participant=p2)
    assert mine.study_item_id == first.study_item_id  # items with one re-explanation first
    si = mine.study_item
    c = client_for(p2)
    url = reverse("study_reexplain", args=[study.project.slug, study.pk, mine.pk])
    html = c.get(url).content.decode()
    assert 'id="study-image"' in html
    for text in _forbidden_texts(si, first):
        assert text not in html, text
    api = reverse("api_study_reexplanation", args=[study.project.slug, study.pk, mine.pk])
    body = c.get(api, HTTP_ACCEPT="application/json")
    data = body.json()
    assert set(data) == {"id", "text", "version", "submitted", "image_url"}
    raw = json.dumps(data)
    for text in _forbidden_texts(si, first):
        assert text not in raw, text
    img = c.get(data["image_url"])
    assert img.status_code == 200 and img["Content-Type"].startswith("image/")
    # Someone else's re-explanation (and its image) is refused.
    assert c.get(reverse("study_reexplain", args=[study.project.slug, study.pk, first.pk])).status_code == 403
    assert c.get(reverse("study_reexplain_image", args=[study.project.slug, study.pk, first.pk])).status_code == 403
    # A participant may not open the item image of the lead's/judge's URL.
    assert c.get(reverse("study_item_image", args=[study.project.slug, study.pk, si.pk])).status_code == 403
    # Saving through the API: stale version -> 409, nothing overwritten.
    ok = c.post(api, data={"text": "mine", "version": mine.version}, content_type="application/json")
    assert ok.status_code == 200 and ok.json()["version"] == mine.version + 1
    stale = c.post(api, data={"text": "other tab", "version": mine.version}, content_type="application/json")
    assert stale.status_code == 409
    assert Reexplanation.objects.get(pk=mine.pk).text == "mine"


def test_who_may_use_the_study_pages_and_endpoints(
    study, study_project, lead, people, outsider, researcher, client_for
):
    project, _, _ = study_project
    slug = project.slug
    page = reverse("study_page", args=[slug, study.pk])
    report = reverse("api_study_report", args=[slug, study.pk])
    create = reverse("api_studies", args=[slug])
    assert client_for(outsider).get(page).status_code == 404
    assert client_for(outsider).get(report).status_code == 404
    assert client_for(people["part1"]).get(page).status_code == 403
    assert client_for(people["part1"]).get(report).status_code == 403
    assert client_for(people["part1"]).post(create, data={"sample_size": 2}).status_code == 403
    assert client_for(lead).get(page).status_code == 200
    assert client_for(lead).get(report).status_code == 200
    # Leads are not blind participants.
    nxt = reverse("api_study_reexplain_next", args=[slug, study.pk])
    assert client_for(lead).post(nxt).status_code == 403
    assert client_for(outsider).post(nxt).status_code == 404


def test_lead_creates_confirms_and_reads_a_study_through_the_api(study_project, lead, client_for):
    project, _, _ = study_project
    c = client_for(lead)
    r = c.post(
        reverse("api_studies", args=[project.slug]), data={"sample_size": 5, "seed": 9}, content_type="application/json"
    )
    assert r.status_code == 201, r.content
    data = r.json()
    assert data["status"] == "draft" and data["sampled"] == 5 and data["strata_fields"] == ["language", "domain"]
    assert sum(s["sampled"] for s in data["strata"]) == 5
    bad = c.post(reverse("api_studies", args=[project.slug]), data={"sample_size": 99}, content_type="application/json")
    assert bad.status_code == 400 and "sample_size" in bad.json()["errors"]
    ok = c.post(reverse("api_study_confirm", args=[project.slug, data["id"]]))
    assert ok.status_code == 200 and ok.json()["status"] == "open"
    again = c.post(reverse("api_study_confirm", args=[project.slug, data["id"]]))
    assert again.status_code == 409
    status_ = c.get(reverse("api_study", args=[project.slug, data["id"]])).json()
    assert status_["progress"] == {"reexplaining": 5, "judging": 0, "adjudication": 0, "done": 0}
    assert c.get(reverse("api_study_report", args=[project.slug, data["id"]])).json()["sampled"] == 5


def test_the_lead_page_lists_items_and_assigns_only_eligible_members(
    study, study_project, lead, people, client_for, django_assert_max_num_queries
):
    project, _, writers = study_project
    c = client_for(lead)
    url = reverse("study_page", args=[project.slug, study.pk])
    html = c.get(url).content.decode()
    assert "strata-table" in html and "Reference " in html
    si = study.items.order_by("id").first()
    writer = writers[si.item_id]
    assert f'<option value="{writer.pk}">' not in html.split(f'id="assign-{si.pk}"')[1].split("</select>")[0]
    assign = reverse("study_item_action", args=[project.slug, study.pk, si.pk, "assign"])
    c.post(assign, {"participant": writer.pk})
    assert not Reexplanation.objects.filter(study_item=si).exists()
    c.post(assign, {"participant": people["part3"].pk})
    assert Reexplanation.objects.get(study_item=si).participant == people["part3"]
    # Bad input never crashes: unknown member -> 404, bad reason -> a message.
    assert c.post(assign, {"participant": "x"}).status_code == 404
    bad = c.post(
        reverse("study_item_action", args=[project.slug, study.pk, si.pk, "remove"]), {"reason": "bored"}, follow=True
    )
    assert "Choose a reason" in bad.content.decode()


def test_judge_page_has_reference_and_one_re_explanation_and_takes_keys(study, people, client_for):
    for _ in range(4):
        for p in ("part1", "part2"):
            r = reexplanation_claim_next(study=study, participant=people[p])
            text = {"part1": "alpha reading", "part2": "beta reading"}[p]
            reexplanation_save(reexplanation=r, participant=people[p], text=text, version=r.version, submit=True)
    c = client_for(people["judge1"])
    r = c.post(reverse("study_judge_next", args=[study.project.slug, study.pk]))
    assert r.status_code == 302
    page = c.get(r["Location"]).content.decode()
    claimed = Reexplanation.objects.get(judge=people["judge1"], verdict="")
    assert escape(claimed.study_item.reference_text) in page and claimed.text in page
    assert "data-verdict-keys" in page and "studies/study.js" in page
    other = claimed.study_item.reexplanations.exclude(pk=claimed.pk).get()
    assert other.text not in page.replace(claimed.text, "")  # only the one being judged
    assert "part1" not in page and "part2" not in page  # no participant names
    c.post(r["Location"], {"verdict": "fully", "note": ""})
    claimed.refresh_from_db()
    assert claimed.verdict == "fully"
    # a participant cannot open the judge's page
    assert client_for(people["part1"]).get(r["Location"]).status_code == 403
    # finishing the item with a different verdict opens adjudication
    nxt = judgement_claim_next(study=study, judge=people["judge1"])
    judgement_submit(reexplanation=nxt, judge=people["judge1"], verdict="not")
