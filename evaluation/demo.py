"""Demo leaderboard: the simulated team's release gets an uploaded baseline predictions file
and its three hidden candidate models (replayed "model-1/2/3") on the test split."""

from __future__ import annotations

import json
from pathlib import Path

from evaluation.models import Submission
from evaluation.selectors import release_gold
from evaluation.services import candidate_submissions_enter, submission_create
from exports.models import Release
from projects.demo import demo_truth


def demo_baseline_file(*, release: Release, split: str, folder: Path) -> Path:
    """A keyword baseline (the demo captions' hints), wrong on purpose now and then: every
    third harmful item names its entity by a bare variant, every fifth line is left out (the
    second, seventh, ...: the demo's test split has three items)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"baseline-v{release.number}-{split}.jsonl"
    lines = [json.dumps({"concord_release": {"project": release.project.slug, "version": release.number}})]
    for k, gold in enumerate(release_gold(release, split).golds):
        if k % 5 == 1:
            continue
        pred = demo_truth(gold.get("text") or "")
        if pred["label"] == "harmful" and k % 3 == 0:
            pred["target_entity"] = (pred["target_entity"] or "").split(" ")[0] or None
        lines.append(json.dumps({"item_id": gold["item_id"], **pred}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def demo_leaderboard(*, release: Release, user, folder: Path, split: str = "test") -> list[Submission]:
    """Enter the hidden candidate models and submit the baseline file (once per release)."""
    entered = candidate_submissions_enter(release=release, split=split)
    if Submission.objects.filter(release=release, split=split, model_name="Keyword baseline").exists():
        return entered
    path = demo_baseline_file(release=release, split=split, folder=folder)
    with open(path, "rb") as fh:
        entered.append(
            submission_create(
                user=user,
                release=release,
                split=split,
                model_name="Keyword baseline",
                description="The demo captions' keyword hints; an entity shortened on every third harmful item, "
                "every fifth item left out (the second, seventh, ...).",
                file=fh,
            )
        )
    return entered
