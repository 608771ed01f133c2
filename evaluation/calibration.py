"""Calibration of the two LLM judges against human labels (MemeBench VIKR, Appendix A.2/B.2).

A lead uploads two human raters' pass/fail labels for a subset of a judged submission, per
checklist item or per layer, as CSV or JSONL:

* CSV with a header: ``item_id,rater,checklist_item,label`` (one checklist item per row) or
  ``item_id,rater,layer,label`` (one layer V/I/K/R per row); ``label`` is pass/fail
  (also 1/0, yes/no, true/false);
* JSONL: ``{"item_id": 12, "rater": 1, "items": {"V1": "pass", ...}}`` or
  ``{"item_id": 12, "rater": 2, "layers": {"V": "pass", "I": "fail", ...}}``.

``rater`` is 1 or 2. Labels per checklist item must cover every item of the layer they
decide (a layer passes only when all its items pass, as for the judges). A file with any
problem is refused as a whole, every problem named by line (at most MAX_LISTED listed).

**Human reference**: rater 1's labels (the paper's "independently human-labelled calibration
subset"); rater 2 measures human agreement (paper: 0.84). The report also gives every kappa
against the raters' *consensus* (the items where both raters agree on Success), labelled so.
Kappas: ``metrics.agreement.cohen_kappa`` (equal to sklearn's ``cohen_kappa_score``) with
percentile bootstrap 95% CIs (``kappa_ci``); Spearman's rho between the single-judge
leaderboards over every judged submission of the split (``scipy.stats.spearmanr``), its CI by
resampling items.
"""

from __future__ import annotations

import csv
import io
import json

import numpy as np
from django.db import transaction

from core.errors import Invalid
from evaluation.judging import judge_checklist
from evaluation.models import CalibrationSet, Submission
from evaluation.selectors import release_gold, release_plan, submission_scored, submissions_for_split
from metrics import evaluation as ev
from metrics.agreement import cohen_kappa, kappa_ci
from metrics.checklist import leaderboard_spearman, leaderboard_spearman_ci

MAX_BYTES = 5 << 20
MAX_ROWS = 200_000
MAX_LISTED = 50
RESAMPLES = 1000
RATERS = ("1", "2")
REFERENCE = "rater 1"


class _Problems:
    def __init__(self):
        self.items: list[dict] = []
        self.count = 0

    def add(self, line: int, message: str) -> None:
        self.count += 1
        if len(self.items) < MAX_LISTED:
            self.items.append({"line": line, "problem": message})


def _label(value) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    return ev.verdict(value) if isinstance(value, str) else None


def _rater(value) -> str | None:
    if isinstance(value, bool):
        return None
    text = str(value).strip().casefold().removeprefix("rater").strip() if isinstance(value, (int, str)) else ""
    return text if text in RATERS else None


def _rows(data: bytes, problems: _Problems):
    """(line, item_id, rater, level, key, raw label) from a CSV or JSONL file."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        problems.add(1, f"the file is not UTF-8 text (byte {exc.start})")
        return
    if "\x00" in text:
        problems.add(1, "the file holds NUL bytes: not a text file")
        return
    first = text.lstrip()[:1]
    if first in ("{", "["):
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except (ValueError, RecursionError):
                problems.add(lineno, "not JSON")
                continue
            if not isinstance(obj, dict):
                problems.add(lineno, "not a JSON object")
                continue
            groups = [(lvl, obj.get(k)) for lvl, k in (("item", "items"), ("layer", "layers")) if k in obj]
            if len(groups) != 1 or not isinstance(groups[0][1], dict) or not groups[0][1]:
                problems.add(lineno, 'needs one object "items" {checklist item: pass|fail} or "layers" {V: pass|fail}')
                continue
            level, labels = groups[0]
            for key, label in labels.items():
                yield lineno, obj.get("item_id"), obj.get("rater"), level, str(key), label
        return
    reader = csv.reader(io.StringIO(text))
    try:
        header = [h.strip().casefold() for h in next(reader)]
    except (StopIteration, csv.Error):
        problems.add(1, "the file is empty")
        return
    level = "item" if "checklist_item" in header else "layer" if "layer" in header else None
    need = ["item_id", "rater", "checklist_item" if level == "item" else "layer", "label"]
    if level is None or any(h not in header for h in need):
        problems.add(1, "the header must be item_id,rater,checklist_item,label or item_id,rater,layer,label")
        return
    col = {h: header.index(h) for h in need}
    try:
        for row in reader:
            lineno = reader.line_num
            if not any(c.strip() for c in row):
                continue
            if len(row) < len(header):
                problems.add(lineno, f"{len(row)} columns, the header has {len(header)}")
                continue
            yield (
                lineno,
                row[col["item_id"]].strip(),
                row[col["rater"]],
                level,
                row[col[need[2]]].strip(),
                row[col["label"]],
            )
    except csv.Error as exc:
        problems.add(reader.line_num, f"unreadable CSV ({exc})")


def calibration_labels_read(*, submission: Submission, data: bytes) -> tuple[dict, int]:
    """``({item_id: {rater: {layer letter: 0|1}}}, rows read)`` or Invalid naming every problem
    by line. Item ids must name items of the submission's split whose gold checklist is
    complete; checklist item ids and layers must be the item's."""
    if len(data) > MAX_BYTES:
        raise Invalid(f"The file was refused: it is larger than {MAX_BYTES >> 20} MB.", errors={"file": "too large"})
    plan = release_plan(submission.release)
    if plan.get("kind") != ev.CHECKLIST_JUDGES:
        raise Invalid("This release is not scored by LLM judges.", errors={"submission": "not a judged release"})
    index = release_gold(submission.release, submission.split)
    checklists = {str(g["item_id"]): judge_checklist(plan, g) for g in index.golds}
    letters = [letter for letter, _ in plan["layers"]]
    problems = _Problems()
    # (item, rater) -> level, {key: (label, line)}
    got: dict[tuple[str, str], tuple[str, dict]] = {}
    rows = 0
    for lineno, item_id, rater, level, key, raw in _rows(data, problems):
        rows += 1
        if rows > MAX_ROWS:
            problems.add(lineno, f"more than {MAX_ROWS} labels: split the file")
            break
        item_key = str(item_id).strip() if isinstance(item_id, (int, str)) and not isinstance(item_id, bool) else ""
        checklist = checklists.get(item_key)
        who = _rater(rater)
        label = _label(raw)
        if checklist is None:
            problems.add(lineno, f"item_id {str(item_id)[:40]!r} is not an item of the {submission.split} split")
            continue
        if not checklist.complete:
            problems.add(lineno, f"item {item_key} has an incomplete gold checklist: it is not scored")
            continue
        if who is None:
            problems.add(lineno, f"rater {str(rater)[:20]!r} must be 1 or 2")
            continue
        if label is None:
            problems.add(lineno, f"label {str(raw)[:20]!r} must be pass or fail")
            continue
        if level == "item":
            if key not in checklist.ids:
                problems.add(
                    lineno, f"{key[:40]!r} is not a checklist item of item {item_key} ({', '.join(checklist.ids)})"
                )
                continue
        elif key.upper() not in letters:
            problems.add(lineno, f"layer {key[:20]!r} must be one of {', '.join(letters)}")
            continue
        else:
            key = key.upper()
        prev_level, labels = got.setdefault((item_key, who), (level, {}))
        if prev_level != level:
            problems.add(lineno, f"item {item_key}, rater {who}: labels per checklist item and per layer are mixed")
            continue
        if key in labels:
            problems.add(lineno, f"item {item_key}, rater {who}: {key} labelled twice (first on line {labels[key][1]})")
            continue
        labels[key] = (label, lineno)
    out: dict[str, dict[str, dict[str, int]]] = {}
    for (item_key, who), (level, labels) in got.items():
        checklist = checklists[item_key]
        first_line = min(line for _, line in labels.values())
        layer_values = {}
        for letter, entries in checklist.layers:
            if level == "layer":
                if letter not in labels:
                    problems.add(first_line, f"item {item_key}, rater {who}: no label for layer {letter}")
                    continue
                layer_values[letter] = int(labels[letter][0])
            else:
                missing = [rid for rid, _ in entries if rid not in labels]
                if missing:
                    problems.add(first_line, f"item {item_key}, rater {who}: no label for {', '.join(missing)}")
                    continue
                layer_values[letter] = int(all(labels[rid][0] for rid, _ in entries))
        out.setdefault(item_key, {})[who] = layer_values
    if not problems.count and not any("1" in raters for raters in out.values()):
        problems.add(1, "no item is labelled by rater 1 (the human reference)")
    if problems.count:
        listed = "; ".join(f"line {p['line']}: {p['problem']}" for p in problems.items[:5])
        raise Invalid(
            f"The file was refused: {problems.count} problem(s). {listed}",
            errors={"file": problems.items},
            code="refused",
        )
    return out, rows


def calibration_create(*, user, submission: Submission, data: bytes, name: str = "") -> CalibrationSet:
    """Store a human-labelled subset of a judged submission with its report."""
    if (submission.scores or {}).get("judging") != "done":
        raise Invalid(
            "Judge the submission first: calibration compares the judges with the human labels.",
            errors={"submission": "not judged"},
        )
    labels, rows = calibration_labels_read(submission=submission, data=data)
    report = calibration_report(submission=submission, labels=labels)
    report["rows"] = rows
    with transaction.atomic():
        return CalibrationSet.objects.create(
            submission=submission, name=(name or "").strip()[:120], labels=labels, report=report, created_by=user
        )


def _success(layers: dict[str, int], letters: list[str]) -> int:
    return int(all(layers.get(x) == 1 for x in letters))


def _kappa(a: list[int], b: list[int]) -> dict:
    return {
        "kappa": cohen_kappa(a, b) if a else None,
        "ci": kappa_ci(a, b, n=RESAMPLES, seed=0) if a else None,
        "n": len(a),
    }


def calibration_report(*, submission: Submission, labels: dict) -> dict:
    """Kappa on Success of judge 1, judge 2 and their intersection against the human
    reference (rater 1; also against the raters' consensus), and between the two raters;
    per layer for the intersection; plus the single-judge leaderboards' Spearman rho."""
    scored, plan = submission_scored(submission)
    figs = scored.by_name()
    letters = [letter for letter, _ in plan["layers"]]
    position = {str(i): n for n, i in enumerate(scored.item_ids)}
    schemes = {"judge1": "judge1.", "judge2": "judge2.", "intersection": ""}
    ids = [k for k in labels if "1" in labels[k] and k in position and figs["success"].mask[position[k]]]
    ref = [_success(labels[k]["1"], letters) for k in ids]
    board = {name: [int(figs[f"{prefix}success"].values[position[k]]) for k in ids] for name, prefix in schemes.items()}
    both = [k for k in ids if "2" in labels[k]]
    r1 = [_success(labels[k]["1"], letters) for k in both]
    r2 = [_success(labels[k]["2"], letters) for k in both]
    consensus = [k for k, a, b in zip(both, r1, r2) if a == b]
    cons_ref = [_success(labels[k]["1"], letters) for k in consensus]
    layers = {}
    for letter in letters:
        human = [labels[k]["1"][letter] for k in ids]
        layers[letter] = _kappa(human, [int(figs[letter].values[position[k]]) for k in ids])
    return {
        "reference": REFERENCE,
        "n_items": len(ids),
        "n_both_raters": len(both),
        "n_consensus": len(consensus),
        "success_kappa": {name: _kappa(ref, b) for name, b in board.items()},
        "success_kappa_consensus": {
            name: _kappa(cons_ref, [int(figs[f"{prefix}success"].values[position[k]]) for k in consensus])
            for name, prefix in schemes.items()
        },
        "human_kappa": _kappa(r1, r2),
        "layer_kappa_intersection": layers,
        "human_success_rate": float(np.mean(ref)) if ref else None,
        "judge_success_rate": {name: float(np.mean(b)) if b else None for name, b in board.items()},
        "spearman": judges_spearman(submission=submission),
    }


def judges_spearman(*, submission: Submission) -> dict:
    """Spearman's rho between judge 1's and judge 2's leaderboards (Success and each layer)
    over every judged submission of the split, with a bootstrap CI over items."""
    subs = [
        s
        for s in submissions_for_split(release=submission.release, split=submission.split)
        if (s.scores or {}).get("judging") == "done"
    ]
    plan = release_plan(submission.release)
    out = {"n_submissions": len(subs), "figures": {}}
    if len(subs) < 2:
        return out
    scored = [submission_scored(s)[0].by_name() for s in subs]
    mask = scored[0]["success"].mask
    for name in plan.get("order", []):
        a = np.array([f[f"judge1.{name}"].values[mask] for f in scored])
        b = np.array([f[f"judge2.{name}"].values[mask] for f in scored])
        rho = leaderboard_spearman(dict(enumerate(a.mean(axis=1))), dict(enumerate(b.mean(axis=1))))
        ci = leaderboard_spearman_ci(a, b, n=RESAMPLES, seed=0) if rho is not None else None
        out["figures"][name] = {"rho": rho, "ci": list(ci) if ci else None}
    return out
