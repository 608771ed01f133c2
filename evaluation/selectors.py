"""Read paths of evaluation: a release's gold and plan (from its own files), leaderboards,
submissions, paired comparisons, worst items.

Gold is read from the release's ``records.jsonl``, never from the database: a release is
immutable while gold in the database moves on, and the offline ``evaluate.py`` reads the same
file. Every fetcher takes an access-checked project (projects.access) and scopes by it.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from functools import lru_cache

import numpy as np
from django.http import Http404

from evaluation.models import Source, Submission
from exports.models import Release
from exports.selectors import release_dir
from metrics import evaluation as ev
from metrics.checklist import leaderboard_spearman
from projects.evaluation import evaluation_plan
from projects.models import Project, Role

#: Who reads leaderboards (model identities included): SPEC section 4.
READERS = (Role.LEAD, Role.RESEARCHER)
SUBMITTERS = (Role.LEAD, Role.RESEARCHER)
LEADS = (Role.LEAD,)
#: Worst items listed for leads on a submission's page.
WORST_ITEMS = 20


def release_plan(release: Release) -> dict:
    """The release's evaluation.json; for a release built before it shipped one, the plan of
    its frozen schema (manifest) with the project's workflow."""
    path = release_dir(release) / "evaluation.json"
    if path.is_file():
        plan = json.loads(path.read_text(encoding="utf-8"))
        # The number is given at publication, after the files are written.
        plan["release"] = {"project": release.project.slug, "version": release.number}
        return plan
    manifest = release.manifest or {}
    project = release.project
    refs = project.get_workflow().reference_fields()
    return evaluation_plan(
        schema=manifest.get("schema") or project.schema,
        preset=(manifest.get("project") or {}).get("preset") or project.preset,
        reference_fields=refs,
        release={"project": project.slug, "version": release.number},
    )


def release_lexicon(release: Release) -> dict | None:
    path = release_dir(release) / "lexicon.json"
    if not path.is_file():
        return None
    return json.loads(path.read_text(encoding="utf-8")).get("entries")


@lru_cache(maxsize=8)
def _gold_index(path: str, mtime_ns: int, split: str) -> ev.GoldIndex:
    return ev.GoldIndex.from_jsonl(path, split)


def release_gold(release: Release, split: str) -> ev.GoldIndex:
    """Gold of one split of the release (cached per file: releases are immutable)."""
    path = release_dir(release) / "records.jsonl"
    if not path.is_file():
        raise Http404(f"Release v{release.number} has no records.jsonl")
    return _gold_index(str(path), path.stat().st_mtime_ns, split)


def release_splits(release: Release) -> list[str]:
    by_split = ((release.manifest or {}).get("counts") or {}).get("by_split") or {}
    return [s for s, n in by_split.items() if n] or ["test"]


def release_get_for_evaluation(*, project: Project, number) -> Release:
    try:
        return Release.objects.get(project=project, number=int(number))
    except (Release.DoesNotExist, TypeError, ValueError):
        raise Http404(f"No release v{number} in this project") from None


def split_check(release: Release, split: str) -> str:
    if split not in release_splits(release):
        raise Http404(f"Release v{release.number} has no {split!r} split with items")
    return split


# ------------------------------------------------------------------------------------------
# Submissions
# ------------------------------------------------------------------------------------------


def predictions_pack(predictions: dict) -> tuple[bytes, str]:
    raw = json.dumps(predictions, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode()
    return zlib.compress(raw, 6), hashlib.sha256(raw).hexdigest()


def predictions_unpack(submission: Submission) -> dict:
    return json.loads(zlib.decompress(bytes(submission.predictions)))


def submissions_for_split(*, release: Release, split: str):
    return Submission.objects.filter(release=release, split=split).defer("predictions").order_by("created_at", "id")


def submission_get(*, release: Release, submission_id) -> Submission:
    try:
        return Submission.objects.get(release=release, pk=int(submission_id))
    except (Submission.DoesNotExist, TypeError, ValueError):
        raise Http404("No such submission for this release") from None


def judged_predictions_lines(submission: Submission) -> list[dict]:
    """The stored predictions as a predictions file (a release header line first): for a VIKR
    submission they carry the judges' decisions, so the release's evaluate.py reproduces the
    figures from them."""
    release = submission.release
    header = {"concord_release": {"project": release.project.slug, "version": release.number}}
    stored = predictions_unpack(submission)
    rows = [{"item_id": int(k) if str(k).isdigit() else k, **v} for k, v in stored.items()]
    rows.sort(key=lambda r: (str(type(r["item_id"])), r["item_id"]))
    return [header, *rows]


def submission_scored(submission: Submission) -> tuple[ev.Scored, dict]:
    """Re-score a stored submission (deterministic): per-item scores for paired comparisons
    and the worst items."""
    release = submission.release
    plan = release_plan(release)
    index = release_gold(release, submission.split)
    stored = predictions_unpack(submission)
    preds = [stored.get(str(g.get("item_id"))) for g in index.golds]
    return ev.score(plan, index.golds, preds, lexicon=release_lexicon(release)), plan


# ------------------------------------------------------------------------------------------
# Leaderboard
# ------------------------------------------------------------------------------------------


def judge_slots(plan: dict) -> list[int]:
    """The judge slots of a judged plan (VIKR: [1, 2]), else []."""
    return list(range(1, int(plan.get("judges") or 2) + 1)) if plan.get("kind") == ev.CHECKLIST_JUDGES else []


def _judge_figure(name: str, slots: list[int]) -> bool:
    return any(name.startswith(f"judge{n}.") for n in slots)


def leaderboard_columns(plan: dict, submissions: list[Submission]) -> list[dict]:
    """The plan's columns first (the paper's table), then every other figure scored (a judged
    plan's single-judge figures have their own boards: judge_columns)."""
    seen: dict[str, str] = {}
    slots = judge_slots(plan)
    for s in submissions:
        for name, fig in (s.scores.get("figures") or {}).items():
            if not _judge_figure(name, slots):
                seen.setdefault(name, fig.get("label", name))
    order = [n for n in plan.get("order", []) if n in seen] + sorted(n for n in seen if n not in plan.get("order", []))
    return [{"key": n, "label": _column_label(n, seen[n])} for n in order]


def judge_columns(plan: dict, slot: int) -> list[dict]:
    """One judge's own board: the plan's columns as that judge alone scores them."""
    titles = {"success": "Success", "success_3of4": "3 of 4 layers"}
    return [
        {"key": f"judge{slot}.{name}", "label": titles.get(name) or f"{ev.LAYER_TITLES.get(name, name)} ({name})"}
        for name in plan.get("order", [])
    ]


def _column_label(name: str, label: str) -> str:
    field, _, metric = name.partition(".")
    return f"{field} {label}" if metric else label


def leaderboard(*, release: Release, split: str, sort: str | None = None, descending: bool = True) -> dict:
    """Rows of the release split's leaderboard, sorted by any column (default: the plan's
    primary figure). Model identities are in it: callers check READERS."""
    plan = release_plan(release)
    subs = list(submissions_for_split(release=release, split=split).select_related("provider"))
    columns = leaderboard_columns(plan, subs)
    keys = {c["key"] for c in columns}
    meta_keys = {"model_name", "source", "created_at", "missing", "malformed"}
    default = plan.get("primary") if plan.get("primary") in keys else (columns[0]["key"] if columns else "model_name")
    sort = sort if sort in keys | meta_keys else default
    rows = []
    for s in subs:
        figures = s.scores.get("figures") or {}
        counts = (s.report or {}).get("counts") or {}
        rows.append(
            {
                "id": s.pk,
                "model_name": s.model_name,
                "source": s.source,
                "source_label": Source(s.source).label,
                "description": s.description,
                "url": s.url,
                "created_at": s.created_at,
                "missing": counts.get("missing", s.scores.get("missing", 0)),
                "malformed": sum(((s.report or {}).get("malformed_fields") or {}).values()),
                "cells": [figures.get(c["key"]) or {"value": None, "n": 0, "ci": None} for c in columns],
                "figures": figures,
                "judging": s.scores.get("judging"),
                "judges": s.scores.get("judges") or [],
            }
        )

    def key(row):
        if sort in meta_keys:
            v = row[sort]
            return (v is None, v if not isinstance(v, str) else v.casefold())
        v = (row["figures"].get(sort) or {}).get("value")
        return (v is None, v if v is not None else 0.0)

    rows.sort(key=key, reverse=False)
    if descending:
        present = [r for r in rows if key(r)[0] is False]
        absent = [r for r in rows if key(r)[0] is True]
        rows = present[::-1] + absent
    slots = judge_slots(plan)
    judge_boards = []
    for slot in slots:
        cols = judge_columns(plan, slot)
        judge_boards.append(
            {
                "slot": slot,
                "columns": cols,
                "rows": [
                    {
                        "id": r["id"],
                        "model_name": r["model_name"],
                        "judge": next((j for j in r["judges"] if j.get("slot") == slot), None),
                        "cells": [r["figures"].get(c["key"]) or {"value": None, "n": 0, "ci": None} for c in cols],
                    }
                    for r in rows
                    if r["judging"] == "done"
                ],
            }
        )
    return {
        "plan": plan,
        "judged": bool(slots),
        "judge_boards": judge_boards,
        "judge_agreement": single_judge_spearman(rows, plan) if slots else None,
        "columns": columns,
        "rows": rows,
        "sort": sort,
        "descending": descending,
        "primary": plan.get("primary"),
        "n_items": len(release_gold(release, split).golds),
    }


def single_judge_spearman(rows: list[dict], plan: dict) -> dict:
    """Spearman's rho between the two single-judge leaderboards over the judged submissions,
    per figure of the plan (paper: rho = 0.99 on Success over 26 models); the point values
    (their bootstrap CIs are on the calibration page, judges_report)."""
    done = [r for r in rows if r["judging"] == "done"]
    out = {"n_submissions": len(done), "figures": {}}
    for name in plan.get("order", []):
        a = {r["id"]: r["figures"].get(f"judge1.{name}", {}).get("value") for r in done}
        b = {r["id"]: r["figures"].get(f"judge2.{name}", {}).get("value") for r in done}
        a = {k: v for k, v in a.items() if v is not None and b.get(k) is not None}
        out["figures"][name] = leaderboard_spearman(a, {k: b[k] for k in a})
    return out


def submission_compare(a: Submission, b: Submission) -> list[dict]:
    """Per figure: a - b with the paired bootstrap 95% CI on the same items (Meme3W Table 15)."""
    if a.release_id != b.release_id or a.split != b.split:
        raise Http404("Submissions of different releases or splits do not compare")
    sa, _ = submission_scored(a)
    sb, _ = submission_scored(b)
    fb = sb.by_name()
    out = []
    for fig in sa.figures:
        other = fb.get(fig.name)
        if other is None:
            continue
        diff = ev.paired_difference(fig, other)
        out.append({"key": fig.name, "label": fig.label, **(diff or {"difference": None, "ci": None, "n": fig.n})})
    return out


def worst_items(submission: Submission, *, limit: int = WORST_ITEMS) -> list[dict]:
    """Leads only (gold and predictions side by side): the items with the lowest primary
    per-item score, missing predictions first."""
    scored, plan = submission_scored(submission)
    figs = scored.by_name()
    primary = figs.get(plan.get("primary") or "") or (scored.figures[0] if scored.figures else None)
    if primary is None:
        return []
    per_item = primary.item_scores()
    scores = np.where(np.isnan(per_item), np.inf, per_item)
    order = [i for i in np.lexsort((scores, ~scored.missing)) if primary.mask[i]]
    stored = predictions_unpack(submission)
    fields = [f["name"] for f in plan["fields"]]
    out = []
    for i in order[:limit]:
        gold = scored.golds[i]
        pred = stored.get(str(gold.get("item_id")))
        out.append(
            {
                "item_id": gold.get("item_id"),
                "source_id": gold.get("source_id"),
                "text": (gold.get("text") or "")[:300],
                "score": None if np.isnan(per_item[i]) else float(per_item[i]),
                "missing": pred is None,
                "fields": [
                    {
                        "name": f,
                        "gold": _show((gold.get("gold") or {}).get(f)),
                        "prediction": "(no prediction)" if pred is None else _show(pred.get(f)),
                    }
                    for f in fields
                ],
            }
        )
    return out


def _show(value) -> str:
    if value is None or value == [] or value == "":
        return "—"
    if isinstance(value, str):
        return value[:300]
    return json.dumps(value, ensure_ascii=False)[:300]
