"""A small but complete project, built through the services, for the security tests.

Every kind of object a URL can name exists (items in each stage, an open and a decided
adjudication task, a blind audit, a published release, import/candidate/export/agreement jobs,
a provider, a near-duplicate pair), so the authorization matrix and the crawls reach real
views instead of 404s. The same builder makes the "foreign" project whose ids the matrix
sends with the own project's slug.

Secrets planted here must never reach annotators or auditors (tests/security/test_blindness.py):
provider and model names, the other annotator's entity, the reviewer's gold entity.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from pathlib import Path

from django.contrib.auth.tokens import default_token_generator
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from adjudication.services import adjudication_next, gold_decide
from annotation.factories import MEME3W_HARMFUL, claim, items_open, ready
from annotation.services import annotation_save_draft
from candidates.factories import MODEL_NAMES, PROVIDER_NAMES, candidates_create
from candidates.models import Conversion
from candidates.services import candidate_job_start
from exports.factories import gold_create, items_import, recompressed
from exports.models import NearDuplicatePair
from exports.services import export_job_run, export_job_start, near_duplicates_detect
from projects.factories import image_bytes, project_with_members, user_create
from projects.members import invitation_create
from projects.models import ImportJob, ItemVariant
from projects.services import guideline_save
from quality.models import AgreementReport
from quality.reports import DEFAULT_FILTERS
from quality.services import agreement_report_request, audit_create
from workflow.services import annotation_submit

#: Values that only the other annotator typed (on the disputed items).
OTHER_ANNOTATOR_ENTITY = "Zorg Secret Other Annotator Entity"
#: The reviewer's edited gold entity (differs from every annotation).
GOLD_ENTITY = "Zorg Secret Gold Entity"
#: The independence study's reference and another participant's re-explanation (studies app).
SECRET_REFERENCE = "Zorg Secret Study Reference"
SECRET_REEXPLANATION = "Zorg Secret Other Participant Reexplanation"
SECRETS = [
    OTHER_ANNOTATOR_ENTITY,
    GOLD_ENTITY,
    *PROVIDER_NAMES,
    *MODEL_NAMES,
    "secret reasoning",
    SECRET_REFERENCE,
    SECRET_REEXPLANATION,
]

CANDIDATE_REPLIES = [
    {
        "label": "harmful",
        "target_category": "group background",
        "target_entity": "people from Planet Zorg",
        "text_mention": "Planet Zorg",
        "visual_region": [[10, 20, 300, 400]],
    },
    {
        "label": "harmful",
        "target_category": "religion and caste",
        "target_entity": "Zorg monks",
        "text_mention": "Planet Zorg",
        "visual_region": [],
    },
    {"label": "non-harmful", "target_category": None, "target_entity": None, "text_mention": None, "visual_region": []},
]


@dataclass
class World:
    project: object
    users: dict[str, object]
    #: world key -> object id (or release number / file name) used in URLs.
    ids: dict[str, object] = field(default_factory=dict)
    items: dict[str, object] = field(default_factory=dict)


def _values(item) -> dict:
    return dict(MEME3W_HARMFUL, text_mention="Planet Zorg")


def build_world(slug: str, folder: Path, *, users: dict[str, object] | None = None, prefix: str = "") -> World:
    """Project ``slug`` with one member per role (``users`` overrides: role -> user)."""
    u = {
        "lead": user_create(f"{prefix}lead"),
        "annotator": user_create(f"{prefix}annotator_a"),
        "annotator_b": user_create(f"{prefix}annotator_b"),
        "reviewer": user_create(f"{prefix}reviewer"),
        "auditor": user_create(f"{prefix}auditor"),
        "researcher": user_create(f"{prefix}researcher"),
        **(users or {}),
    }
    project = project_with_members(
        slug,
        lead=[u["lead"]],
        annotator=[u["annotator"], u["annotator_b"]],
        reviewer=[u["reviewer"]],
        auditor=[u["auditor"]],
        researcher=[u["researcher"]],
    )
    pics = [image_bytes(1000 + i) for i in range(7)]
    text = "When the people from Planet Zorg ask for wifi ({})"
    rows = [
        {"source_id": "g0", "data": pics[0], "text": text.format("g0"), "redistributable": True},
        {"source_id": "g1", "data": pics[1], "text": text.format("g1"), "redistributable": False},
        {"source_id": "d0", "data": pics[2], "text": text.format("d0"), "redistributable": True},
        {"source_id": "d1", "data": pics[3], "text": text.format("d1"), "redistributable": True},
        {"source_id": "h0", "data": pics[4], "text": text.format("h0"), "redistributable": True},
        {"source_id": "n0", "data": recompressed(pics[0]), "text": text.format("n0 repost")},
        {"source_id": "f0", "data": pics[6], "text": text.format("f0")},
    ]
    items = dict(zip([r["source_id"] for r in rows], items_import(project, folder, rows), strict=True))
    a, b = u["annotator"], u["annotator_b"]
    ready(a, project)
    ready(b, project)
    ready(u["auditor"], project)

    # Candidates (with secret provider/model names) on the items annotators and auditors see.
    for key in ("g0", "d0", "d1", "h0"):
        candidates_create(items[key], CANDIDATE_REPLIES)

    # g0, g1: identical annotations -> gold without review.
    gold_create(project, [items["g0"], items["g1"]], [a, b], values_for=_values)

    # d0, d1: the other annotator typed a different entity -> adjudication.
    for key in ("d0", "d1"):
        items_open([items[key]])
        for user, entity in ((a, None), (b, OTHER_ANNOTATOR_ENTITY)):
            ann = claim(user, project)
            assert ann.item_id == items[key].pk, (key, ann.item_id)
            values = _values(items[key]) if entity is None else {**_values(items[key]), "target_entity": entity}
            annotation_submit(annotator=user, item=ann.item, values=values, version=ann.version)
    # d0 is decided with an edited gold entity; d1's task stays open.
    task = adjudication_next(project=project, reviewer=u["reviewer"])
    assert task.item_id == items["d0"].pk
    gold_decide(
        task=task,
        reviewer=u["reviewer"],
        decisions={
            name: ({"value": GOLD_ENTITY} if name == "target_entity" else {"pick": 1})
            for name, outcome in task.comparison.items()
            if outcome != "agree"
        },
        note="",
        version=task.version,
    )
    open_task = items["d1"].adjudication_tasks.get()

    # h0: the annotator holds it with a draft.
    items_open([items["h0"]])
    held = claim(a, project)
    assert held.item_id == items["h0"].pk
    annotation_save_draft(annotator=a, item=held.item, values={"label": "harmful"}, version=held.version)

    audit = audit_create(project=project, created_by=u["lead"], size=3, seed=1)
    export = export_job_start(project=project, user=u["lead"], enqueue=False)
    release = export_job_run(job=export)
    assert release is not None, export
    near_duplicates_detect(project=project)
    pair = NearDuplicatePair.objects.filter(project=project).order_by("id").first()
    assert pair is not None and {pair.item_a_id, pair.item_b_id} == {items["g0"].pk, items["n0"].pk}
    report, _ = agreement_report_request(project=project, filters=dict(DEFAULT_FILTERS), user=u["lead"])
    cjob = candidate_job_start(project=project, user=u["lead"], item_ids=[items["f0"].pk], enqueue=False)

    from adjudication.models import GoldRecord
    from candidates.models import Provider
    from evaluation.selectors import release_gold, release_splits
    from evaluation.services import submission_create

    split = "test" if "test" in release_splits(release) else release_splits(release)[0]
    oracle = b"".join(
        json.dumps({"item_id": g["item_id"], **g["gold"]}).encode() + b"\n" for g in release_gold(release, split).golds
    )
    submission = submission_create(
        user=u["researcher"], release=release, split=split, model_name="world model", file=io.BytesIO(oracle)
    )

    h0 = items["h0"]  # the held item has a text-free variant (its own pixels stand in for one)
    ItemVariant.objects.create(
        item=h0,
        kind="textfree",
        source="uploaded",
        image=h0.image,
        image_sha256=h0.image_sha256,
        width=h0.width,
        height=h0.height,
    )
    # Study setup (issue 12): a second guideline version, two pending invitations (one to
    # revoke, one whose link page is opened), a set-password link of a new account.
    guideline_save(project=project, text="# Guideline v2", note="world", user=u["lead"])
    to_revoke, _ = invitation_create(
        project=project, email=f"{prefix}revoke@example.org", roles=["annotator"], by=u["lead"]
    )
    _, invite_token = invitation_create(
        project=project, email=f"{prefix}join@example.org", roles=["annotator"], by=u["lead"]
    )
    newcomer = user_create(f"{prefix}newcomer")
    newcomer.set_unusable_password()
    newcomer.save()

    # An open independence study (studies app), made directly: the world's schema has no
    # reference text field. g0: the annotator holds a re-explanation; g1: both submitted, the
    # reviewer judges one; d0: a conflict (the reviewer's two verdicts differ) for the lead.
    from studies.models import Reexplanation, Study, StudyItem

    other_participant = user_create(f"{prefix}participant2")
    study = Study.objects.create(
        project=project, name="world study", reference_field="target_entity", status=Study.Status.OPEN
    )

    def _study_item(key, status):
        return StudyItem.objects.create(
            study=study,
            item=items[key],
            stratum="all",
            stratum_label="all",
            reference_text=SECRET_REFERENCE,
            status=status,
        )

    holding = _study_item("g0", StudyItem.Status.REEXPLAINING)
    own_reexplanation = Reexplanation.objects.create(study_item=holding, slot=1, participant=a, text="my draft")
    judging = _study_item("g1", StudyItem.Status.JUDGING)
    judged = Reexplanation.objects.create(
        study_item=judging,
        slot=1,
        participant=b,
        status="submitted",
        text=SECRET_REEXPLANATION,
        judge=u["reviewer"],
        judge_claimed_at=timezone.now(),
    )
    Reexplanation.objects.create(
        study_item=judging, slot=2, participant=other_participant, status="submitted", text="x"
    )
    conflict = _study_item("d0", StudyItem.Status.ADJUDICATION)
    for slot, (who, verdict) in enumerate(((b, "fully"), (other_participant, "not")), start=1):
        Reexplanation.objects.create(
            study_item=conflict,
            slot=slot,
            participant=who,
            status="submitted",
            text="y",
            judge=u["reviewer"],
            verdict=verdict,
        )

    # A finished model-stage conversion (vikr's LLM stage) of a gold item: its reply is the leads'.
    conversion = Conversion.objects.create(item=items["g0"], stage=1, status="done", raw_reply="{}", values={})

    world = World(project=project, users=u, items=items)
    world.ids.update(
        {
            "item_held": items["h0"].pk,  # held by the annotator (draft)
            "item_gold": items["g0"].pk,  # gold, redistributable, released, audited, in a near-duplicate pair
            "item_gold_restricted": items["g1"].pk,  # gold, not redistributable
            "item_audited": items["g0"].pk,
            "task_open": open_task.pk,
            "audit": audit.pk,
            "release": release.number,
            "release_other": release.number,
            "release_file": "records.jsonl",
            "report": AgreementReport.objects.get(pk=report.pk).pk,
            "import_job": ImportJob.objects.filter(project=project).latest("id").pk,
            "job_kind": ImportJob.kind,
            "variant_kind": "textfree",
            "candidate_job": cjob.pk,
            "export_job": export.pk,
            "provider": Provider.objects.filter(project=project).order_by("id").first().pk,
            "pair": pair.pk,
            "gold_decided": GoldRecord.objects.get(item=items["d0"]).pk,  # decided by the reviewer
            "submission": submission.pk,  # a researcher's predictions on the release (evaluation)
            "guideline_version": 2,
            "invitation": to_revoke.pk,
            "invite_token": invite_token,
            "member_user": u["annotator_b"].pk,
            "reset_uid": urlsafe_base64_encode(force_bytes(newcomer.pk)),
            "reset_token": default_token_generator.make_token(newcomer),
            "study": study.pk,
            "study_action": "confirm",  # on an open study: 409, nothing changes
            "study_item_action": "revise",  # with an empty body: a message, nothing changes
            "study_item": judging.pk,
            "study_item_conflict": conflict.pk,
            "reexplanation_own": own_reexplanation.pk,
            "reexplanation_judged": judged.pk,
            "conversion": conversion.pk,
        }
    )
    return world
