"""A one-stage VIKR test project (the shared contract's schema and evaluation plan), so the
two-judge evaluation is tested on a release built the way any release is built. The real
``vikr`` preset (three stages) is another helper's; the evaluation only depends on the plan's
``kind``, layers and the gold checklist fields, which are the same."""

from __future__ import annotations

import copy

from exports.factories import gold_create
from exports.services import export_job_run, export_job_start
from projects.factories import items_create, project_with_members
from projects.models import Item

TEST_PRESET = "vikr-onestage"

VIKR_EVALUATION = {
    "kind": "checklist_judges",
    "layers": [["V", "visual"], ["I", "identity"], ["K", "knowledge"], ["R", "reasoning"]],
    "judges": 2,
    "order": ["V", "I", "K", "R", "success", "success_3of4"],
    "primary": "success",
    "breakdowns": ["gold.language", "gold.domain"],
}


def _checklist(name: str, prefix: str, label: str, **extra) -> dict:
    return {
        "name": name,
        "type": "checklist",
        "label": label,
        "required": True,
        "min_items": 1,
        "max_items": 4,
        "id_prefix": prefix,
        **extra,
    }


VIKR_SCHEMA = {
    "version": 1,
    "fields": [
        {"name": "explanation", "type": "text", "label": "Reference explanation", "required": True},
        {
            "name": "language",
            "type": "choice",
            "label": "Language",
            "choices": ["Chinese", "English"],
            "required": True,
        },
        {
            "name": "domain",
            "type": "choice",
            "label": "Domain",
            "choices": ["ACG", "Cross-domain", "Daily life", "Movies and TV", "Public life"],
            "required": True,
        },
        _checklist("visual", "V", "Visual clues"),
        _checklist("identity", "I", "Identity links", link_to="visual", link_required=True),
        _checklist("knowledge", "K", "Knowledge units"),
        _checklist("reasoning", "R", "Reasoning mechanisms"),
    ],
}


def test_preset() -> dict:
    from projects.presets import PRESETS

    base = PRESETS["custom"]
    return {
        "label": "VIKR, one stage (tests)",
        "schema": copy.deepcopy(VIKR_SCHEMA),
        "guideline": base["guideline"],
        "annotators_per_item": 2,
        "skip_reasons": copy.deepcopy(base["skip_reasons"]),
        "evaluation": copy.deepcopy(VIKR_EVALUATION),
    }


test_preset.__test__ = False  # not a test (pytest collects test_* names)

#: Per item k of a test release: its language, domain and checklist words. Item k has
#: k % 3 + 1 Visual items (1-3) and one item in each other layer.
DOMAINS = ["ACG", "Daily life", "Movies and TV", "Public life", "Cross-domain"]


def vikr_values(item: Item) -> dict:
    k = int(item.source_id.lstrip("s"))
    n_visual = k % 3 + 1
    visual = [{"id": f"V{j}", "text": f"visual clue {k}-{j}"} for j in range(1, n_visual + 1)]
    return {
        "explanation": f"Reference explanation of meme {k}: 柯南 is shown; the joke is pun {k}.",
        "language": "Chinese" if k % 2 else "English",
        "domain": DOMAINS[k % len(DOMAINS)],
        "visual": visual,
        "identity": [{"id": "I1", "text": f"names entity {k}", "link": "V1"}],
        "knowledge": [{"id": "K1", "text": f"background fact {k}"}],
        "reasoning": [{"id": "R1", "text": f"humour mechanism {k}"}],
    }


def vikr_project(*, slug: str, lead, annotators: list, researchers=(), others=None):
    from projects.presets import PRESETS

    PRESETS.setdefault(TEST_PRESET, test_preset())
    roles = {"lead": [lead], "annotator": list(annotators), "researcher": list(researchers), **(others or {})}
    return project_with_members(slug, preset=TEST_PRESET, **roles)


def vikr_release(*, project, lead, annotators: list, folder, n: int = 12):
    items = items_create(project, folder, n, texts=[f"meme {i}" for i in range(n)])
    gold_create(project, items, annotators, values_for=vikr_values)
    return export_job_run(job=export_job_start(project=project, user=lead, enqueue=False))


def fake_judge(*, fails=(), silent=()):
    """A judge for candidates.tests.fake_llm: passes a checklist item when its text appears in
    the response (case-insensitive), fails it otherwise or when its id is in ``fails``; leaves
    ids in ``silent`` out of the reply (no decision)."""
    import re

    def reply(prompt: str) -> dict:
        items = re.findall(r"^- ([A-Za-z0-9_.-]+): (.*)$", prompt.split("RESPONSE TO GRADE")[0], re.M)
        m = re.search(r"<<<RESPONSE\n(.*)\nRESPONSE>>>", prompt, re.S)
        response = (m.group(1) if m else "").casefold()
        return {
            rid: "pass" if text.casefold() in response and rid not in fails else "fail"
            for rid, text in items
            if rid not in silent
        }

    return reply


def explanation_covering(gold: dict, *, layers=("visual", "identity", "knowledge", "reasoning")) -> str:
    """A response that mentions every checklist item text of ``layers`` (a fake judge passes them)."""
    g = gold["gold"]
    parts = [e["text"] for name in layers for e in (g.get(name) or [])]
    return "This meme: " + "; ".join(parts) + "."
