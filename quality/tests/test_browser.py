"""The quality pages driven in Debian's Chromium: a lead reads the agreement figures (equal to
what metrics/ computes on the same annotations), creates a blind audit with the mouse, and the
auditor's page carries no candidate. QUALITY_SCREENSHOT=/path.png saves the dashboard."""

from __future__ import annotations

import os
from collections import defaultdict

import numpy as np
import pytest
from playwright.sync_api import expect

from adjudication.services import lexicon_current
from annotation.factories import items_open
from annotation.models import Annotation
from annotation.services import content_warning_accept
from metrics.agreement import cohen_kappa
from metrics.bootstrap import percentile_interval, resample_indices
from metrics.boxes import enclosing_iou
from metrics.entity import f1_rel
from metrics.text import token_f1
from projects.demo import MEMES

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def expected_headline(project) -> dict[str, tuple[float, str]]:
    """The four Stage 2 figures computed here, straight from the stored annotations with metrics/."""
    by_item = defaultdict(list)
    for item_id, values in (
        Annotation.objects.filter(item__project=project, kind="annotation", status="submitted")
        .order_by("item_id", "first_submitted_at", "id")
        .values_list("item_id", "values")
    ):
        by_item[item_id].append(values)
    units = [v[:2] for _, v in sorted(by_item.items()) if len(v) >= 2]
    both = [i for i, v in enumerate(units) if v[0]["label"] == v[1]["label"] == "harmful"]
    pairs = [units[i] for i in both]
    _, lexicon = lexicon_current(project=project)
    a = [p[0]["target_category"] for p in pairs]
    b = [p[1]["target_category"] for p in pairs]
    # The report's CI: one shared resample of its items; the field uses the drawn items where it applies.
    where = {i: k for k, i in enumerate(both)}
    values = []
    for idx in resample_indices(len(units), 1000, 0):
        drawn = [where[int(i)] for i in idx if int(i) in where]
        k = cohen_kappa([a[j] for j in drawn], [b[j] for j in drawn]) if drawn else None
        values.append(np.nan if k is None else k)
    lo, hi = percentile_interval(np.array(values), 0.95)
    return {
        "target_category": (cohen_kappa(a, b), f"95% CI [{lo:.3f}, {hi:.3f}]"),
        "target_entity": (
            np.mean([f1_rel(p[0]["target_entity"], p[1]["target_entity"], lexicon) for p in pairs]),
            None,
        ),
        "text_mention": (np.mean([token_f1(p[0]["text_mention"], p[1]["text_mention"]) for p in pairs]), None),
        "visual_region": (
            np.mean([enclosing_iou(p[0]["visual_region"], p[1]["visual_region"]) >= 0.75 for p in pairs]),
            None,
        ),
    }


def test_lead_reads_the_figures_audits_and_the_auditor_sees_no_candidate(
    page,
    browser_login,
    live_server,
    chromium_browser,
    project,
    lead,
    annotator_a,
    annotator_b,
    annotator_c,
    reviewer,
    auditor,
    tmp_path,
):
    from projects.factories import items_create
    from projects.services import membership_add
    from quality.demo import demo_simulate
    from quality.factories import SECRET_ENTITY, demo_candidates

    membership_add(project=project, user=annotator_c, role="annotator")
    items = items_create(project, tmp_path / "demo", 16, texts=[caption for _, caption in MEMES[:16]])
    demo_candidates(items)
    items_open(items)
    demo_simulate(project=project, annotators=[annotator_a, annotator_b, annotator_c], reviewer=reviewer, weeks=3)

    page.set_viewport_size({"width": 1400, "height": 1000})
    browser_login(lead)
    page.goto(f"{live_server.url}/p/{project.slug}/")
    page.click("#link-quality")
    expect(page.locator("h1")).to_have_text("Quality dashboard")
    for field, (value, ci_text) in expected_headline(project).items():
        expect(page.locator(f"#fig-{field}")).to_have_text(f"{value:.3f}")
        if ci_text:
            expect(page.locator(f".q-figure[data-field={field}] .q-ci")).to_have_text(ci_text)
    # A favourite is claimed only when the take rates' CIs separate (issue 19.5). The simulated
    # takes depend on which letter each model gets per item (random), so ask the report which
    # case this run is, check that the CIs say the same, and that the page says exactly that.
    from quality.anchoring import anchoring_report

    anchor = anchoring_report(project=project, with_gold_scores=False)
    cis = {m["provider"]: m["total"]["take_rate_ci"] for m in anchor["models"] if m["total"].get("take_rate_ci")}
    if anchor["most_taken"]:
        top = cis.pop(anchor["most_taken"])
        assert all(top[0] > ci[1] for ci in cis.values()), (anchor["most_taken"], top, cis)
        expect(page.locator("#most-taken")).to_contain_text(anchor["most_taken"])
        expect(page.locator("#most-taken")).to_contain_text("above every other model's CI")
    else:
        assert (
            not any(all(ci[0] > other[1] for name2, other in cis.items() if name2 != name) for name, ci in cis.items())
            or len(cis) < 2
        )
        expect(page.locator("#most-taken-none")).to_contain_text("cannot tell")
    assert page.locator("#confusions svg").count() >= 2 and page.locator("#histograms svg").count() == 3
    if os.environ.get("QUALITY_SCREENSHOT"):
        page.screenshot(path=os.environ["QUALITY_SCREENSHOT"], full_page=True)

    # Recompute (htmx): the job runs (eagerly here) and the page reloads with the fresh report.
    from quality.models import AgreementReport

    before = AgreementReport.objects.get(project=project, status="done").finished_at
    with page.expect_response(lambda r: r.url.endswith("/quality/agreement/compute")) as response:
        page.click("#recompute")
    assert response.value.status == 200 and response.value.headers.get("hx-refresh") == "true"
    page.wait_for_load_state()
    expect(page.locator("#report-fresh")).to_be_visible()
    assert AgreementReport.objects.get(project=project, status="done").finished_at > before
    expect(page.locator("#fig-target_category")).to_have_text(f"{expected_headline(project)['target_category'][0]:.3f}")

    # A filter narrows the figures; a bad one is explained.
    page.select_option("#id_scope", "all")
    page.click("#report-filters button[type=submit]")
    expect(page.locator("#n-items")).to_have_text("16")
    page.fill("#id_date_from", "2030-01-02")
    page.fill("#id_date_to", "2030-01-01")
    page.click("#report-filters button[type=submit]")
    expect(page.locator("#filter-errors")).to_contain_text("The start date is after the end date.")

    # The lead samples a blind audit with the mouse.
    page.click("text=Blind audits")
    page.click("#create-audit")
    expect(page.locator("h1")).to_contain_text("Candidate-blind audit #")
    expect(page.locator("#audit-submitted")).to_have_text("0")
    assert page.console_errors == []  # a CSP violation (inline style or script) would show up here

    # The auditor's workspace: no candidate, although the item has some (the leaky model's entity).
    content_warning_accept(user=auditor, project=project)
    assigned = Annotation.objects.filter(annotator=auditor, kind="audit").select_related("item").first()
    from candidates.selectors import candidates_for_annotator

    assert any(
        c.fields.get("target_entity") == SECRET_ENTITY
        for c in candidates_for_annotator(item=assigned.item, user=annotator_a)
    )
    other = chromium_browser.new_context().new_page()
    browser_login(auditor, pg=other)
    other.goto(f"{live_server.url}/p/{project.slug}/audit/")
    other.click(f"a[href$='/audit/{assigned.item_id}/']")
    expect(other.locator("#item-text")).to_have_text(assigned.item.text)
    html = other.content()
    assert other.locator("#candidates").count() == 0
    assert SECRET_ENTITY not in html and "Candidate A" not in html and "model-1" not in html
    other.goto(f"{live_server.url}/p/{project.slug}/quality/audits/")
    expect(other.locator("body")).to_contain_text("403")
    other.context.close()
