"""Write paths of the two-judge evaluation (MemeBench VIKR): judge runs on the one job
mechanism (core.jobs), their stored verdicts, and the publication of a submission's figures.

Rules (seeds/memebench-vikr.txt; metrics.evaluation states them for the offline scorer):
two configured judges each decide pass/fail on every checklist item of every response,
seeing the meme image and the response, never the model's identity; an item passes only
when both pass it; a layer scores 1 only when all its items pass; Success = all four layers.

Cost and failure policy:

* every reply is stored at once as a ``JudgeVerdict`` keyed by (submission, judge, item,
  request digest): a resumed run (worker lost, or the lead starts it again after a failure)
  and any later run of the same judges on the same submission reuse it, never asking twice;
* a transient provider error (429, 5xx, timeout) is retried with exponential backoff (or the
  provider's Retry-After) up to ``TRANSIENT_ATTEMPTS`` times; then the run fails, naming the
  judge and item, with every verdict so far kept for the resume. A permanent error fails the
  run at once;
* a reply that lacks a readable decision for some checklist items is asked again once
  (``PARSE_ATTEMPTS``); decisions still missing then are counted as **fail**, and reported per
  item and judge on the submission (``report.judging.undecided``).
"""

from __future__ import annotations

import time
from collections import Counter

from django.db import IntegrityError, transaction

from candidates.models import Provider
from candidates.providers import (
    CandidateRequest,
    PermanentProviderError,
    ProviderConfig,
    TransientProviderError,
    client_for,
)
from core.errors import Busy, Invalid, NotFound
from core.jobs import JobFailed, Progress, job_enqueue, job_finish
from core.models import ACTIVE
from evaluation.judging import (
    JUDGE_PROMPT_VERSION,
    judge_checklist,
    judge_prompt,
    judge_replay_key,
    parse_judge_reply,
    request_digest,
)
from evaluation.models import JudgeRun, JudgeVerdict, Submission
from evaluation.selectors import predictions_pack, predictions_unpack, release_gold, release_plan
from metrics import evaluation as ev
from projects.imaging import image_path
from projects.models import Item

TRANSIENT_ATTEMPTS = 4
PARSE_ATTEMPTS = 2
RETRY_BASE_SECONDS = 2.0
MAX_BACKOFF_SECONDS = 60.0
MAX_REPLY_CHARS = 50_000
MAX_LISTED_UNDECIDED = 200


def judge_run_start(*, user, submission: Submission, judge_1_id, judge_2_id, enqueue: bool = True) -> JudgeRun:
    """A lead has two of the project's providers judge a submission of a judged (VIKR) release."""
    plan = release_plan(submission.release)
    if plan.get("kind") != ev.CHECKLIST_JUDGES:
        raise Invalid("This release is not scored by LLM judges.", errors={"submission": "not a judged release"})
    judges = []
    for slot, pid in ((1, judge_1_id), (2, judge_2_id)):
        try:
            judges.append(Provider.objects.get(project_id=submission.project_id, pk=int(pid)))
        except (Provider.DoesNotExist, TypeError, ValueError):
            raise NotFound(f"Judge {slot}: no such provider in this project") from None
    if judges[0].pk == judges[1].pk:
        raise Invalid("Choose two different judges.", errors={"judge_2": "the same provider as judge 1"})
    for slot, p in enumerate(judges, start=1):
        if not p.enabled:
            raise Invalid(f"Judge {slot} ({p.name}) is disabled.", errors={f"judge_{slot}": "disabled"})
    if JudgeRun.objects.filter(submission=submission, status__in=ACTIVE).exists():
        raise Busy("Judges are already scoring this submission.")
    run = JudgeRun.objects.create(
        project_id=submission.project_id,
        submission=submission,
        judge_1=judges[0],
        judge_2=judges[1],
        prompt_version=JUDGE_PROMPT_VERSION,
        created_by=user,
    )
    if enqueue:
        job_enqueue(run)
    return run


def _mime(name: str) -> str:
    return "image/" + name.rsplit(".", 1)[-1].lower().replace("jpg", "jpeg")


def _wait(progress: Progress, retry_after: float | None, failures: int) -> None:
    delay = retry_after if retry_after is not None else RETRY_BASE_SECONDS * 2 ** (failures - 1)
    progress.heartbeat()
    time.sleep(min(MAX_BACKOFF_SECONDS, max(0.0, delay)))


def _ask(*, client, provider: Provider, request: CandidateRequest, ids: list[str], label: str, progress, counts):
    """(decisions, undecided, replies, model name) of one judge on one response."""
    decisions: dict[str, bool] = {}
    replies: list[str] = []
    model_name = ""
    transient = asked = 0
    while asked < PARSE_ATTEMPTS:
        try:
            reply = client.generate(request)
        except TransientProviderError as exc:
            transient += 1
            counts["transient_errors"] += 1
            if transient >= TRANSIENT_ATTEMPTS:
                raise JobFailed(
                    f"judge {provider.name}: {label}: {exc} ({transient} attempts). Start the run again to "
                    "resume: the decisions received so far are kept."
                ) from exc
            _wait(progress, exc.retry_after, transient)
            continue
        except PermanentProviderError as exc:
            raise JobFailed(f"judge {provider.name} refused {label}: {exc}") from exc
        asked += 1
        counts["requests"] += 1
        replies.append(reply.text[:MAX_REPLY_CHARS])
        model_name = reply.model_name
        for rid, decision in parse_judge_reply(reply.text, ids).items():
            decisions.setdefault(rid, decision)
        if len(decisions) == len(ids):
            break
        if asked < PARSE_ATTEMPTS:
            counts["asked_again"] += 1
    return decisions, [rid for rid in ids if rid not in decisions], replies, model_name


def judge_run_work(run: JudgeRun, progress: Progress) -> None:
    """Ask both judges about every response (reusing stored verdicts), then publish the
    submission's judged predictions, report and figures with the end of the run."""
    submission = Submission.objects.select_related("release", "release__project").get(pk=run.submission_id)
    release = submission.release
    plan = release_plan(release)
    if plan.get("kind") != ev.CHECKLIST_JUDGES:
        raise JobFailed("the release is not scored by LLM judges")
    index = release_gold(release, submission.split)
    stored = predictions_unpack(submission)
    judges = [run.judge_1, run.judge_2][: int(plan.get("judges") or 2)]
    clients = [client_for(ProviderConfig.from_provider(p)) for p in judges]
    known = {
        (v.provider_id, v.item_id, v.request_sha256): v
        for v in JudgeVerdict.objects.filter(submission=submission, provider__in=judges)
    }
    items = {i.pk: i for i in Item.objects.filter(project=release.project, pk__in=[g["item_id"] for g in index.golds])}
    counts: Counter = Counter()
    undecided: list[dict] = []
    judged: dict[str, dict] = {}
    total, done = len(index.golds) * len(judges), 0
    progress(0, total, phase="judging", force=True)
    for gold in index.golds:
        key = str(gold["item_id"])
        pred = stored.get(key)
        checklist = judge_checklist(plan, gold)
        if pred is None:
            done += len(judges)  # no response: scored as wrong, nothing to ask
            continue
        explanation = ev.clean_value({"kind": "explanation"}, (pred or {}).get("explanation"))
        explanation = explanation if isinstance(explanation, str) else None
        if not checklist.complete or explanation is None:
            # An empty response satisfies nothing; an item whose gold lacks a layer is left
            # out of every figure by the scorer. Neither costs a request.
            counts["not_asked_empty" if checklist.complete else "not_asked_incomplete_gold"] += 1
            judged[key] = {
                "explanation": explanation,
                "judgements": [dict.fromkeys(checklist.ids, False)] * len(judges),
            }
            done += len(judges)
            progress(done, total)
            continue
        item = items.get(gold["item_id"])
        if item is None:
            raise JobFailed(f"item {key} is no longer in the project: its image cannot be shown to the judges")
        image = image_path(item.image).read_bytes()
        system, user = judge_prompt(checklist, explanation)
        per_judge = []
        for slot, (provider, client) in enumerate(zip(judges, clients), start=1):
            sha = request_digest(
                provider_kind=provider.kind, model=provider.model, system=system, user=user, image=image
            )
            verdict = known.get((provider.pk, key, sha))
            if verdict is None:
                decisions, missing, replies, model_name = _ask(
                    client=client,
                    provider=provider,
                    request=CandidateRequest(
                        system=system,
                        user=user,
                        image=image,
                        image_mime=_mime(item.image),
                        item_id=item.pk,
                        source_id=item.source_id,
                        import_key=item.import_key,
                        replay_key=judge_replay_key(key, explanation),
                    ),
                    ids=checklist.ids,
                    label=f"item {key}",
                    progress=progress,
                    counts=counts,
                )
                try:
                    with transaction.atomic():
                        verdict = JudgeVerdict.objects.create(
                            submission=submission,
                            provider=provider,
                            item_id=key,
                            request_sha256=sha,
                            decisions={k: ev.PASS if v else ev.FAIL for k, v in decisions.items()},
                            undecided=missing,
                            replies=replies,
                            model_name=model_name[:200],
                        )
                except IntegrityError:  # stored meanwhile by a worker that took over
                    verdict = JudgeVerdict.objects.get(
                        submission=submission, provider=provider, item_id=key, request_sha256=sha
                    )
            else:
                counts["reused"] += 1
            if verdict.undecided:
                counts["undecided"] += len(verdict.undecided)
                if len(undecided) < MAX_LISTED_UNDECIDED:
                    undecided.append({"item_id": gold["item_id"], "judge": slot, "ids": list(verdict.undecided)})
            per_judge.append({rid: ev.verdict(verdict.decisions.get(rid)) for rid in checklist.ids})
            done += 1
            progress(done, total)
        judged[key] = {"explanation": explanation, "judgements": per_judge}
    progress(total, total, phase="scoring", force=True)
    _publish(run=run, submission=submission, plan=plan, index=index, judged=judged, counts=counts, undecided=undecided)


def _stored_judgements(judgements: list[dict]) -> list[dict]:
    return [{k: (ev.PASS if v else ev.FAIL if v is False else None) for k, v in d.items()} for d in judgements]


def _publish(*, run, submission, plan, index, judged, counts, undecided) -> None:
    predictions = {
        k: {"explanation": v["explanation"], "judgements": _stored_judgements(v["judgements"])}
        for k, v in judged.items()
    }
    preds = [predictions.get(str(g["item_id"])) for g in index.golds]
    scored = ev.score(plan, index.golds, preds)
    summary = ev.summarize(scored, breakdowns=plan.get("breakdowns", []))
    judges = [run.judge_1, run.judge_2]
    summary["judging"] = "done"
    summary["judge_run"] = run.pk
    summary["judges"] = [
        {"slot": n, "provider_id": p.pk, "name": p.name, "kind": p.kind, "model": p.model}
        for n, p in enumerate(judges, 1)
    ]
    report = dict(submission.report or {})
    report["judging"] = {
        "run": run.pk,
        "prompt_version": run.prompt_version,
        "counts": dict(counts),
        "undecided": undecided,
        "rule": "a checklist item without a readable decision after the retry is counted as fail",
    }
    packed, digest = predictions_pack(predictions)
    with transaction.atomic():
        Submission.objects.filter(pk=submission.pk).update(
            predictions=packed, predictions_sha256=digest, scores=summary, report=report
        )
        if not job_finish(run, counts=dict(counts)):
            raise JobFailed("the run was cancelled before it could publish")
