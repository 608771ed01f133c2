"""Pages and REST: who may read and submit (outsider 404, annotator/reviewer/auditor 403),
sorting, CSV, OpenAPI, the management command, bad input never a 500."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from candidates.models import Candidate, Provider
from evaluation.models import Submission
from evaluation.tests.conftest import jsonl, records, upload

pytestmark = pytest.mark.django_db


def api(user) -> APIClient:
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


def oracle(release, split="train") -> bytes:
    return jsonl({"item_id": r["item_id"], **r["gold"]} for r in records(release, split))


def post(user, data: bytes, **fields):
    return api(user).post(
        "/api/projects/p1/releases/1/evaluations/",
        {"file": upload(data), "model_name": "m", "split": "train", **fields},
        format="multipart",
    )


def test_researcher_submits_and_reads_over_rest(release, researcher) -> None:
    resp = post(researcher, oracle(release), model_name="oracle")
    assert resp.status_code == 201, resp.content
    body = resp.json()
    assert body["figures"]["jra"]["value"] == 1.0 and body["figures"]["jra"]["ci"] == [1.0, 1.0]
    assert body["report"]["counts"]["missing"] == 0
    board = api(researcher).get("/api/projects/p1/releases/1/evaluations/?split=train").json()
    assert board["primary"] == "jra" and board["rows"][0]["model_name"] == "oracle"
    assert [c["key"] for c in board["columns"]][:3] == ["label.acc", "label.f1", "jra"]
    one = api(researcher).get(f"/api/projects/p1/releases/1/evaluations/{body['id']}/")
    assert one.status_code == 200 and one.json()["figures"] == body["figures"]


def test_every_endpoint_refuses_outsiders_and_wrong_roles(
    release, researcher, lead, annotator_a, reviewer, auditor, outsider, client_for
) -> None:
    sub = post(lead, oracle(release)).json()["id"]
    post(lead, oracle(release))
    base = "/api/projects/p1/releases/1/evaluations/"
    gets = [
        f"{base}?split=train",
        f"{base}leaderboard.csv?split=train",
        f"{base}{sub}/",
        f"{base}compare/?a={sub}&b={sub}",
    ]
    pages = [
        "/p/p1/releases/v1/leaderboard/?split=train",
        f"/p/p1/releases/v1/submissions/{sub}/",
        f"/p/p1/releases/v1/leaderboard/compare/?a={sub}&b={sub}",
    ]
    for url in gets:
        for user in (researcher, lead):
            assert api(user).get(url).status_code == 200, (url, user)
        for user in (annotator_a, reviewer, auditor):  # model identities: never for them
            assert api(user).get(url).status_code == 403, (url, user)
        assert api(outsider).get(url).status_code == 404, url
        assert APIClient().get(url).status_code == 401, url
    for user in (annotator_a, reviewer):
        assert post(user, oracle(release)).status_code == 403
    assert post(outsider, oracle(release)).status_code == 404
    for url in pages:
        for user in (researcher, lead):
            assert client_for(user).get(url).status_code == 200, (url, user)
        for user in (annotator_a, reviewer):
            assert client_for(user).get(url).status_code == 403, (url, user)
        assert client_for(outsider).get(url).status_code == 404, url
    for url in ("/p/p1/releases/v1/leaderboard/submit/", "/p/p1/releases/v1/leaderboard/run/"):
        assert client_for(annotator_a).post(url, {"split": "train"}).status_code == 403
        assert client_for(outsider).post(url, {"split": "train"}).status_code == 404
    assert client_for(researcher).post("/p/p1/releases/v1/leaderboard/run/", {"split": "train"}).status_code == 403
    assert Submission.objects.count() == 2


def test_bad_input_is_a_clear_400_not_a_500(release, lead) -> None:
    resp = post(lead, b"\x00\xff garbage\n" * 3000)
    assert resp.status_code == 400 and resp.json()["code"] == "refused"
    assert "refused" in resp.json()["detail"]
    assert post(lead, oracle(release), split="nope").status_code == 400
    assert post(lead, oracle(release), model_name="").status_code == 400
    assert post(lead, oracle(release), format="xml").status_code == 400
    other = jsonl([{"concord_release": {"project": "p1", "version": 7}}])
    assert "v7" in post(lead, other + oracle(release)).json()["detail"]
    assert api(lead).get("/api/projects/p1/releases/1/evaluations/?split=zzz").status_code == 404
    assert api(lead).get("/api/projects/p1/releases/1/evaluations/compare/?a=x&b=1").status_code == 404
    assert api(lead).get("/api/projects/p1/releases/9/evaluations/").status_code == 404
    assert Submission.objects.count() == 0


def test_csv_has_value_ci_and_n_per_column_and_defuses_formulas(release, lead) -> None:
    post(lead, oracle(release), model_name="=HYPERLINK(1)")
    resp = api(lead).get("/api/projects/p1/releases/1/evaluations/leaderboard.csv?split=train")
    assert resp["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(resp.content.decode())))
    header, row = rows[0], rows[1]
    assert {"jra", "jra.ci_low", "jra.ci_high", "jra.n"} <= set(header)
    assert row[header.index("model_name")] == "'=HYPERLINK(1)"
    assert float(row[header.index("jra")]) == 1.0


def test_leaderboard_page_sorts_by_any_column_and_shows_hidden_models(release, project, lead, client_for) -> None:
    rows = records(release, "train")
    provider = Provider.objects.create(project=project, name="hidden-1", kind="openai", model="gpt-z")
    for r in rows:
        Candidate.objects.create(item_id=r["item_id"], provider=provider, prompt_version="v", model_name="gpt-z",
                                 raw_reply="{}", fields={"label": "harmful"})  # fmt: skip
    post(lead, oracle(release), model_name="oracle")
    client = client_for(lead)
    page = client.get("/p/p1/releases/v1/leaderboard/?split=train").content.decode()
    assert page.index("oracle") < page.index("hidden-1 (gpt-z)")  # by JRA, best first
    asc = client.get("/p/p1/releases/v1/leaderboard/?split=train&sort=jra&dir=asc").content.decode()
    assert asc.index("hidden-1 (gpt-z)") < asc.index("oracle")
    by_name = client.get("/p/p1/releases/v1/leaderboard/?split=train&sort=model_name&dir=asc").content.decode()
    assert by_name.index("hidden-1") < by_name.index("oracle")
    partial = client.get("/p/p1/releases/v1/leaderboard/?split=train&sort=label.acc", HTTP_HX_REQUEST="true")
    assert partial.content.decode().lstrip().startswith('<div id="board">')
    assert "<script" not in page.replace('<script src="', "")  # no inline script
    bogus = client.get("/p/p1/releases/v1/leaderboard/?split=train&sort=%3Cx%3E&dir=up")
    assert bogus.status_code == 200
    assert 'href="/p/p1/releases/v1/leaderboard/"' in client.get("/p/p1/releases/v1/").content.decode()


def test_submission_page_shows_worst_items_to_leads_only(release, lead, researcher, client_for) -> None:
    rows = records(release, "train")
    gone = next(r for r in rows if r["gold"]["label"] == "harmful")
    preds = [{"item_id": r["item_id"], "label": "non-harmful"} for r in rows if r is not gone]
    sub = post(lead, jsonl(preds), model_name="lazy").json()["id"]
    url = f"/p/p1/releases/v1/submissions/{sub}/"
    as_lead = client_for(lead).get(url).content.decode()
    assert "Worst items" in as_lead and "(no prediction)" in as_lead
    assert "Planet Zorg" in as_lead  # gold beside the prediction
    client_for(researcher)
    as_researcher = client_for(researcher).get(url).content.decode()
    assert "Worst items" not in as_researcher and "lazy" in as_researcher


def test_compare_pages_and_api_give_paired_cis(release, lead, client_for) -> None:
    a = post(lead, oracle(release), model_name="a").json()["id"]
    rows = records(release, "train")
    b = post(lead, jsonl({"item_id": r["item_id"], "label": "harmful"} for r in rows), model_name="b").json()["id"]
    body = api(lead).get(f"/api/projects/p1/releases/1/evaluations/compare/?a={a}&b={b}").json()
    by = {r["key"]: r for r in body}
    assert by["label.acc"]["difference"] > 0 and by["label.acc"]["ci"][0] > 0
    html = client_for(lead).get(f"/p/p1/releases/v1/leaderboard/compare/?a={a}&b={b}").content.decode()
    assert "paired percentile bootstrap" in html


def test_page_submission_form_and_errors(release, researcher, client_for) -> None:
    client = client_for(researcher)
    ok = client.post(
        "/p/p1/releases/v1/leaderboard/submit/",
        {"split": "train", "model_name": "from page", "file": upload(oracle(release))},
    )
    assert ok.status_code == 302 and "/submissions/" in ok["Location"]
    bad = client.post(
        "/p/p1/releases/v1/leaderboard/submit/",
        {"split": "train", "model_name": "x", "file": upload(b"<html>not predictions</html>\n")},
        follow=True,
    )
    assert bad.status_code == 200 and "refused" in bad.content.decode()
    assert Submission.objects.filter(model_name="x").count() == 0


def test_openapi_schema_lists_the_evaluation_endpoints(researcher) -> None:
    schema = api(researcher).get("/api/schema/?format=json").json()
    paths = schema["paths"]
    base = "/api/projects/{slug}/releases/{number}/evaluations/"
    assert {"get", "post"} <= set(paths[base])
    assert base + "leaderboard.csv" in paths and base + "compare/" in paths and base + "{submission_id}/" in paths
    assert "multipart/form-data" in paths[base]["post"]["requestBody"]["content"]


def test_management_command_submits(release, tmp_path, capsys) -> None:
    path = tmp_path / "p.jsonl"
    path.write_bytes(oracle(release))
    call_command("evaluate_submit", "p1", "1", str(path), "--model", "cli model", "--split", "train")
    out = capsys.readouterr().out
    assert "jra" in out and "100.00" in out
    assert Submission.objects.get(model_name="cli model").source == "upload"
    path.write_text(json.dumps({"item_id": 10**9}) + "\n")
    with pytest.raises(Exception, match="refused"):
        call_command("evaluate_submit", "p1", "1", str(path), "--model", "bad", "--split", "train")


def test_leaderboard_queries_do_not_grow_with_submissions(release, researcher, django_assert_num_queries) -> None:
    post(researcher, oracle(release))
    client = api(researcher)
    url = "/api/projects/p1/releases/1/evaluations/?split=train"
    client.get(url)  # token, membership and release lookups warm up

    def count() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert client.get(url).status_code == 200
        return len(ctx.captured_queries)

    one = count()
    for k in range(4):
        post(researcher, oracle(release), model_name=f"m{k}")
    assert count() == one
    with django_assert_num_queries(one):
        client.get(url)
