"""Annotation test data, made through the services as annotators would make it."""

from __future__ import annotations

from annotation.services import assignment_claim_next, content_warning_accept
from candidates.models import Provider
from candidates.services import candidate_store, provider_create
from projects.models import Stage
from projects.services import item_stage_set

MEME3W_HARMFUL = {
    "label": "harmful",
    "target_category": "group background",
    "target_entity": "people from Planet Zorg",
    "text_mention": "people from Planet Zorg",
    "visual_region": [[100, 120, 400, 500]],
}
MEME3W_NOT_HARMFUL = {
    "label": "non-harmful",
    "target_category": None,
    "target_entity": None,
    "text_mention": None,
    "visual_region": [],
}


def items_open(items) -> None:
    """Move items to the annotating stage (the candidates app or the lead does this in real use)."""
    for item in items:
        item_stage_set(item=item, stage=Stage.ANNOTATING)


def ready(user, project):
    """An annotator who has read the content warning."""
    content_warning_accept(user=user, project=project)
    return user


def claim(user, project):
    result = assignment_claim_next(annotator=user, project=project)
    assert result.annotation is not None, result.outcome
    return result.annotation


PROVIDER_NAMES = ["SecretProviderAlpha", "SecretProviderBeta", "SecretProviderGamma"]
MODEL_NAMES = ["gpt-4o-hidden-model", "gemini-hidden-model", "qwen-vl-hidden-model"]


def candidates_create(item, replies: list[dict], *, prompt_version: str = "v1"):
    """Store one candidate per reply, each from its own provider (made through candidates.services)."""
    import json

    out = []
    for i, reply in enumerate(replies):
        provider = Provider.objects.filter(project=item.project, name=PROVIDER_NAMES[i]).first() or provider_create(
            project=item.project,
            name=PROVIDER_NAMES[i],
            kind="openai-compatible",
            model=MODEL_NAMES[i],
            base_url="http://127.0.0.1:9/v1",
        )
        out.append(
            candidate_store(
                item=item,
                provider=provider,
                prompt_version=prompt_version,
                reply_text=json.dumps({"think": f"secret reasoning {i}", **reply}),
                model_name=MODEL_NAMES[i],
                latency_ms=10,
                prompt_tokens=1,
                completion_tokens=1,
            )
        )
    return out
