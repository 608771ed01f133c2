"""Demo leaderboard: the simulated team's release gets an uploaded baseline predictions file
and its three hidden candidate models (replayed "model-1/2/3") on the test split; a VIKR
release gets two submitted models scored by two replay judges (demo_vikr_leaderboard), and
the demo vikr project gets those models' files and judges before it has a release
(demo_vikr_evaluation_load), for its lead to submit and judge."""

from __future__ import annotations

import json
from pathlib import Path

from candidates.endpoints import replay_file_path
from candidates.models import Provider, ProviderKind
from candidates.services import provider_create
from core.jobs import job_run
from evaluation.judge_runs import judge_run_start, judge_run_work
from evaluation.judging import judge_checklist, judge_replay_key
from evaluation.models import JudgeRun, Submission
from evaluation.selectors import release_gold, release_plan
from evaluation.services import candidate_submissions_enter, submission_create
from exports.models import Release
from metrics import evaluation as ev
from projects.demo import demo_truth
from projects.evaluation import evaluation_plan
from workflow.demo import DEMO_VIKR


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


# ------------------------------------------------------------------------------------------
# MemeBench VIKR: two submitted models scored by two replay judges
# ------------------------------------------------------------------------------------------

VIKR_JUDGES = ("Judge A (replay)", "Judge B (replay)")
VIKR_MODELS = ("Thorough explainer", "Literal describer")
VIKR_JUDGE_FILE = "vikr-judges.jsonl"


def _vikr_explanation(model: str, k: int, gold: dict, plan: dict) -> str:
    """The demo models' responses: the thorough one restates every checklist item but misses
    the humour on every fourth meme; the literal one describes what is visible (and the
    background on even memes), never naming anyone."""
    checklist = judge_checklist(plan, gold)
    texts = {letter: [t for _, t in entries] for letter, entries in checklist.layers}
    if model == VIKR_MODELS[0]:
        layers = ["V", "I", "K"] + ([] if k % 4 == 3 else ["R"])
    else:
        layers = ["V"] + (["K"] if k % 2 == 0 else [])
    return "In this meme: " + " ".join(t.rstrip(".") + "." for x in layers for t in texts.get(x, []))


def _vikr_decisions(judge: int, k: int, checklist, explanation: str) -> dict:
    """Judge A passes an item whose text the response states; judge B is stricter on
    Identity (it fails the Identity items of every third meme)."""
    low = explanation.casefold()
    out = {}
    for letter, entries in checklist.layers:
        for rid, text in entries:
            ok = text.rstrip(".").casefold() in low
            if judge == 1 and letter == "I" and k % 3 == 0:
                ok = False
            out[rid] = "pass" if ok else "fail"
    return out


def vikr_demo_responses(*, plan: dict, golds: list[dict]) -> tuple[dict[str, list[dict]], list[dict]]:
    """The demo models' explanation lines per model for ``golds`` (``[{"item_id", "gold"}]``;
    a gold's position k decides the planted misses, see _vikr_explanation and _vikr_decisions),
    and the two replay judges' replay lines (one per judge and response, keyed by
    evaluation.judging.judge_replay_key)."""
    rows_by_model: dict[str, list[dict]] = {}
    replay_lines = []
    for model in VIKR_MODELS:
        rows = [
            {"item_id": g["item_id"], "explanation": _vikr_explanation(model, k, g, plan)} for k, g in enumerate(golds)
        ]
        rows_by_model[model] = rows
        for k, (g, row) in enumerate(zip(golds, rows)):
            checklist = judge_checklist(plan, g)
            for judge, name in enumerate(VIKR_JUDGES):
                replay_lines.append(
                    {
                        "replay_key": judge_replay_key(str(g["item_id"]), row["explanation"]),
                        "model": name,
                        "reply": _vikr_decisions(judge, k, checklist, row["explanation"]),
                    }
                )
    return rows_by_model, replay_lines


def vikr_demo_material(*, release: Release, split: str) -> tuple[dict[str, list[dict]], list[dict]]:
    """vikr_demo_responses for the gold of a published VIKR release's split."""
    plan = release_plan(release)
    if plan.get("kind") != ev.CHECKLIST_JUDGES:
        raise ValueError(f"release v{release.number} is not a VIKR release (its plan is not scored by judges)")
    return vikr_demo_responses(plan=plan, golds=release_gold(release, split).golds)


def vikr_demo_judges(*, project, replay_lines: list[dict]) -> list[Provider]:
    """The two replay judge providers of the demo, ``replay_lines`` added to their replay file
    (a line for the same judge and request replaced; idempotent)."""
    replay = replay_file_path(project.pk, VIKR_JUDGE_FILE)
    replay.parent.mkdir(parents=True, exist_ok=True)
    new = {(r["model"], r["replay_key"]) for r in replay_lines}
    kept = []
    if replay.is_file():
        for line in replay.read_text(encoding="utf-8").splitlines():
            row = json.loads(line) if line.strip() else None
            if isinstance(row, dict) and (row.get("model"), row.get("replay_key")) not in new:
                kept.append(row)
    rows = kept + replay_lines
    replay.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    judges = []
    for name in VIKR_JUDGES:
        provider = Provider.objects.filter(project=project, name=name).first() or provider_create(
            project=project,
            name=name,
            kind=ProviderKind.REPLAY,
            model=name,
            replay_file=VIKR_JUDGE_FILE,
            requests_per_minute=6000,
            timeout_seconds=10,
        )
        judges.append(provider)
    return judges


def vikr_model_file(folder: Path, model: str, suffix: str) -> Path:
    return folder / f"vikr-{model.split()[0].lower()}-{suffix}.jsonl"


def _write_rows(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def demo_vikr_evaluation_load(*, project, folder: Path) -> dict[str, Path]:
    """What the lead of the demo vikr project needs to evaluate the release they will build,
    without running anything now (as the other demo projects leave their models ready): the
    two demo models' explanation files in ``folder`` (one line per demo meme, by item id; a
    meme QC removes is reported as not in the release) and the two replay judges, whose replay
    file holds their decisions on exactly these responses. The decisions are made against the
    checklists the demo converter writes (workflow.demo.DEMO_VIKR), which QC starts from; an
    item QC adds has no replayed decision and counts as failed (reported as undecided).
    Idempotent. Returns {model name: its file}."""
    plan = evaluation_plan(schema=project.schema, preset=project.preset)
    items = sorted(project.items.filter(source_id__in=DEMO_VIKR).values_list("source_id", "pk"))
    golds = [{"item_id": pk, "gold": DEMO_VIKR[sid][1]} for sid, pk in items]
    rows_by_model, replay_lines = vikr_demo_responses(plan=plan, golds=golds)
    vikr_demo_judges(project=project, replay_lines=replay_lines)
    paths = {}
    for model, rows in rows_by_model.items():
        paths[model] = vikr_model_file(folder, model, project.slug)
        _write_rows(paths[model], rows)
    return paths


def demo_vikr_leaderboard(*, release: Release, user, folder: Path, split: str = "test") -> list[Submission]:
    """On a published VIKR release: submit two models' explanations, set up two replay judges
    and score both submissions with them (in this process, no broker). Idempotent:
    submissions are made once, a judged one is left alone, stored verdicts are reused.
    Returns the two submissions, judged."""
    rows_by_model, replay_lines = vikr_demo_material(release=release, split=split)
    subs = []
    for model, rows in rows_by_model.items():
        sub = Submission.objects.filter(release=release, split=split, model_name=model).first()
        if sub is None:
            path = vikr_model_file(folder, model, f"v{release.number}-{split}")
            _write_rows(path, rows)
            with open(path, "rb") as fh:
                sub = submission_create(
                    user=user,
                    release=release,
                    split=split,
                    model_name=model,
                    description="Demo model (replayed explanations).",
                    file=fh,
                )
        subs.append(sub)
    judges = vikr_demo_judges(project=release.project, replay_lines=replay_lines)
    for sub in subs:
        if (sub.scores or {}).get("judging") == "done":
            continue
        run = judge_run_start(
            user=user, submission=sub, judge_1_id=judges[0].pk, judge_2_id=judges[1].pk, enqueue=False
        )
        job_run(JudgeRun, run.pk, judge_run_work)
    return list(Submission.objects.filter(pk__in=[s.pk for s in subs]).order_by("id"))
