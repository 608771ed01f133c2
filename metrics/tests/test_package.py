"""Package-level guarantees: no Django, the SPEC's public names, a runnable benchmark."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
from pathlib import Path

import pytest

import metrics
from metrics import agreement, bootstrap, boxes, entity, records, text

PACKAGE = Path(metrics.__file__).resolve().parent
REPO = PACKAGE.parent


def test_no_django_import_anywhere_in_metrics() -> None:
    for path in PACKAGE.rglob("*.py"):
        source = path.read_text(encoding="utf-8")
        assert not re.search(r"^\s*(import|from)\s+django\b", source, re.M), path
    code = (
        "import sys, metrics.text, metrics.entity, metrics.boxes, metrics.agreement, "
        "metrics.records, metrics.bootstrap, metrics.resample, metrics.captions, metrics.checklist; "
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('django', 'rest_framework')); "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True, env={"PATH": "/usr/bin:/bin"})


@pytest.mark.parametrize(
    ("module", "name", "params"),
    [
        (text, "normalize", ["s"]),
        (text, "tokens", ["s"]),
        (text, "token_f1", ["a", "b"]),
        (text, "exact_match", ["a", "b"]),
        (entity, "canonicalize", ["s", "lexicon"]),
        (entity, "f1_rel", ["a", "b", "lexicon"]),
        (boxes, "iou", ["a", "b"]),
        (boxes, "enclosing", ["boxes"]),
        (boxes, "enclosing_iou", ["a", "b"]),
        (boxes, "bipartite_match", ["a", "b", "tau"]),
        (boxes, "set_iou", ["a", "b"]),
        (agreement, "cohen_kappa", ["a", "b"]),
        (agreement, "per_label_kappa", ["a", "b", "labels"]),
        (agreement, "macro_pairwise_kappa", ["annotations", "labels"]),
        (agreement, "krippendorff_alpha", ["data", "level", "value_domain"]),
        (records, "jra", ["preds", "golds", "lexicon", "thresholds"]),
        (records, "field_scores", ["preds", "golds", "lexicon"]),
        (bootstrap, "paired_ci", ["scores_a", "scores_b", "n", "seed", "level"]),
        (bootstrap, "mean_ci", ["scores", "n", "seed", "level"]),
    ],
)
def test_spec_signatures(module, name: str, params: list[str]) -> None:
    """SPEC section 3 fixes names and argument order: outside scripts call them."""
    fn = getattr(module, name)
    assert list(inspect.signature(fn).parameters) == params
    assert fn.__doc__ and len(fn.__doc__) > 80
    assert name in module.__all__


def test_new_modules_export_documented_functions() -> None:
    from metrics import captions, checklist, resample

    for module in (resample, captions, checklist):
        for name in module.__all__:
            obj = getattr(module, name)
            if callable(obj):
                assert obj.__doc__ and len(obj.__doc__) > 40, f"{module.__name__}.{name}"
    p = inspect.signature(resample.bootstrap_figures).parameters
    assert (p["n"].default, p["seed"].default, p["level"].default) == (1000, 0, 0.95)


def test_spec_defaults() -> None:
    assert inspect.signature(records.jra).parameters["thresholds"].default == (1, 0.7, 0.7, 0.5)
    p = inspect.signature(bootstrap.paired_ci).parameters
    assert (p["n"].default, p["seed"].default, p["level"].default) == (10000, 0, 0.95)
    assert inspect.signature(agreement.krippendorff_alpha).parameters["level"].default == "nominal"


def test_benchmark_runs_small() -> None:
    out = subprocess.run(
        [sys.executable, str(REPO / "bench" / "metrics.py"), "--n", "3000"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    assert "TOTAL (all agreement fields)" in out
    assert "max abs diff 0.000e+00" in out or "goal <= 1e-12: OK" in out


def test_agreement_scale_bench_runs_small() -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(REPO / "bench" / "agreement_scale.py"),
            "--items",
            "3000",
            "--resamples",
            "60",
            "--sub",
            "400",
            "--old-resamples",
            "3",
        ],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
        timeout=300,
    ).stdout
    assert out.count("undefined pattern identical") == 2
    diffs = [
        float(line.split("max |old - new| = ")[1].split(",")[0])
        for line in out.splitlines()
        if "max |old - new|" in line
    ]
    assert len(diffs) == 2 and max(diffs) <= 1e-12
    assert "TOTAL meme3w-like" in out
