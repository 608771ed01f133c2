"""Quality test and demo data, made through the services as people would make it:
annotators claim and submit, reviewers adjudicate, auditors submit blind annotations."""

from __future__ import annotations

from collections.abc import Callable

from adjudication.models import GoldRecord
from annotation.models import Kind
from annotation.services import assignment_claim_next, content_warning_accept
from candidates.demo import DEMO_MODELS, meme3w_reply
from candidates.models import Provider
from candidates.services import candidate_store, provider_create
from projects.models import Item, Stage
from projects.services import item_stage_set
from workflow.services import annotation_submit


def annotate_items(
    project,
    items: list[Item],
    annotators: list,
    values_for: Callable[[Item, int], dict],
    provenance_for: Callable[[Item, int], dict] | None = None,
) -> None:
    """Each annotator in turn claims and submits each item (item by item, so the claims land on
    the intended item); ``values_for(item, k)`` is annotator k's record for the item."""
    for user in annotators:
        content_warning_accept(user=user, project=project)
    for item in items:
        if item.stage == Stage.NEW:
            item_stage_set(item=item, stage=Stage.ANNOTATING)
    for item in items:
        for k, user in enumerate(annotators):
            claimed = assignment_claim_next(annotator=user, project=project)
            if claimed.annotation is None or claimed.annotation.item_id != item.pk:
                raise AssertionError(
                    f"{user} was given {claimed.annotation and claimed.annotation.item_id}, expected {item.pk}"
                )
            annotation_submit(
                annotator=user,
                item=claimed.annotation.item,
                values=values_for(item, k),
                version=claimed.annotation.version,
                provenance=provenance_for(item, k) if provenance_for else None,
            )


def audit_submit_all(audit, values_for: Callable[[Item, dict], dict]) -> int:
    """Every assigned auditor submits their blind annotation; ``values_for(item, gold_values)``."""
    n = 0
    for ai in audit.audit_items.select_related("item", "auditor", "annotation").filter(auditor__isnull=False):
        content_warning_accept(user=ai.auditor, project=audit.project)
        gold = GoldRecord.objects.get(item=ai.item, is_current=True).values
        annotation_submit(
            annotator=ai.auditor,
            item=ai.item,
            values=values_for(ai.item, gold),
            version=ai.annotation.version,
            kind=Kind.AUDIT,
        )
        n += 1
    return n


SECRET_ENTITY = "Xylophonic Quokka Brigade"


def demo_candidates(items: list[Item], *, leaky: bool = True) -> None:
    """Candidates of the demo's three replay models for each item (through candidates.services),
    plus, with ``leaky``, a fourth model whose entity is a string that must never reach an auditor."""
    import json

    for item in items:
        project = item.project
        key = item.source_id or item.import_key
        replies = [(m, meme3w_reply(model=m, key=key + m, text=item.text)) for m in DEMO_MODELS]
        if leaky:
            replies.append(
                (
                    "model-leaky",
                    json.dumps(
                        {
                            "label": "harmful",
                            "target_category": "gender",
                            "target_entity": SECRET_ENTITY,
                            "text_mention": None,
                            "visual_region": [],
                        }
                    ),
                )
            )
        for name, reply in replies:
            provider = Provider.objects.filter(project=project, name=name).first() or provider_create(
                project=project,
                name=name,
                kind="openai-compatible",
                model=f"{name}-weights",
                base_url="http://127.0.0.1:9/v1",
            )
            candidate_store(
                item=item,
                provider=provider,
                prompt_version="v1",
                reply_text=reply,
                model_name=f"{name}-weights",
                latency_ms=5,
                prompt_tokens=1,
                completion_tokens=1,
            )
