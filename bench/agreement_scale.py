"""Agreement reports with bootstrap CIs at 1M items, on one core (metrics.resample).

    python bench/agreement_scale.py [--items 1000000] [--resamples 1000] [--sub 5000]
                                    [--old-resamples 40] [--seed 0]

Two synthetic projects, every figure with a --resamples CI from ONE shared weight matrix:

* meme3w-like: 2 annotators per item from a pool of 20; label (harmful / non-harmful),
  target_category (conditional: 4 categories, None when non-harmful), per-item continuous
  pair scores (entity F1_rel, mention token-F1, region IoU). Figures: label and category
  kappa by slot, mean kappa over annotator pairs (people), nominal alpha, observed
  agreement; means and shares of the three scores on the items both marked harmful.
* aha-like: 3 annotators per item from a pool of 20; is_hateful (binary) and three
  multi-label fields (hateful_type 8 labels, targeted_categories 10, non_hateful_type 3,
  each conditional on is_hateful). Figures: mean pairwise kappa and alpha of is_hateful;
  per field macro kappa over (annotator pair, label), mean binary alpha over labels and the
  identical-set share; all observed agreements.

Then, on a --sub item subsample: the old per-resample recompute (the metrics.agreement
function on data[idx], what quality.compute does) against the new weighted sums, as a time
ratio and a max difference over the same resamples, and the krippendorff package against
metrics.agreement.krippendorff_alpha. Prints figures and times; asserts nothing about time.
"""

from __future__ import annotations

import os

# One core: pin BLAS/OpenMP pools before numpy is imported.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse
import resource
import sys
import time
import tracemalloc
import warnings
from functools import partial
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]

import krippendorff

from metrics import resample as rs
from metrics.agreement import krippendorff_alpha
from metrics.bootstrap import resample_indices
from metrics.tests import recompute

POOL = 20
CATEGORIES = ("group background", "religion and caste", "gender", "health condition", None)
HATEFUL_TYPES = ("Mocking", "Incitement", "Dehumanization", "Slurs", "Contempt", "Inferiority", "Exclusion", "Other")
TARGETS = (
    "ethnicity",
    "race",
    "nationality",
    "immigration status",
    "religion",
    "caste",
    "sex",
    "gender identity",
    "sexual orientation",
    "disability or disease",
)
NON_HATEFUL = ("Humor", "Sarcasm", "Other")


# ---------------------------------------------------------------------------- data


def distinct_raters(rng: np.random.Generator, n: int, per_item: int) -> np.ndarray:
    first = rng.integers(0, POOL, n)
    if per_item == 2:
        return np.column_stack([first, (first + rng.integers(1, POOL, n)) % POOL])
    d1 = rng.integers(1, POOL - 1, n)
    d2 = rng.integers(d1 + 1, POOL)
    return np.column_stack([first, (first + d1) % POOL, (first + d2) % POOL])


def noisy(rng: np.random.Generator, truth: np.ndarray, raters: np.ndarray, flip: np.ndarray, k: int) -> np.ndarray:
    """Per slot: the true code, replaced with a random one at the rater's error rate."""
    out = np.repeat(truth[:, None], raters.shape[1], axis=1)
    wrong = rng.random(out.shape) < flip[raters]
    out[wrong] = rng.integers(0, k, int(wrong.sum()))
    return out


def meme3w_data(n: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    raters = distinct_raters(rng, n, 2)
    harmful_truth = (rng.random(n) < 0.5).astype(np.intp)  # 1 = harmful
    label = 1 - noisy(rng, 1 - harmful_truth, raters, rng.uniform(0.02, 0.1, POOL), 2)  # code 0 = harmful
    label_codes = 1 - label  # 0 harmful, 1 non-harmful
    cat_truth = rng.choice(4, n, p=[0.33, 0.25, 0.24, 0.18])
    cat = noisy(rng, cat_truth, raters, rng.uniform(0.03, 0.12, POOL), 4)
    cat[label_codes == 1] = 4  # None: non-harmful has no category
    both = (label_codes == 0).all(axis=1)
    scores = {}
    for name, p_exact in (("entity", 0.75), ("mention", 0.7), ("region", 0.3)):
        s = np.where(rng.random(n) < p_exact, 1.0, rng.beta(2.0, 1.5, n))
        scores[name] = np.where(both, s, np.nan)
    return {"raters": raters, "label": label_codes, "category": cat, "both_harmful": both, "scores": scores}


def aha_data(n: int, seed: int) -> dict:
    rng = np.random.default_rng(seed + 1)
    raters = distinct_raters(rng, n, 3)
    hateful = 1 - noisy(rng, (rng.random(n) >= 0.37).astype(np.intp), raters, rng.uniform(0.01, 0.06, POOL), 2)
    out = {"raters": raters, "is_hateful": 1 - hateful}  # code 0 = Hateful, 1 = Not-Hateful
    for field, labels, applies, p in (
        ("hateful_type", HATEFUL_TYPES, hateful == 1, [0.55, 0.12, 0.15, 0.1, 0.2, 0.12, 0.02, 0.03]),
        ("targeted_categories", TARGETS, hateful == 1, [0.2, 0.1, 0.15, 0.05, 0.25, 0.03, 0.15, 0.05, 0.08, 0.06]),
        ("non_hateful_type", NON_HATEFUL, hateful == 0, [0.45, 0.45, 0.2]),
    ):
        truth = rng.random((n, 1, len(labels))) < np.asarray(p)
        flip = rng.random((n, 3, len(labels))) < rng.uniform(0.02, 0.08, POOL)[raters][..., None]
        members = (truth ^ flip) & applies[..., None]
        out[field] = (members, labels, applies.all(axis=1))
    return out


# ---------------------------------------------------------------------------- figures


def meme3w_figures(d: dict) -> dict[str, rs.Contributions]:
    raters, both = d["raters"], d["both_harmful"]
    ids = tuple(range(POOL))
    label = rs.Ratings(raters, d["label"], ids, ("harmful", "non-harmful"))
    cat = rs.Ratings(raters, d["category"], ids, CATEGORIES)
    f = {
        "label kappa (slots)": rs.kappa_contributions(d["label"][:, 0], d["label"][:, 1]),
        "label mean pair kappa": rs.pairwise_kappa_contributions(label),
        "label alpha": rs.alpha_contributions(label),
        "label agreement": rs.mean_contributions((d["label"][:, 0] == d["label"][:, 1]).astype(float)),
        "category kappa (slots)": rs.kappa_contributions(d["category"][:, 0], d["category"][:, 1], both),
        "category mean pair kappa": rs.pairwise_kappa_contributions(cat, both),
        "category alpha": rs.alpha_contributions(cat, both),
        "category agreement": rs.mean_contributions((d["category"][:, 0] == d["category"][:, 1]).astype(float), both),
    }
    s = d["scores"]
    f["entity mean F1_rel"] = rs.mean_contributions(s["entity"], both)
    f["entity share >= 0.7"] = rs.share_contributions(s["entity"], 0.7, both)
    f["mention mean token-F1"] = rs.mean_contributions(s["mention"], both)
    f["mention share >= 0.7"] = rs.share_contributions(s["mention"], 0.7, both)
    f["region share IoU >= 0.75"] = rs.share_contributions(s["region"], 0.75, both)
    f["region share IoU >= 0.5"] = rs.share_contributions(s["region"], 0.5, both)
    f["region mean IoU"] = rs.mean_contributions(s["region"], both)
    return f


def aha_figures(d: dict) -> dict[str, rs.Contributions]:
    raters = d["raters"]
    ids = tuple(range(POOL))
    hateful = rs.Ratings(raters, d["is_hateful"], ids, ("Hateful", "Not-Hateful"))
    same = (d["is_hateful"] == d["is_hateful"][:, :1]).all(axis=1)
    f = {
        "is_hateful mean pair kappa": rs.pairwise_kappa_contributions(hateful),
        "is_hateful alpha": rs.alpha_contributions(hateful),
        "is_hateful agreement": rs.mean_contributions(same.astype(float)),
    }
    for field in ("hateful_type", "targeted_categories", "non_hateful_type"):
        members, labels, scope = d[field]
        lr = rs.LabelRatings(raters, members, ids, labels)
        f[f"{field} macro pair kappa"] = rs.pairwise_label_kappa_contributions(lr, scope)
        f[f"{field} mean label alpha"] = rs.label_alpha_contributions(lr, scope)
        identical = (members == members[:, :1]).all(axis=(1, 2))
        f[f"{field} identical sets"] = rs.mean_contributions(identical.astype(float), scope)
    return f


def run_report(name: str, build, data: dict, resamples: int, seed: int) -> tuple[dict, float]:
    t0 = time.process_time()
    figures = build(data)
    t_build = time.process_time() - t0
    t0 = time.process_time()
    est = rs.bootstrap_figures(figures, n=resamples, seed=seed)
    t_boot = time.process_time() - t0
    nnz = sum(c.matrix.nnz for c in figures.values() if hasattr(c.matrix, "nnz"))
    dense = sum(c.matrix.shape[1] for c in figures.values() if not hasattr(c.matrix, "nnz"))
    mb = (
        sum(
            c.matrix.data.nbytes + c.matrix.indices.nbytes + c.matrix.indptr.nbytes
            if hasattr(c.matrix, "nnz")
            else c.matrix.nbytes
            for c in figures.values()
        )
        / 1e6
    )
    n_items = data["raters"].shape[0]
    print(
        f"{name}: {len(figures)} figures, {resamples:,} resamples, one weight matrix; "
        f"contributions: {dense} dense columns, {nnz / n_items:.1f} sparse nonzeros per item, {mb:,.0f} MB "
        f"(the engine holds one stacked copy, about as large, plus a {min(32, resamples)} x {n_items:,} uint8 "
        f"weight block = {min(32, resamples) * n_items / 1e6:.0f} MB)"
    )
    print(f"  {'figure':34s}{'value':>10s}   {'95% CI':22s}{'n':>10s}{'dropped':>9s}")
    for key, e in est.items():
        ci = f"[{e.ci[0]:.4f}, {e.ci[1]:.4f}]" if e.ci else "-"
        val = f"{e.value:.4f}" if e.value is not None else "None"
        print(f"  {key:34s}{val:>10s}   {ci:22s}{e.n_items:>10,}{e.undefined:>9}")
    total = t_build + t_boot
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"  CPU: contributions {t_build:.2f} s + bootstrap {t_boot:.2f} s = {total:.2f} s "
        f"(goal <= 60 s: {'OK' if total <= 60 else 'MISSED'}); process peak RSS so far {rss:,.0f} MB "
        f"(both projects' synthetic data included)"
    )
    print()
    return est, total


def subsample(d: dict, m: int) -> dict:
    out = {}
    for k, v in d.items():
        if isinstance(v, np.ndarray):
            out[k] = v[:m]
        elif isinstance(v, tuple):
            out[k] = (v[0][:m], v[1], v[2][:m])
        else:
            out[k] = {name: x[:m] for name, x in v.items()}
    return out


def _macro(rows: list, labels: tuple, scope: np.ndarray, idx: np.ndarray) -> float:
    return recompute.macro_label_kappa(rows, labels, scope, idx)


def _label_alpha(rows: list, labels: tuple, scope: np.ndarray, idx: np.ndarray) -> float:
    return recompute.label_alpha(rows, labels, scope, idx)


def old_recompute(kind: str, d: dict, idx_list: list[np.ndarray]) -> dict[str, list[float]]:
    """The figures of one report, recomputed per resample with the plain metrics functions."""
    ids = tuple(range(POOL))
    raters = d["raters"]
    out: dict[str, list[float]] = {}
    if kind == "meme3w":
        both = d["both_harmful"]
        label = rs.Ratings(raters, d["label"], ids, ("harmful", "non-harmful"))
        cat = rs.Ratings(raters, d["category"], ids, CATEGORIES)
        la, lb = d["label"][:, 0].tolist(), d["label"][:, 1].tolist()
        ca, cb = d["category"][:, 0].tolist(), d["category"][:, 1].tolist()
        items_l = [dict(zip(r.tolist(), v.tolist())) for r, v in zip(raters, d["label"])]
        items_c = [dict(zip(r.tolist(), v.tolist())) for r, v in zip(raters, d["category"])]
        rows_l, rows_c = recompute.alpha_rows(label), recompute.alpha_rows(cat)
        s = d["scores"]
        jobs = {
            "label kappa (slots)": lambda i: recompute.kappa(la, lb, None, i),
            "label mean pair kappa": lambda i: recompute.pairwise_kappa(items_l, None, i),
            "label alpha": lambda i: recompute.alpha(rows_l, None, i),
            "category kappa (slots)": lambda i: recompute.kappa(ca, cb, both, i),
            "category mean pair kappa": lambda i: recompute.pairwise_kappa(items_c, both, i),
            "category alpha": lambda i: recompute.alpha(rows_c, both, i),
            "entity mean F1_rel": lambda i: recompute.mean(s["entity"], both, i),
            "region share IoU >= 0.75": lambda i: recompute.share(s["region"], 0.75, both, i),
        }
    else:
        hateful = rs.Ratings(raters, d["is_hateful"], ids, ("Hateful", "Not-Hateful"))
        items_h = [dict(zip(r.tolist(), v.tolist())) for r, v in zip(raters, d["is_hateful"])]
        rows_h = recompute.alpha_rows(hateful)
        jobs = {
            "is_hateful mean pair kappa": lambda i: recompute.pairwise_kappa(items_h, None, i),
            "is_hateful alpha": lambda i: recompute.alpha(rows_h, None, i),
        }
        for field in ("hateful_type", "targeted_categories", "non_hateful_type"):
            members, labels, scope = d[field]
            rows = rs.LabelRatings(raters, members, ids, labels).by_rater()
            jobs[f"{field} macro pair kappa"] = partial(_macro, rows, labels, scope)
            jobs[f"{field} mean label alpha"] = partial(_label_alpha, rows, labels, scope)
    for key, fn in jobs.items():
        out[key] = [fn(i) for i in idx_list]
    return out


def compare_old_new(kind: str, build, d: dict, resamples: int, old_resamples: int, seed: int) -> None:
    m = d["raters"].shape[0]
    t0 = time.process_time()
    est = rs.bootstrap_figures(build(d), n=resamples, seed=seed)
    t_new = time.process_time() - t0
    idx_list = list(resample_indices(m, old_resamples, seed))
    t0 = time.process_time()
    old = old_recompute(kind, d, idx_list)
    t_old = time.process_time() - t0
    per_old = t_old / old_resamples
    diff = max(
        float(np.nanmax(np.abs(np.asarray(v) - est[k].resampled[:old_resamples]), initial=0.0)) for k, v in old.items()
    )
    same_nan = all(
        (np.isnan(np.asarray(v)) == np.isnan(est[k].resampled[:old_resamples])).all() for k, v in old.items()
    )
    print(f"  {kind}: {m:,} items, the {len(old)} figures the old path recomputes (of {len(est)}):")
    print(
        f"    old recompute  {per_old * 1e3:9.2f} ms per resample (measured on {old_resamples}; "
        f"{per_old * resamples:.1f} s for {resamples:,})"
    )
    print(
        f"    new, all {len(est)} figures {t_new / resamples * 1e3:6.3f} ms per resample ({t_new:.2f} s for {resamples:,})"
    )
    print(
        f"    ratio old/new {per_old * resamples / t_new:,.0f}x; same resamples: max |old - new| = {diff:.1e}, "
        f"undefined pattern {'identical' if same_nan else 'DIFFERENT'}"
    )


def kripp_compare(d: dict, m: int, full: int) -> None:
    ids = tuple(range(POOL))
    cases = [
        (
            "meme3w category (20 raters x items, 5 values)",
            m,
            rs.Ratings(d["meme3w"]["raters"][:m], d["meme3w"]["category"][:m], ids, CATEGORIES),
        ),
        (
            "aha is_hateful (20 raters x items, 2 values)",
            m,
            rs.Ratings(d["aha"]["raters"][:m], d["aha"]["is_hateful"][:m], ids, ("Hateful", "Not-Hateful")),
        ),
        (
            "meme3w category (20 raters x items, 5 values)",
            full,
            rs.Ratings(d["meme3w"]["raters"], d["meme3w"]["category"], ids, CATEGORIES),
        ),
    ]
    for name, size, ratings in cases:
        reps = 5 if size <= 100_000 else 1
        rows = recompute.alpha_rows(ratings)
        codes = np.full((POOL, size), np.nan)
        item, slot = np.nonzero(ratings.raters >= 0)
        codes[ratings.raters[item, slot], item] = ratings.codes[item, slot]
        t0 = time.process_time()
        for _ in range(reps):
            ours = krippendorff_alpha(rows, "nominal")
        t_ours = (time.process_time() - t0) / reps
        t0 = time.process_time()
        for _ in range(reps):
            ours_num = krippendorff_alpha(codes, "nominal")
        t_ours_num = (time.process_time() - t0) / reps
        t0 = time.process_time()
        for _ in range(reps):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                pkg = float(krippendorff.alpha(codes, level_of_measurement="nominal"))
        t_pkg = (time.process_time() - t0) / reps
        tracemalloc.start()
        krippendorff_alpha(codes, "nominal")
        peak_ours = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        tracemalloc.start()
        krippendorff.alpha(codes, level_of_measurement="nominal")
        peak_pkg = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        print(
            f"  {name}, {size:,} items: ours {t_ours * 1e3:.1f} ms (labels) / {t_ours_num * 1e3:.1f} ms (float codes), "
            f"package {t_pkg * 1e3:.1f} ms (float codes): package/ours {t_pkg / t_ours_num:.2f}x; "
            f"peak memory ours {peak_ours / 1e6:.1f} MB, package {peak_pkg / 1e6:.1f} MB; "
            f"|diff| {abs(ours - pkg):.1e} / {abs(ours_num - pkg):.1e}"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=1_000_000)
    ap.add_argument("--resamples", type=int, default=1000)
    ap.add_argument("--sub", type=int, default=5000)
    ap.add_argument("--old-resamples", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    t0 = time.perf_counter()
    data = {"meme3w": meme3w_data(args.items, args.seed), "aha": aha_data(args.items, args.seed)}
    print(
        f"agreement_scale: {args.items:,} items per project, {args.resamples:,} resamples, one core; "
        f"synthetic data generated in {time.perf_counter() - t0:.1f} s (not counted)\n"
    )
    _, t_meme = run_report("meme3w-like", meme3w_figures, data["meme3w"], args.resamples, args.seed)
    _, t_aha = run_report("aha-like", aha_figures, data["aha"], args.resamples, args.seed)

    m = min(args.sub, args.items)
    print(f"old per-resample recompute vs new weighted sums, {m:,}-item subsample:")
    compare_old_new(
        "meme3w", meme3w_figures, subsample(data["meme3w"], m), args.resamples, args.old_resamples, args.seed
    )
    compare_old_new("aha", aha_figures, subsample(data["aha"], m), args.resamples, args.old_resamples, args.seed)
    print()
    print("krippendorff package vs metrics.agreement.krippendorff_alpha (nominal):")
    kripp_compare(data, m, args.items)
    print()
    print(
        f"TOTAL meme3w-like {t_meme:.1f} s, aha-like {t_aha:.1f} s CPU at {args.items:,} items x {args.resamples:,} resamples"
    )


if __name__ == "__main__":
    main()
