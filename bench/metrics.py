"""Benchmark of the agreement metrics on synthetic double-annotated meme3w records.

    python bench/metrics.py [--n 1000000] [--seed 0]

Generates N items, each annotated by two annotators under the meme3w schema (about half
harmful; four target categories; target entities drawn from a small vocabulary with surface
variants -- casing, plural/singular, "people" suffix, punctuation -- that the Table 8 style
lexicon maps together; text mentions copied as substrings of a per-item text; 0-3 boxes with
annotator jitter), then times, on one core, every pre-adjudication agreement figure of SPEC
section 3, and scikit-learn's ``cohen_kappa_score`` on the same label data.

Goals (issue 5): all agreement fields over 1M items <= 10 s on one core; kappa >= 10x faster
than scikit-learn and equal within 1e-12.
"""

from __future__ import annotations

import os

# Single core: pin BLAS/OpenMP pools before numpy is imported, and the process to one CPU.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from metrics.agreement import cohen_kappa, kappa_ci
from metrics.bootstrap import mean_ci
from metrics.boxes import enclosing_iou_batch
from metrics.entity import TABLE8_LEXICON, Lexicon, f1_rel_batch
from metrics.text import token_f1_batch

CATEGORIES = ("group background", "religion and caste", "gender", "health condition")
CATEGORY_P = (0.33, 0.25, 0.24, 0.18)

# canonical entity -> surface variants annotators write; grouped by category.
ENTITIES: dict[str, dict[str, list[str]]] = {
    "group background": {
        "immigrants": ["immigrants", "Immigrants", "immigrant", "migrants"],
        "refugees": ["refugees", "Refugees", "refugee"],
        "Black people": ["Black people", "black people", "Blacks", "black folks"],
        "Asian people": ["Asian people", "Asians", "asian people"],
        "Chinese people": ["Chinese people", "the Chinese", "chinese people"],
        "Mexicans": ["Mexicans", "Mexican people", "mexicans"],
        "Arabs": ["Arabs", "Arab people", "arabs"],
        "poor people": ["poor people", "the poor", "Poor people"],
    },
    "religion and caste": {
        "Muslim people": ["Muslim people", "Muslims", "muslims", "Muslim"],
        "Jewish people": ["Jewish people", "Jews", "jews", "Jewish community"],
        "Christians": ["Christians", "christians", "Christian people"],
        "Hindus": ["Hindus", "Hindu people", "hindus"],
        "Dalits": ["Dalits", "dalits", "Dalit people"],
    },
    "gender": {
        "women": ["women", "woman", "Women", "females"],
        "Black women": ["Black women", "black women", "Black woman"],
        "LGBTQ people": ["LGBTQ people", "LGBTQ community", "LGBTQ+ people", "lgbtq people"],
        "transgender people": ["transgender people", "trans people", "Transgender people"],
        "gay men": ["gay men", "Gay men", "gay males"],
        "feminists": ["feminists", "Feminists", "feminist"],
    },
    "health condition": {
        "disabled people": ["disabled people", "people with disabilities", "Disabled people"],
        "autistic people": ["autistic people", "Autistic people", "people with autism"],
        "people with Down syndrome": ["people with Down syndrome", "Down syndrome people"],
        "obese people": ["obese people", "fat people", "Obese people"],
        "mentally ill people": ["mentally ill people", "people with mental illness"],
    },
}

# Project lexicon: Table 8 seed plus the variants above that are referentially equivalent.
LEXICON: dict[str, str] = dict(TABLE8_LEXICON)
for _group in ENTITIES.values():
    for _canonical, _variants in _group.items():
        for _v in _variants:
            LEXICON.setdefault(_v, _canonical)
for _canonical in [c for g in ENTITIES.values() for c in g]:
    LEXICON.pop(_canonical, None)  # canonical forms must not be variants (no chains)


def _word_vocabulary(rng: np.random.Generator, size: int) -> list[str]:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lengths = rng.integers(2, 9, size=size)
    words = {"".join(rng.choice(letters, size=k)) for k in lengths}
    return sorted(words)


def generate(n: int, seed: int) -> tuple[list[dict], list[dict], list[str]]:
    """Two annotators' meme3w records for n items, plus the item texts."""
    rng = np.random.default_rng(seed)
    vocab = _word_vocabulary(rng, 5000)
    punct = ["", "", "", ",", "!", "?", "..."]

    truth_harmful = rng.random(n) < 0.5
    truth_cat = rng.choice(len(CATEGORIES), size=n, p=CATEGORY_P)
    ent_names = {c: list(ENTITIES[c]) for c in CATEGORIES}
    truth_ent = [ent_names[CATEGORIES[c]][rng.integers(len(ent_names[CATEGORIES[c]]))] for c in truth_cat]
    has_mention = rng.random(n) < 0.6
    n_boxes = rng.choice(4, size=n, p=(0.35, 0.45, 0.15, 0.05))

    texts: list[str] = []
    spans: list[tuple[int, int]] = []  # word span of the entity inside the text words
    text_words: list[list[str]] = []
    lengths = rng.integers(6, 25, size=n)
    positions = rng.random(n)
    word_idx = rng.integers(0, len(vocab), size=int(lengths.sum()))
    offset = 0
    for i in range(n):
        words = [vocab[j] for j in word_idx[offset : offset + lengths[i]]]
        offset += lengths[i]
        ent_words = truth_ent[i].split()
        at = int(positions[i] * len(words))
        words[at:at] = ent_words
        text_words.append(words)
        spans.append((at, at + len(ent_words)))
        texts.append(" ".join(words) + punct[i % len(punct)])

    base_boxes = []
    xy = rng.integers(0, 700, size=(n, 3, 2))
    wh = rng.integers(60, 300, size=(n, 3, 2))
    for i in range(n):
        base_boxes.append(
            [
                [
                    int(xy[i, k, 0]),
                    int(xy[i, k, 1]),
                    int(min(1000, xy[i, k, 0] + wh[i, k, 0])),
                    int(min(1000, xy[i, k, 1] + wh[i, k, 1])),
                ]
                for k in range(n_boxes[i])
            ]
        )

    def annotate(r: np.random.Generator) -> list[dict]:
        flip = r.random(n) < 0.025
        cat_err = r.random(n) < 0.035
        other_cat = r.integers(0, len(CATEGORIES), size=n)
        ent_roll = r.random(n)
        men_roll = r.random(n)
        box_roll = r.random(n)
        jitter = r.normal(0.0, 6.0, size=(n, 3, 4))
        out = []
        for i in range(n):
            harmful = bool(truth_harmful[i] ^ flip[i])
            if not harmful:
                out.append(
                    {
                        "label": "non-harmful",
                        "target_category": None,
                        "target_entity": None,
                        "text_mention": None,
                        "visual_region": [],
                    }
                )
                continue
            c = int(other_cat[i]) if cat_err[i] else int(truth_cat[i])
            canonical = truth_ent[i]
            group = ENTITIES[CATEGORIES[truth_cat[i]]]
            if ent_roll[i] < 0.86:
                variants = group[canonical]
                entity = variants[int(ent_roll[i] * 1000) % len(variants)]
            elif ent_roll[i] < 0.92:  # a related but distinct entity (subgroup, neighbour)
                names = list(group)
                entity = names[int(ent_roll[i] * 997) % len(names)]
            else:
                entity = canonical.split()[0]  # partial
            mention = None
            if has_mention[i] or men_roll[i] > 0.97:
                s, e = spans[i]
                words = text_words[i]
                if men_roll[i] < 0.72:
                    pass
                elif men_roll[i] < 0.82:
                    s = max(0, s - 1)
                elif men_roll[i] < 0.90:
                    e = min(len(words), e + 2)
                elif men_roll[i] < 0.94:
                    s, e = max(0, s - 3), max(1, s - 1)
                else:
                    s = e = 0
                mention = " ".join(words[s:e]) or None
            boxes = []
            for k, b in enumerate(base_boxes[i]):
                j = jitter[i, k]
                x1 = int(np.clip(b[0] + j[0], 0, 990))
                y1 = int(np.clip(b[1] + j[1], 0, 990))
                boxes.append([x1, y1, int(np.clip(b[2] + j[2], x1 + 5, 1000)), int(np.clip(b[3] + j[3], y1 + 5, 1000))])
            if boxes and box_roll[i] < 0.06:
                boxes = boxes[:-1]
            elif box_roll[i] > 0.97:
                boxes.append([100, 100, 400, 500])
            out.append(
                {
                    "label": "harmful",
                    "target_category": CATEGORIES[c],
                    "target_entity": entity,
                    "text_mention": mention,
                    "visual_region": boxes,
                }
            )
        return out

    return annotate(np.random.default_rng(seed + 1)), annotate(np.random.default_rng(seed + 2)), texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
        cpus = sorted(os.sched_getaffinity(0))
    else:  # pragma: no cover - non-Linux
        cpus = ["?"]
    print(
        f"metrics benchmark: n={args.n:,} items x 2 annotators, seed={args.seed}, "
        f"pinned to CPU {cpus}, numpy {np.__version__}"
    )

    t0 = time.perf_counter()
    ann_a, ann_b, _texts = generate(args.n, args.seed)
    print(f"generate records                 {time.perf_counter() - t0:8.2f} s  (not counted)")

    t0 = time.perf_counter()
    cols = {}
    for f in ("label", "target_category", "target_entity", "text_mention", "visual_region"):
        cols[f] = ([r[f] for r in ann_a], [r[f] for r in ann_b])
    lexicon = Lexicon(LEXICON)
    print(f"extract columns + build lexicon  {time.perf_counter() - t0:8.2f} s  (not counted)")
    print()

    timings: dict[str, float] = {}

    def timed(name: str, fn):
        t = time.perf_counter()
        value = fn()
        timings[name] = time.perf_counter() - t
        return value

    k_label = timed("label kappa", lambda: cohen_kappa(*cols["label"]))
    k_cat = timed("category kappa", lambda: cohen_kappa(*cols["target_category"]))
    ent = timed("entity f1_rel", lambda: f1_rel_batch(*cols["target_entity"], lexicon))
    men = timed("mention token_f1", lambda: token_f1_batch(*cols["text_mention"]))
    reg = timed("region enclosing_iou", lambda: enclosing_iou_batch(*cols["visual_region"]))
    total = sum(timings.values())

    either = np.array([a == "harmful" or b == "harmful" for a, b in zip(*cols["label"])])
    print(f"{'metric':34s}{'seconds':>9s}   value (all items | items either annotator marked harmful)")
    print(f"{'label kappa':34s}{timings['label kappa']:9.3f}   {k_label:.6f}")
    print(f"{'category kappa (None = category)':34s}{timings['category kappa']:9.3f}   {k_cat:.6f}")
    print(
        f"{'entity f1_rel':34s}{timings['entity f1_rel']:9.3f}   mean {ent.mean():.4f} | {ent[either].mean():.4f};"
        f" share>=0.7 {np.mean(ent >= 0.7):.4f} | {np.mean(ent[either] >= 0.7):.4f}"
    )
    print(
        f"{'mention token_f1':34s}{timings['mention token_f1']:9.3f}   mean {men.mean():.4f} | {men[either].mean():.4f}"
    )
    print(
        f"{'region enclosing_iou':34s}{timings['region enclosing_iou']:9.3f}   share>=0.75 {np.mean(reg >= 0.75):.4f} |"
        f" {np.mean(reg[either] >= 0.75):.4f}; share>=0.5 {np.mean(reg >= 0.5):.4f} | {np.mean(reg[either] >= 0.5):.4f};"
        f" mean IoU {reg.mean():.4f} | {reg[either].mean():.4f}"
    )
    print(f"{'TOTAL (all agreement fields)':34s}{total:9.3f}   goal <= 10 s: {'OK' if total <= 10 else 'MISSED'}")
    print()

    # SPEC: "every figure carries n and a bootstrap 95% CI" -- the cost of those CIs.
    t = time.perf_counter()
    cis = {
        "label kappa": kappa_ci(*cols["label"]),
        "category kappa": kappa_ci(*cols["target_category"]),
        "entity mean f1_rel": mean_ci(ent),
        "entity share>=0.7": mean_ci(ent >= 0.7),
        "mention mean token_f1": mean_ci(men),
        "region share>=0.75": mean_ci(reg >= 0.75),
        "region share>=0.5": mean_ci(reg >= 0.5),
    }
    t_ci = time.perf_counter() - t
    print(f"bootstrap 95% CIs, 10,000 resamples each, n={args.n:,} (all items): {t_ci:.3f} s")
    print("  " + "; ".join(f"{k} [{lo:.4f}, {hi:.4f}]" for k, (lo, hi) in cis.items()))
    # Mean IoU is continuous (nearly every value distinct), so its bootstrap cannot use the
    # multinomial shortcut and costs O(resamples * items); timed on at most 100k items.
    m = min(args.n, 100_000)
    t = time.perf_counter()
    lo, hi = mean_ci(reg[:m])
    t_iou = time.perf_counter() - t
    print(
        f"  region mean IoU (continuous, index resampling) on {m:,} items: [{lo:.4f}, {hi:.4f}]"
        f" in {t_iou:.3f} s (scales linearly with items)"
    )
    print()

    from sklearn.metrics import cohen_kappa_score

    la, lb = cols["label"]
    t = time.perf_counter()
    k_sklearn = cohen_kappa_score(la, lb)
    t_sklearn = time.perf_counter() - t
    ratio = t_sklearn / timings["label kappa"]
    diff = abs(k_sklearn - k_label)
    print(f"label kappa vs scikit-learn cohen_kappa_score (the same {args.n:,} string labels):")
    print(f"  metrics.agreement.cohen_kappa   {timings['label kappa']:9.3f} s   {k_label!r}")
    print(f"  sklearn cohen_kappa_score       {t_sklearn:9.3f} s   {k_sklearn!r}")
    print(
        f"  speed ratio {ratio:.1f}x (goal >= 10x: {'OK' if ratio >= 10 else 'MISSED'});"
        f" max abs diff {diff:.3e} (goal <= 1e-12: {'OK' if diff <= 1e-12 else 'MISSED'})"
    )

    ca = ["<none>" if v is None else v for v in cols["target_category"][0]]
    cb = ["<none>" if v is None else v for v in cols["target_category"][1]]
    t = time.perf_counter()
    k_cat_sklearn = cohen_kappa_score(ca, cb)
    t_cat_sklearn = time.perf_counter() - t
    print(
        f"  category (None -> '<none>' for sklearn): sklearn {t_cat_sklearn:.3f} s, ratio"
        f" {t_cat_sklearn / timings['category kappa']:.1f}x, abs diff {abs(k_cat_sklearn - k_cat):.3e}"
    )

    codes_a = np.array([v == "harmful" for v in la], dtype=np.int8)
    codes_b = np.array([v == "harmful" for v in lb], dtype=np.int8)
    t = time.perf_counter()
    k_int = cohen_kappa(codes_a, codes_b)
    t_int = time.perf_counter() - t
    t = time.perf_counter()
    k_int_sklearn = cohen_kappa_score(codes_a, codes_b)
    t_int_sklearn = time.perf_counter() - t
    print(
        f"  integer-coded labels (int8 arrays): ours {t_int:.4f} s, sklearn {t_int_sklearn:.3f} s, ratio"
        f" {t_int_sklearn / t_int:.1f}x, abs diff {abs(k_int_sklearn - k_int):.3e}"
    )


if __name__ == "__main__":
    main()
