"""Demo candidates without network: three replay providers ("model-1/2/3") over a JSONL file.

The replies are made from ``projects.demo.demo_truth`` with deliberate, deterministic
variations, so the annotation page has something realistic to show:
- model-1 is faithful and draws a box on harmful memes (plain JSON);
- model-2 words the target entity differently and draws no box (JSON in a ```json fence after
  some prose, with a trailing comma: exercises the parser);
- model-3 is sometimes wrong (label flipped), sometimes paraphrases the mention (removed: not an
  exact copy) or gives a box in 0-1 coordinates (removed: not rescaled).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from candidates.endpoints import replay_file_path
from candidates.models import Candidate, Provider, ProviderKind
from candidates.services import candidate_job_run_inline, candidate_job_start, provider_create
from core.errors import ServiceError
from projects.demo import demo_truth
from projects.models import Project

DEMO_MODELS = ("model-1", "model-2", "model-3")
ENTITY_VARIANTS = {
    "people from Planet Zorg": "Zorgians",
    "Zorgians": "Zorg people",
    "followers of the Blue Moon Order": "Blue Moon Order followers",
    "Glorbian monks": "monks of Glorb",
    "people with space hiccups": "space hiccup sufferers",
}
AHA_CATEGORY = {
    "group background": "nationality",
    "religion and caste": "religion",
    "health condition": "disability or disease",
    "gender": "sex",
}


def _h(key: str) -> int:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)


def _box(key: str) -> list[int]:
    h = _h(key)
    x1, y1 = 60 + h % 200, 180 + (h >> 8) % 150
    return [x1, y1, min(1000, x1 + 380 + (h >> 16) % 300), min(1000, y1 + 450 + (h >> 20) % 300)]


def meme3w_reply(*, model: str, key: str, text: str) -> str:
    truth = demo_truth(text)
    harmful = truth["label"] == "harmful"
    think = f"Steps 1-5 for a {truth['label']} meme."
    if model == "model-1":
        out = {"think": think, **truth, "visual_region": [_box(key)] if harmful else []}
        return json.dumps(out)
    if model == "model-2":
        out = {"think": think, **truth}
        if harmful:
            out["target_entity"] = ENTITY_VARIANTS.get(truth["target_entity"], truth["target_entity"])
        body = json.dumps(out, indent=2)
        body = body[: body.rfind("}")].rstrip() + ",\n}"
        return f"Here is my analysis.\n```json\n{body}\n```"
    h = _h(key) % 6
    out = {"think": think, **truth}
    if h == 0:  # wrong
        if harmful:
            out.update(
                label="non-harmful", target_category=None, target_entity=None, text_mention=None, visual_region=[]
            )
        else:
            out.update(
                label="harmful", target_category="gender", target_entity="people", text_mention=None, visual_region=[]
            )
    elif harmful and h in (1, 2):
        out["text_mention"] = f"the {out['text_mention'].lower()} folks" if out["text_mention"] else "them"
    elif harmful and h == 3:
        out["visual_region"] = [[0.12, 0.2, 0.66, 0.93]]
    elif harmful:
        out["visual_region"] = [_box(key + "3")]
    return json.dumps(out)


def aha_reply(*, model: str, key: str, text: str) -> str:
    truth = demo_truth(text)
    hateful = truth["label"] == "harmful"
    if model == "model-3" and _h(key) % 5 == 0:
        hateful = not hateful
    if hateful:
        category = AHA_CATEGORY.get(truth["target_category"] or "", "ethnicity")
        types = ["Mocking"] if model != "model-2" else ["Mocking", "Inferiority"]
        out = {
            "think": "...",
            "is_hateful": "Hateful",
            "hateful_type": types,
            "targeted_categories": [category],
            "non_hateful_type": [],
        }
    else:
        out = {
            "think": "...",
            "is_hateful": "Not-Hateful",
            "hateful_type": [],
            "targeted_categories": [],
            "non_hateful_type": ["Humor"] if model != "model-3" else ["Humor", "Sarcasm"],
        }
    return json.dumps(out)


REPLIES = {"meme3w": meme3w_reply, "aha": aha_reply}


def demo_replay_write(*, project: Project, path: Path) -> int:
    make = REPLIES[project.preset]
    lines = []
    for item in project.items.order_by("id"):
        key = item.source_id or item.import_key
        for model in DEMO_MODELS:
            lines.append(
                json.dumps(
                    {
                        "source_id": item.source_id,
                        "import_key": item.import_key,
                        "model": model,
                        "reply": make(model=model, key=key + model, text=item.text),
                    }
                )
            )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(path)
    return len(lines)


def demo_candidates_load(*, project: Project, lead=None) -> int:
    """Set up the three replay providers and generate candidates for the project's new items.

    Idempotent: providers are reused, and items that already left stage "new" are not touched.
    Runs in this process (no broker needed). Returns the number of candidates created.
    """
    if project.preset not in REPLIES:
        return 0
    name = "demo-replies.jsonl"
    path = replay_file_path(project.pk, name)
    path.parent.mkdir(parents=True, exist_ok=True)
    demo_replay_write(project=project, path=path)
    for model in DEMO_MODELS:
        existing = Provider.objects.filter(project=project, name=model).first()
        if existing is None:
            provider_create(
                project=project,
                name=model,
                kind=ProviderKind.REPLAY,
                model=model,
                replay_file=name,
                requests_per_minute=6000,
                timeout_seconds=10,
            )
        elif existing.replay_file != name:
            Provider.objects.filter(pk=existing.pk).update(replay_file=name)
    before = Candidate.objects.filter(item__project=project).count()
    try:
        job = candidate_job_start(project=project, user=lead, enqueue=False)
    except ServiceError:
        return 0  # nothing new to do
    candidate_job_run_inline(job=job)
    return Candidate.objects.filter(item__project=project).count() - before
