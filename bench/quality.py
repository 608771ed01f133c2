"""Time the agreement report on synthetic projects (no database): how long the Celery job takes.

    .venv/bin/python bench/quality.py [--items 10000]

meme3w: two annotations per item (Cohen's kappa with kappa_ci, F1/IoU with mean_ci);
aha: three per item (mean pairwise kappa, alpha and macro kappa with the generic item bootstrap).

Measured on the shared 2-core dev machine (busy): meme3w 10,000 items x 2 in 0.4 s; aha 5,000
items x 3 in ~50 s (the generic bootstrap of Krippendorff's alpha per label dominates; its
resample count adapts to the data size, see quality.compute.GENERIC_BUDGET).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

# Run as a script, this file's folder comes first on sys.path and would shadow the quality app.
ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]

import concord  # noqa: F401  (first: one BLAS thread per process, as in the workers)
from projects.presets import (
    AHA_HATEFUL_TYPES,
    AHA_NON_HATEFUL_TYPES,
    AHA_PROTECTED_CATEGORIES,
    AHA_SCHEMA,
    MEME3W_SCHEMA,
)
from projects.schema import Schema
from quality import agreement
from quality.agreement import Unit

CATS = ["group background", "religion and caste", "gender", "health condition"]


def meme3w_record(rng: random.Random, base: dict) -> dict:
    if rng.random() < 0.05:
        return {
            "label": "non-harmful",
            "target_category": None,
            "target_entity": None,
            "text_mention": None,
            "visual_region": [],
        }
    r = dict(base)
    if rng.random() < 0.08:
        r["target_category"] = rng.choice(CATS)
    if rng.random() < 0.2:
        r["target_entity"] = r["target_entity"] + " people"
    x = rng.randint(-30, 30)
    r["visual_region"] = [[100 + x, 100, 500 + x, 600]]
    return r


def aha_record(rng: random.Random, base: dict) -> dict:
    r = dict(base)
    if rng.random() < 0.1:
        r["hateful_type"] = (
            sorted(set(r["hateful_type"]) | {rng.choice(AHA_HATEFUL_TYPES[:-1])}) if r["hateful_type"] else []
        )
    return r


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=10000)
    args = parser.parse_args()
    rng = random.Random(0)
    units = []
    for i in range(args.items):
        base = {
            "label": "harmful",
            "target_category": rng.choice(CATS),
            "target_entity": rng.choice(["Muslims", "women", "immigrants"]),
            "text_mention": rng.choice([None, "them", "those people"]),
            "visual_region": [],
        }
        units.append(Unit(i, (meme3w_record(rng, base), meme3w_record(rng, base)), (1, 2)))
    t, c = time.perf_counter(), time.process_time()
    agreement.agreement_figures(Schema(MEME3W_SCHEMA), units, lexicon={"Muslims": "Muslim people"})
    print(f"meme3w, {args.items} items x 2: {time.perf_counter() - t:.1f} s wall, {time.process_time() - c:.1f} s CPU")

    n = args.items // 2
    units = []
    for i in range(n):
        hateful = rng.random() < 0.4
        base = (
            {
                "is_hateful": "Hateful",
                "hateful_type": [rng.choice(AHA_HATEFUL_TYPES[:-1])],
                "targeted_categories": [rng.choice(AHA_PROTECTED_CATEGORIES)],
                "non_hateful_type": [],
            }
            if hateful
            else {
                "is_hateful": "Not-Hateful",
                "hateful_type": [],
                "targeted_categories": [],
                "non_hateful_type": [rng.choice(AHA_NON_HATEFUL_TYPES)],
            }
        )
        units.append(Unit(i, tuple(aha_record(rng, base) for _ in range(3)), (1, 2, 3)))
    t, c = time.perf_counter(), time.process_time()
    agreement.agreement_figures(Schema(AHA_SCHEMA), units, lexicon=None)
    print(f"aha, {n} items x 3: {time.perf_counter() - t:.1f} s wall, {time.process_time() - c:.1f} s CPU")


if __name__ == "__main__":
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "concord.settings")
    django.setup()
    main()
