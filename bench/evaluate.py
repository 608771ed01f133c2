"""Evaluation at benchmark scale, on one core (metrics.evaluation).

    python bench/evaluate.py [--items 100000] [--submissions 10] [--resamples 10000] [--seed 0]

1. Read and score --items predictions on all meme3w fields (label, category, entity with the
   Table 8 lexicon, mention, region; JRA over the gold-harmful items): the JSONL reader
   (per-line checks), the per-item scores, every figure's value, and separately the
   1,000-resample bootstrap CI of every figure.
2. Paired bootstrap (--resamples, the paper's 10,000) of every Table 1 figure for every pair of
   --submissions submissions on the same items (a test split of 1,063 items as in Meme3W, 438
   of them harmful).

Synthetic data: realistic mixes of exact copies, lexicon variants, near boxes and errors.
Prints the figures and times; asserts nothing about time (the targets are <= 5 s and <= 10 s).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse
import itertools
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from metrics import evaluation as ev
from metrics.entity import TABLE8_LEXICON

CATEGORIES = ["group background", "religion and caste", "gender", "health condition"]
ENTITIES = ["women", "Muslim people", "immigrants", "Jewish people", "disabled people", "LGBTQ people", "Black women"]
VARIANTS = {"women": "woman", "Muslim people": "Muslims", "Jewish people": "Jews", "LGBTQ people": "LGBTQ community"}
HARMFUL = {"field": "label", "in": ["harmful"]}
PLAN = {
    "fields": [
        {"name": "label", "kind": "choice", "choices": ["harmful", "non-harmful"], "positive": "harmful"},
        {"name": "target_category", "kind": "choice", "choices": CATEGORIES, "subset": HARMFUL},
        {"name": "target_entity", "kind": "entity", "subset": HARMFUL},
        {"name": "text_mention", "kind": "span", "subset": HARMFUL},
        {"name": "visual_region", "kind": "boxes", "subset": HARMFUL},
    ],
    "composites": [
        {
            "name": "jra",
            "kind": "jra",
            "label": "label",
            "positive": "harmful",
            "fields": [["target_category", 1.0], ["target_entity", 0.7], ["text_mention", 0.7], ["visual_region", 0.5]],
        }
    ],
}
TABLE1 = [
    "label.acc",
    "label.f1",
    "jra",
    "target_category.acc",
    "target_entity.f1_rel",
    "text_mention.em",
    "text_mention.f1",
    "visual_region.iou50",
    "visual_region.iou75",
]


def gold_record(rng: random.Random, i: int) -> dict:
    if rng.random() < 0.59:
        return {"label": "non-harmful", "target_category": None, "target_entity": None, "text_mention": None,
                "visual_region": []}  # fmt: skip
    entity = rng.choice(ENTITIES)
    x, y = rng.randint(0, 600), rng.randint(0, 600)
    return {
        "label": "harmful",
        "target_category": rng.choice(CATEGORIES),
        "target_entity": entity,
        "text_mention": f"those {entity} again" if rng.random() < 0.6 else None,
        "visual_region": [[x, y, x + rng.randint(50, 390), y + rng.randint(50, 390)]] if rng.random() < 0.7 else [],
    }


def prediction(rng: random.Random, gold: dict, skill: float) -> dict:
    p = dict(gold)
    if rng.random() > skill:
        p["label"] = "harmful" if gold["label"] == "non-harmful" else "non-harmful"
    if p["label"] == "harmful" and gold["label"] == "non-harmful":
        p.update(target_category=rng.choice(CATEGORIES), target_entity=rng.choice(ENTITIES))
    if gold["label"] == "harmful":
        if rng.random() > skill:
            p["target_category"] = rng.choice(CATEGORIES)
        if rng.random() < 0.3:
            p["target_entity"] = VARIANTS.get(gold["target_entity"], rng.choice(ENTITIES))
        if gold["text_mention"] and rng.random() < 0.3:
            p["text_mention"] = gold["text_mention"].split(" ", 1)[1]
        if gold["visual_region"] and rng.random() < 0.4:
            x1, y1, x2, y2 = gold["visual_region"][0]
            p["visual_region"] = [[x1, y1, min(1000, x2 + rng.randint(0, 120)), y2]]
        if rng.random() < 0.02:
            p["visual_region"] = "somewhere"  # malformed
    return p


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--submissions", type=int, default=10)
    parser.add_argument("--resamples", type=int, default=ev.PAIRED_RESAMPLES)
    parser.add_argument("--test-items", type=int, default=1063)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)

    golds = [{"item_id": i, "split": "test", "gold": gold_record(rng, i)} for i in range(args.items)]
    lines = [(json.dumps({"item_id": g["item_id"], **prediction(rng, g["gold"], 0.8)}) + "\n").encode() for g in golds]
    index = ev.GoldIndex(golds, "test")

    c0, t0 = time.process_time(), time.perf_counter()
    reading = ev.read_predictions(iter(lines), plan=PLAN, index=index)
    t1 = time.perf_counter()
    scored = ev.score(PLAN, index.golds, reading.predictions, lexicon=TABLE8_LEXICON)
    values = {f.name: f.value() for f in scored.figures}
    c2, t2 = time.process_time(), time.perf_counter()
    cis = {f.name: ev.figure_ci(f) for f in scored.figures}
    t3 = time.perf_counter()
    print(f"1. {args.items:,} predictions, all meme3w fields ({sum(reading.malformed_fields.values())} malformed):")
    print(f"   read + check {t1 - t0:.2f} s, score {t2 - t1:.2f} s  ->  read + score {t2 - t0:.2f} s (target <= 5 s)")
    # CPU time of this process: what the one core spent, whatever else the machine runs.
    print(f"   read + score CPU time {c2 - c0:.2f} s")
    print(f"   1,000-resample CI of all {len(cis)} figures: {t3 - t2:.2f} s")
    for name in TABLE1:
        ci = cis[name]
        print(f"   {name:24s} {100 * values[name]:6.2f}  [{100 * ci[0]:.2f}, {100 * ci[1]:.2f}]")

    test = golds[: args.test_items]
    subs = []
    for k in range(args.submissions):
        preds = [prediction(rng, g["gold"], 0.6 + 0.035 * k) for g in test]
        subs.append(ev.score(PLAN, test, preds, lexicon=TABLE8_LEXICON).by_name())
    c4, t4 = time.process_time(), time.perf_counter()
    pairs = list(itertools.combinations(range(args.submissions), 2))
    worst = None
    for a, b in pairs:
        for name in TABLE1:
            d = ev.paired_difference(subs[a][name], subs[b][name], n=args.resamples)
            if name == "jra" and (a, b) == (0, args.submissions - 1):
                worst = d
    c5, t5 = time.process_time(), time.perf_counter()
    print(
        f"2. paired bootstrap, {args.resamples:,} resamples, {len(pairs)} pairs of {args.submissions} submissions x "
        f"{len(TABLE1)} Table 1 figures on {len(test):,} items: {t5 - t4:.2f} s, CPU {c5 - c4:.2f} s (target <= 10 s)"
    )
    if worst:
        print(
            f"   e.g. JRA sub0 - sub{args.submissions - 1}: {100 * worst['difference']:+.2f} "
            f"[{100 * worst['ci'][0]:.2f}, {100 * worst['ci'][1]:.2f}] on n={worst['n']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
