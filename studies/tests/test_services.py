"""The study's rules at service level: population and draw, eligibility, verdicts, conflicts and
adjudication, revisions and removals, the report."""

from __future__ import annotations

import pytest

from adjudication.models import GoldRecord, HistoryEvent
from annotation.factories import ready
from annotation.models import Annotation
from annotation.services import assignment_claim_next
from core.errors import Conflict, Forbidden, Invalid, StaleVersion
from exports.selectors import exclusions_by_reason
from projects.factories import items_create
from projects.models import Item, Stage
from studies.models import Reexplanation, Study, StudyItem
from studies.selectors import eligible_participants, study_population, study_report
from studies.services import (
    judgement_claim_next,
    judgement_submit,
    reexplanation_assign,
    reexplanation_claim_next,
    reexplanation_save,
    study_confirm,
    study_draw,
    study_item_adjudicate,
    study_item_remove,
    study_reference_revise,
)
from workflow.services import annotation_submit, item_flag

pytestmark = pytest.mark.django_db
STRATA = ["language", "domain"]


def open_study(project, lead, n=12, seed=3):
    study = study_draw(project=project, lead=lead, sample_size=n, seed=seed, strata_fields=STRATA)
    return study_confirm(study=study, lead=lead)


def reexplain(study, user):
    r = reexplanation_claim_next(study=study, participant=user)
    assert r is not None
    return reexplanation_save(
        reexplanation=r, participant=user, text=f"{user.username} reads it so", version=r.version, submit=True
    )


def test_population_has_only_items_with_a_reference_not_excluded(study_project, lead, people, tmp_path):
    project, items, _ = study_project
    extra = items_create(project, tmp_path / "more", 1, start=50)  # no reference yet
    pop = study_population(project=project, reference_field="explanation", strata_fields=STRATA)
    assert {c.item_id for c in pop} == {i.pk for i in items}
    assert extra[0].pk not in {c.item_id for c in pop}
    by = {}
    for c in pop:
        by[c.stratum] = by.get(c.stratum, 0) + 1
    assert by == {
        "language=English|domain=ACG": 5,
        "language=English|domain=Daily life": 3,
        "language=Chinese|domain=ACG": 3,
        "language=Chinese|domain=Public life": 1,
    }
    # an excluded item leaves the population
    Item.objects.filter(pk=items[0].pk).update(stage=Stage.EXCLUDED, excluded_reason="x")
    assert items[0].pk not in {
        c.item_id for c in study_population(project=project, reference_field="explanation", strata_fields=STRATA)
    }


def test_draw_allocates_by_stratum_and_is_deterministic(study_project, lead):
    project, items, _ = study_project
    a = study_draw(project=project, lead=lead, sample_size=6, seed=11, strata_fields=STRATA)
    # quotas of 6 over 5/3/3/1 of 12: 2.5, 1.5, 1.5, 0.5 -> floors (one each) 2, 1, 1, 1 = 5; the
    # sixth to the largest remainder: three strata tie at .5 -> the larger stratum, English|ACG (5)
    assert {s["key"]: s["sampled"] for s in a.strata} == {
        "language=Chinese|domain=ACG": 1,
        "language=Chinese|domain=Public life": 1,
        "language=English|domain=ACG": 3,
        "language=English|domain=Daily life": 1,
    }
    assert {s["key"]: s["population"] for s in a.strata}["language=English|domain=ACG"] == 5
    assert a.items.count() == 6 and a.status == Study.Status.DRAFT and a.eligible == 12
    b = study_draw(project=project, lead=lead, sample_size=6, seed=11, strata_fields=STRATA)
    assert set(a.items.values_list("item_id", flat=True)) == set(b.items.values_list("item_id", flat=True))
    si = a.items.first()
    assert si.reference_text.startswith("Reference ") and si.reference_annotation.stage == 0


def test_draw_refuses_bad_requests_with_the_field_named(study_project, lead):
    project, _, _ = study_project
    with pytest.raises(Invalid) as e:
        study_draw(project=project, lead=lead, sample_size=13, seed=0, strata_fields=STRATA)
    assert "Only 12 items" in e.value.message and "sample_size" in e.value.errors
    with pytest.raises(Invalid) as e:
        study_draw(project=project, lead=lead, sample_size="many", seed=0, strata_fields=STRATA)
    assert "sample_size" in e.value.errors
    with pytest.raises(Invalid) as e:
        study_draw(project=project, lead=lead, sample_size=5, strata_fields=["nope"])
    assert "strata_fields" in e.value.errors
    with pytest.raises(Invalid) as e:
        study_draw(project=project, lead=lead, sample_size=5, strata_fields=STRATA, reference_field="language")
    assert "reference_field" in e.value.errors


def test_nobody_who_wrote_or_saw_the_reference_re_explains_it(study_project, lead, people):
    project, items, writers = study_project
    # A stage-2 worker sees the stage-1 values (show_stages): not blind any more for that item.
    ready(people["summarist"], project)
    seen = assignment_claim_next(annotator=people["summarist"], project=project).annotation
    assert seen.stage == 1
    annotation_submit(annotator=people["summarist"], item=seen.item, values={"summary": "s"}, version=seen.version)
    study = open_study(project, lead)
    si_writer1 = next(si for si in study.items.all() if writers[si.item_id] == people["writer1"])
    with pytest.raises(Forbidden):
        reexplanation_assign(study_item=si_writer1, participant=people["writer1"], lead=lead)
    with pytest.raises(Forbidden):  # leads saw every reference on the study page
        reexplanation_assign(study_item=si_writer1, participant=lead, lead=lead)
    names = {u.username for u in eligible_participants(study_item=si_writer1)}
    assert "writer1" not in names and "part1" in names and "writer2" in names
    si_seen = study.items.get(item_id=seen.item_id)
    with pytest.raises(Forbidden):
        reexplanation_assign(study_item=si_seen, participant=people["summarist"], lead=lead)
    # The queue never hands a writer their own references, nor part3 the item it saw.
    for user in (people["writer1"], people["summarist"]):
        while (r := reexplanation_claim_next(study=study, participant=user)) is not None:
            assert user.pk not in r.study_item.blocked
            assert r.study_item.item_id != seen.item_id or user != people["summarist"]
            if user == people["writer1"]:
                assert writers[r.study_item.item_id] != user
            reexplanation_save(reexplanation=r, participant=user, text="blind", version=r.version, submit=True)
    # two per item at most, one each
    for si in study.items.all():
        assert si.reexplanations.count() <= 2
        assert len(set(si.reexplanations.values_list("participant", flat=True))) == si.reexplanations.count()


def test_agreed_verdicts_stand_and_a_conflict_goes_to_independent_adjudication(study_project, lead, people):
    project, _, _ = study_project
    study = open_study(project, lead, n=2, seed=1)
    for _ in range(2):
        reexplain(study, people["part1"])
        reexplain(study, people["part2"])
    assert set(study.items.values_list("status", flat=True)) == {StudyItem.Status.JUDGING}
    # Re-explainers never judge their item (nor do writers).
    assert judgement_claim_next(study=study, judge=people["part1"]) is None
    first = judgement_claim_next(study=study, judge=people["judge1"])
    assert first is not None
    judge1_item = first.study_item
    judgement_submit(reexplanation=first, judge=people["judge1"], verdict="fully")
    second = judgement_claim_next(study=study, judge=people["judge1"])
    assert second.study_item == judge1_item
    with pytest.raises(Conflict):  # judge2 has not claimed it
        judgement_submit(reexplanation=second, judge=people["judge2"], verdict="fully")
    with pytest.raises(Invalid):
        judgement_submit(reexplanation=second, judge=people["judge1"], verdict="maybe")
    judgement_submit(reexplanation=second, judge=people["judge1"], verdict="fully", note="same mechanism")
    judge1_item.refresh_from_db()
    assert (judge1_item.status, judge1_item.verdict, judge1_item.verdict_source) == ("done", "fully", "agreed")

    # The other item: the verdicts differ -> adjudication.
    a = judgement_claim_next(study=study, judge=people["judge2"])
    judgement_submit(reexplanation=a, judge=people["judge2"], verdict="partially")
    b = judgement_claim_next(study=study, judge=people["judge2"])
    judgement_submit(reexplanation=b, judge=people["judge2"], verdict="not")
    other = a.study_item
    other.refresh_from_db()
    assert other.status == StudyItem.Status.ADJUDICATION and not other.verdict
    with pytest.raises(Forbidden):  # the judge cannot adjudicate their own conflict
        study_item_adjudicate(study_item=other, user=people["judge2"], verdict="partially")
    with pytest.raises(Forbidden):  # annotators do not adjudicate
        study_item_adjudicate(study_item=other, user=people["summarist"], verdict="partially")
    done = study_item_adjudicate(study_item=other, user=people["adjudicator"], verdict="partially", note="close")
    assert (done.status, done.verdict, done.verdict_source) == ("done", "partially", "adjudicated")
    with pytest.raises(Conflict):
        study_item_adjudicate(study_item=other, user=lead, verdict="not")

    report = study_report(study=study)
    assert report["decided"] == 2 and report["verdicts"] == {"fully": 1, "partially": 1, "not": 0}
    assert report["compatible"]["share"] == 1.0 and report["fully"]["share"] == 0.5
    assert report["conflicts"] == {
        "items": 1,
        "adjudicated": 1,
        "open": 0,
        "definition": "the two judge verdicts of an item differ",
    }
    assert report["judge_verdicts"] == {"fully": 2, "partially": 1, "not": 1}


def test_stale_and_double_saves_are_refused(study_project, lead, people):
    project, _, _ = study_project
    study = open_study(project, lead, n=2)
    r = reexplanation_claim_next(study=study, participant=people["part1"])
    saved = reexplanation_save(reexplanation=r, participant=people["part1"], text="draft", version=r.version)
    with pytest.raises(StaleVersion):
        reexplanation_save(reexplanation=r, participant=people["part1"], text="other tab", version=r.version)
    with pytest.raises(Invalid):
        reexplanation_save(reexplanation=r, participant=people["part1"], text="  ", version=saved.version, submit=True)
    with pytest.raises(Forbidden):
        reexplanation_save(reexplanation=r, participant=people["part2"], text="mine", version=saved.version)
    reexplanation_save(reexplanation=r, participant=people["part1"], text="final", version=saved.version, submit=True)
    with pytest.raises(Conflict):
        reexplanation_save(reexplanation=r, participant=people["part1"], text="again", version=saved.version + 1)
    assert Reexplanation.objects.get(pk=r.pk).text == "final"


def test_revision_replaces_the_reference_keeps_the_old_and_reaches_gold(study_project, lead, people):
    project, items, _ = study_project
    # Take one item to gold through stage 2.
    ready(people["summarist"], project)
    a = assignment_claim_next(annotator=people["summarist"], project=project).annotation
    annotation_submit(annotator=people["summarist"], item=a.item, values={"summary": "s"}, version=a.version)
    gold_item = Item.objects.get(pk=a.item_id)
    assert gold_item.stage == Stage.GOLD
    study = open_study(project, lead)
    si = study.items.get(item_id=gold_item.pk)
    old = si.reference_text
    with pytest.raises(Forbidden):
        study_reference_revise(study_item=si, lead=people["adjudicator"], text="new")
    with pytest.raises(StaleVersion):
        study_reference_revise(study_item=si, lead=lead, text="new", expected="something else")
    study_reference_revise(study_item=si, lead=lead, text="Revised: the cat is the boss", expected=old, note="A.2")
    ann = Annotation.objects.get(pk=si.reference_annotation_id)
    assert ann.values["explanation"] == "Revised: the cat is the boss"
    assert ann.revisions.filter(values__explanation="Revised: the cat is the boss", saved_by=lead).exists()
    event = HistoryEvent.objects.get(item=gold_item, kind="study:revision")
    assert event.old == {"explanation": old} and event.new["explanation"].startswith("Revised")
    gold = GoldRecord.objects.get(item=gold_item, is_current=True)
    assert gold.values["explanation"] == ["Revised: the cat is the boss"] and gold.revision == 2
    assert GoldRecord.objects.get(item=gold_item, revision=1).values["explanation"] == [old]
    si.refresh_from_db()
    assert si.reference_text == old and si.revisions == 1  # the study keeps what was judged
    assert study_report(study=study)["revisions"] == {"count": 1, "items": [gold_item.pk]}


def test_removal_excludes_the_item_with_its_reason_and_is_counted(study_project, lead, people):
    project, _, _ = study_project
    study = open_study(project, lead, n=4)
    si = study.items.first()
    with pytest.raises(Invalid):
        study_item_remove(study_item=si, lead=lead, reason="other")  # other needs a note
    study_item_remove(study_item=si, lead=lead, reason="incompatible", note="nobody sees the pun")
    item = Item.objects.get(pk=si.item_id)
    assert item.stage == Stage.EXCLUDED
    assert item.excluded_reason == "independence study: reference not recoverable from the meme: nobody sees the pun"
    assert HistoryEvent.objects.filter(item=item, kind="excluded", actor=lead).exists()
    assert exclusions_by_reason(project=project) == {item.excluded_reason: 1}
    with pytest.raises(Conflict):
        study_item_remove(study_item=si, lead=lead, reason="safety")
    report = study_report(study=study)
    assert report["removals"]["count"] == 1 and report["removals"]["items"] == [item.pk]
    # nobody is handed the removed item
    while (r := reexplanation_claim_next(study=study, participant=people["part1"])) is not None:
        assert r.study_item_id != si.pk
        reexplanation_save(reexplanation=r, participant=people["part1"], text="t", version=r.version, submit=True)


def test_a_flagged_item_is_not_drawn(study_project, lead, people):
    project, items, _ = study_project
    ready(people["summarist"], project)
    a = assignment_claim_next(annotator=people["summarist"], project=project).annotation
    project.workflow[1]["flags"] = ["hateful"]
    project.save(update_fields=["workflow"])
    project.refresh_from_db()
    item_flag(annotator=people["summarist"], item=a.item, reason="hateful")
    study = study_draw(project=project, lead=lead, sample_size=11, seed=0, strata_fields=STRATA)
    assert a.item_id not in set(study.items.values_list("item_id", flat=True)) and study.eligible == 11


def test_report_share_and_wilson_ci_per_stratum(study_project, lead, people):
    project, _, _ = study_project
    study = open_study(project, lead, n=4, seed=2)
    for _ in range(4):
        reexplain(study, people["part1"])
        reexplain(study, people["part2"])
    verdicts = iter(["fully", "fully", "partially", "partially", "not", "not", "fully", "fully"])
    while (r := judgement_claim_next(study=study, judge=people["judge1"])) is not None:
        judgement_submit(reexplanation=r, judge=people["judge1"], verdict=next(verdicts))
    report = study_report(study=study)
    # 3 of 4 compatible: Wilson 95% [0.3006, 0.9544]; fully 2 of 4: [0.1500, 0.8500]
    assert report["compatible"] == {
        "k": 3,
        "n": 4,
        "share": 0.75,
        "ci": [0.3006, 0.9544],
        "definition": "fully or partially compatible",
    }
    assert report["fully"] == {"k": 2, "n": 4, "share": 0.5, "ci": [0.15, 0.85]}
    assert sum(s["decided"] for s in report["strata"]) == 4
    assert report["conflicts"]["items"] == 0
