"""Write paths of evaluation: submissions (a predictions file, raw model replies, the hidden
candidate models), provider runs (core.jobs).

A submission is written in one INSERT after the whole file was read and scored: a refused
file, or any error on the way, leaves nothing behind. Rows are never updated (immutable).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from django.db import IntegrityError, transaction

from candidates.models import Candidate, Provider
from candidates.parsing import parse_reply
from candidates.prompts import build_prompt
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
from evaluation.judging import EXPLAIN_PROMPT_VERSION, EXPLAIN_SYSTEM, EXPLAIN_USER, explanation_from_reply
from evaluation.models import ProviderRun, Source, Submission
from evaluation.selectors import (
    predictions_pack,
    release_gold,
    release_lexicon,
    release_plan,
    release_splits,
)
from exports.models import Release
from metrics import evaluation as ev
from projects.imaging import image_path
from projects.models import Item
from projects.schema import Schema

FORMATS = ("jsonl", "replies")


def default_split(release: Release) -> str:
    splits = release_splits(release)
    return "test" if "test" in splits else splits[0]


def _split_valid(release: Release, split: str | None) -> str:
    """A split named in a request body: the release's default when none is given, 400 when
    the release has no items in it."""
    split = split or default_split(release)
    if split not in release_splits(release):
        raise Invalid(f"Release v{release.number} has no {split!r} split with items", errors={"split": "no such split"})
    return split


MAX_REPLY_CHARS = 200_000


def _reply_lines(lines: Iterable[bytes], *, schema: Schema, index: ev.GoldIndex) -> Iterator[bytes]:
    """Raw replies ``{"item_id" | "source_id", "reply": "..."}`` -> prediction lines, through the
    candidates' parser and normalization (candidates.parsing.parse_reply): a field it removes
    is marked malformed (scored wrong, counted), a reply with no JSON object marks every field.
    Lines that are not such objects pass through unchanged, for the reader to report."""
    for raw in lines:
        try:
            obj = json.loads(raw)
        except (UnicodeDecodeError, ValueError, RecursionError):
            yield raw
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("reply"), str):
            yield raw
            continue
        i, _ = index.find(obj)
        item_text = (index.golds[i].get("text") or "") if i is not None else ""
        parsed = parse_reply(obj["reply"][:MAX_REPLY_CHARS], schema=schema, item_text=item_text)
        pred = dict(parsed.fields)
        if parsed.error:
            pred = {name: {ev.MALFORMED_KEY: parsed.error} for name in schema.names}
        else:
            for r in parsed.removed:
                name = r.get("field")
                if name in schema.names and name not in pred and not r.get("partial"):
                    pred[name] = {ev.MALFORMED_KEY: str(r.get("reason") or "removed by the parser")}
        ids = {k: obj[k] for k in ("item_id", "source_id") if k in obj}
        yield json.dumps({**ids, **pred}, ensure_ascii=False).encode() + b"\n"


def _read_and_score(*, release: Release, split: str, lines: Iterable[bytes], fmt: str) -> tuple[dict, dict, dict]:
    """(matched predictions {item_id: fields}, report, summary) or Invalid with the reason.

    A judged plan (VIKR) is read but not scored here: its figures come from the judge run
    (summary without figures, ``judging: pending``). Decisions in an uploaded file are
    dropped: only the project's judges decide."""
    if fmt not in FORMATS:
        raise Invalid(f"format must be one of {', '.join(FORMATS)}", errors={"format": "unknown format"})
    plan = release_plan(release)
    index = release_gold(release, split)
    if plan.get("kind") == ev.CHECKLIST_JUDGES:
        return _read_explanations(plan=plan, index=index, lines=lines, fmt=fmt)
    if fmt == "replies":
        lines = _reply_lines(
            lines, schema=Schema(release.manifest.get("schema") or release.project.schema), index=index
        )
    reading = ev.read_predictions(lines, plan=plan, index=index)
    report = reading.report()
    if reading.refused:
        raise Invalid(f"The file was refused: {reading.refused}", errors={"file": reading.refused}, code="refused")
    scored = ev.score(plan, index.golds, reading.predictions, lexicon=release_lexicon(release))
    summary = ev.summarize(scored, breakdowns=plan.get("breakdowns", []))
    matched = {str(g["item_id"]): p for g, p in zip(index.golds, reading.predictions) if p is not None}
    return matched, report, summary


def _read_explanations(*, plan: dict, index: ev.GoldIndex, lines: Iterable[bytes], fmt: str):
    if fmt != "jsonl":
        raise Invalid(
            'A VIKR release takes explanations: JSONL lines {"item_id", "explanation"}.', errors={"format": "use jsonl"}
        )
    explain_plan = {**plan, "fields": [f for f in plan["fields"] if f["name"] == "explanation"]}
    reading = ev.read_predictions(lines, plan=explain_plan, index=index)
    report = reading.report()
    if reading.refused:
        raise Invalid(f"The file was refused: {reading.refused}", errors={"file": reading.refused}, code="refused")
    matched = {str(g["item_id"]): p for g, p in zip(index.golds, reading.predictions) if p is not None}
    report["counts"]["empty_explanations"] = sum(
        1 for p in matched.values() if ev.clean_value({"kind": "explanation"}, p.get("explanation")) is None
    )
    return matched, report, judging_pending_summary(index)


def judging_pending_summary(index: ev.GoldIndex) -> dict:
    return {"figures": {}, "breakdowns": {}, "judging": "pending", "n_items": len(index.golds)}


def _create(*, release, split, model_name, description, url, source, provider, user, matched, report, summary):
    packed, digest = predictions_pack(matched)
    return Submission.objects.create(
        project=release.project,
        release=release,
        split=split,
        model_name=model_name,
        description=description,
        url=url,
        source=source,
        provider=provider,
        predictions=packed,
        predictions_sha256=digest,
        report=report,
        scores=summary,
        scorer=f"{ev.PLAN_FORMAT}/{ev.PLAN_VERSION}",
        created_by=user,
    )


def _check_names(model_name: str, description: str, url: str) -> tuple[str, str, str]:
    model_name = (model_name or "").strip()
    if not model_name:
        raise Invalid("Name the model.", errors={"model_name": "required"})
    if len(model_name) > 120:
        raise Invalid("The model name is too long.", errors={"model_name": "at most 120 characters"})
    if len(description or "") > 2000:
        raise Invalid("The description is too long.", errors={"description": "at most 2000 characters"})
    url = (url or "").strip()
    if url and not url.startswith(("https://", "http://")) or len(url) > 500:
        raise Invalid("The URL must start with https:// or http://.", errors={"url": "not a web address"})
    return model_name, (description or "").strip(), url


def submission_create(
    *,
    user,
    release: Release,
    split: str | None,
    model_name: str,
    description: str = "",
    url: str = "",
    file,
    fmt: str = "jsonl",
) -> Submission:
    """Score an uploaded predictions file (``fmt`` jsonl) or raw replies (``fmt`` replies) and
    store the submission. ``file``: a binary file object (read in bounded memory)."""
    model_name, description, url = _check_names(model_name, description, url)
    split = _split_valid(release, split)
    size = getattr(file, "size", None)
    if size is not None and size > ev.MAX_BYTES:
        raise Invalid(f"The file was refused: it is larger than {ev.MAX_BYTES >> 20} MB", errors={"file": "too large"})
    matched, report, summary = _read_and_score(release=release, split=split, lines=ev.iter_lines(file), fmt=fmt)
    return _create(
        release=release,
        split=split,
        model_name=model_name,
        description=description,
        url=url,
        source=Source.REPLIES if fmt == "replies" else Source.UPLOAD,
        provider=None,
        user=user,
        matched=matched,
        report=report,
        summary=summary,
    )


# ------------------------------------------------------------------------------------------
# Hidden candidate models
# ------------------------------------------------------------------------------------------


def _candidate_prediction(fields: dict, removed: list, parse_error: str, names: list[str]) -> dict:
    if parse_error:
        return {n: {ev.MALFORMED_KEY: parse_error[:200]} for n in names}
    pred = dict(fields or {})
    for r in removed or []:
        name = r.get("field") if isinstance(r, dict) else None
        if name in names and name not in pred and not r.get("partial"):
            pred[name] = {ev.MALFORMED_KEY: str(r.get("reason") or "removed by the parser")[:200]}
    return pred


def candidate_submissions_enter(*, release: Release, split: str) -> list[Submission]:
    """Enter each of the project's candidate providers on the release split's leaderboard, once
    (unique constraint), from its newest candidate per item of the split. An item without a
    candidate is missing (wrong); a reply without JSON makes every field malformed (Meme3W B.1).
    """
    if release_plan(release).get("kind") == ev.CHECKLIST_JUDGES:
        return []  # VIKR candidates are checklist conversions of the reference, not explanations
    index = release_gold(release, split)
    item_ids = [int(g["item_id"]) for g in index.golds if str(g.get("item_id", "")).isdigit()]
    existing = set(
        Submission.objects.filter(release=release, split=split, source=Source.CANDIDATES).values_list(
            "provider_id", flat=True
        )
    )
    names = [f["name"] for f in release_plan(release)["fields"]]
    rows = (
        Candidate.objects.filter(item_id__in=item_ids, item__project=release.project)
        .exclude(provider_id__in=existing)
        .order_by("provider_id", "item_id", "-created_at", "-id")
        .values_list("provider_id", "item_id", "fields", "removed", "parse_error", "model_name")
    )
    by_provider: dict[int, dict[str, dict]] = {}
    model_names: dict[int, str] = {}
    for provider_id, item_id, fields, removed, parse_error, model in rows:
        preds = by_provider.setdefault(provider_id, {})
        if str(item_id) not in preds:
            preds[str(item_id)] = _candidate_prediction(fields, removed, parse_error, names)
            model_names.setdefault(provider_id, model)
    created = []
    providers = {p.pk: p for p in Provider.objects.filter(pk__in=by_provider, project=release.project)}
    for provider_id, preds in sorted(by_provider.items()):
        provider = providers.get(provider_id)
        if provider is None:
            continue
        lines = [json.dumps({"item_id": int(k), **v}).encode() + b"\n" for k, v in preds.items()]
        matched, report, summary = _read_and_score(release=release, split=split, lines=lines, fmt="jsonl")
        try:
            with transaction.atomic():
                created.append(
                    _create(
                        release=release,
                        split=split,
                        model_name=f"{provider.name} ({model_names.get(provider_id) or provider.model})",
                        description="Hidden candidate model of the project (its candidates on these items).",
                        url="",
                        source=Source.CANDIDATES,
                        provider=provider,
                        user=None,
                        matched=matched,
                        report=report,
                        summary=summary,
                    )
                )
        except IntegrityError:
            continue  # entered meanwhile by another request
    return created


# ------------------------------------------------------------------------------------------
# Provider runs (core.jobs)
# ------------------------------------------------------------------------------------------


def provider_run_start(*, user, release: Release, split: str | None, provider_id, enqueue: bool = True) -> ProviderRun:
    """A lead runs one of the project's providers on every item of a release split."""
    split = _split_valid(release, split)
    try:
        provider = Provider.objects.get(project=release.project, pk=int(provider_id))
    except (Provider.DoesNotExist, TypeError, ValueError):
        raise NotFound("No such provider in this project") from None
    if ProviderRun.objects.filter(release=release, provider=provider, status__in=ACTIVE).exists():
        raise Busy("This provider is already running on this release.")
    run = ProviderRun.objects.create(
        project=release.project, release=release, split=split, provider=provider, created_by=user
    )
    if enqueue:
        job_enqueue(run)
    return run


def provider_run_work(run: ProviderRun, progress: Progress) -> None:
    """Ask the provider for every item of the split (resumable: replies collected so far are
    checkpointed on the row), then score the replies like uploaded raw replies. A permanent
    provider error fails the job; a transient one leaves the item without a reply (missing)."""
    release = run.release
    index = release_gold(release, run.split)
    manifest = release.manifest or {}
    schema_data = manifest.get("schema") or release.project.schema
    judged = release_plan(release).get("kind") == ev.CHECKLIST_JUDGES
    if judged:
        # MemeBench closed-book protocol: the image only, the standard prompt, no item text.
        system, version = EXPLAIN_SYSTEM, EXPLAIN_PROMPT_VERSION
    else:
        prompt = build_prompt(
            preset=(manifest.get("project") or {}).get("preset") or release.project.preset,
            schema_data=schema_data,
            guideline=release.project.guideline,
        )
        system, version = prompt.system, prompt.version
    client = client_for(ProviderConfig.from_provider(run.provider))
    replies = dict(run.replies or {})
    items = {i.pk: i for i in Item.objects.filter(project=release.project, pk__in=[g["item_id"] for g in index.golds])}
    total = len(index.golds)
    progress(len(replies), total, phase="asking the model", force=True)
    failures = 0
    for n, gold in enumerate(index.golds, start=1):
        key = str(gold["item_id"])
        item = items.get(gold["item_id"])
        if key in replies or item is None:
            continue
        try:
            reply = client.generate(
                CandidateRequest(
                    system=system,
                    user=EXPLAIN_USER if judged else prompt.user_text(item_text=item.text, title=item.title),
                    image=image_path(item.image).read_bytes(),
                    image_mime="image/" + item.image.rsplit(".", 1)[-1].lower().replace("jpg", "jpeg"),
                    item_id=item.pk,
                    source_id=item.source_id,
                    import_key=item.import_key,
                )
            )
            replies[key] = reply.text
        except PermanentProviderError as exc:
            raise JobFailed(f"the provider refused item {key}: {exc}") from exc
        except TransientProviderError:
            failures += 1  # no reply: the item is missing (wrong), and counted
        progress(n, total, replies=replies)
    progress(total, total, phase="scoring", force=True, replies=replies)
    if judged:
        lines = [
            json.dumps({"item_id": int(k), "explanation": explanation_from_reply(v)}, ensure_ascii=False).encode()
            + b"\n"
            for k, v in replies.items()
        ]
    else:
        lines = [json.dumps({"item_id": int(k), "reply": v}).encode() + b"\n" for k, v in replies.items()]
    if not lines:
        raise JobFailed("the provider answered no item")
    matched, report, summary = _read_and_score(
        release=release, split=run.split, lines=lines, fmt="jsonl" if judged else "replies"
    )
    report["counts"]["provider_failures"] = failures
    with transaction.atomic():
        submission = _create(
            release=release,
            split=run.split,
            model_name=f"{run.provider.name} ({run.provider.model})",
            description=f"Provider run #{run.pk} with the release's prompt ({version}).",
            url="",
            source=Source.PROVIDER,
            provider=run.provider,
            user=run.created_by,
            matched=matched,
            report=report,
            summary=summary,
        )
        if not job_finish(run, submission=submission, replies=replies):
            raise JobFailed("the run was cancelled before it could publish")
