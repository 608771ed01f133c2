"""Published releases: their folders and files, records, diffs between releases, build jobs."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.db.models import Count, Max
from django.http import Http404

from adjudication.models import GoldRecord, HistoryEvent
from candidates.models import Conversion
from core.models import JobStatus
from exports.archive import ArchiveLayout, archive_time
from exports.models import ExportJob, HubPush, Release, ReleaseSettings
from exports.writers import json_loads
from projects.models import Item, Project, Stage

# ------------------------------------------------------------------------------------------
# Releases
# ------------------------------------------------------------------------------------------


def releases_root() -> Path:
    configured = getattr(settings, "CONCORD_RELEASES_DIR", "")
    return Path(configured) if configured else Path(settings.VAR_DIR) / "releases"


def releases_for_project(*, project: Project):
    return Release.objects.filter(project=project).select_related("created_by").order_by("-number")


def release_get_for_project(*, project: Project, number) -> Release:
    try:
        return Release.objects.get(project=project, number=int(number))
    except (Release.DoesNotExist, TypeError, ValueError):
        raise Http404(f"No release v{number} in this project") from None


def release_dir(release: Release) -> Path:
    return releases_root() / release.directory


def released_file_name(sha256: str, stored: str) -> str:
    """A stored image's name inside a release folder: by content, with its file's extension."""
    return f"images/{sha256}.{stored.rsplit('.', 1)[-1]}"


_IMAGE_NAME = re.compile(r"^images/([0-9a-f]{64})\.(jpg|png|gif|webp)$")


@dataclass(frozen=True)
class ReleaseFile:
    name: str
    path: Path
    sha256: str
    bytes: int


def release_files(release: Release) -> list[dict]:
    """Top-level files of the release with their sha256 (from the manifest), manifest included."""
    files = [{"name": name, **meta} for name, meta in sorted(release.manifest.get("files", {}).items())]
    files.append(
        {
            "name": "manifest.json",
            "sha256": release.manifest_sha256,
            "bytes": (release_dir(release) / "manifest.json").stat().st_size,
        }
    )
    return files


def release_file_get(*, release: Release, name: str) -> ReleaseFile:
    """A file of the release by its name in the manifest (or an included image); 404 otherwise.

    Names are looked up, never joined blindly: nothing outside the release folder is reachable.
    """
    root = release_dir(release)
    if name == "manifest.json":
        path = root / name
        return ReleaseFile(name, path, release.manifest_sha256, path.stat().st_size)
    meta = release.manifest.get("files", {}).get(name)
    if meta is not None:
        return ReleaseFile(name, root / name, meta["sha256"], meta["bytes"])
    match = _IMAGE_NAME.match(name)
    if match:
        path = root / name
        if path.is_file():
            # Content-addressed: the name is the sha256 (listed with its size in images.jsonl).
            return ReleaseFile(name, path, match.group(1), path.stat().st_size)
    raise Http404(f"No file {name!r} in release v{release.number}")


def release_records(release: Release, *, split: str | None = None) -> Iterator[bytes]:
    """records.jsonl lines (bytes, newline included), optionally only one split's."""
    path = release_dir(release) / "records.jsonl"
    with open(path, "rb") as fh:
        for line in fh:
            if split is None or json_loads(line)["split"] == split:
                yield line


def _records_by_id(release: Release) -> Iterator[dict]:
    with open(release_dir(release) / "records.jsonl", "rb") as fh:
        for line in fh:
            yield json_loads(line)


def _changed_fields(a: dict, b: dict) -> list[str]:
    changed = []
    for key in sorted(set(a) | set(b)):
        if key == "gold":
            ga, gb = a.get("gold") or {}, b.get("gold") or {}
            changed += [f"gold.{k}" for k in sorted(set(ga) | set(gb)) if ga.get(k) != gb.get(k)]
        elif a.get(key) != b.get(key):
            changed.append(key)
    return changed


def release_diff(*, old: Release, new: Release, limit: int = 500) -> dict:
    """Items added, removed and changed (with the changed fields) from ``old`` to ``new``.

    Both records.jsonl files are sorted by item id, so this is a merge join: memory is flat in
    the number of records; at most ``limit`` changes are listed (the counts are complete).
    """
    counts = {"added": 0, "removed": 0, "changed": 0, "unchanged": 0}
    field_counts: dict[str, int] = {}
    changes: list[dict] = []

    def note(kind: str, rec: dict, fields: list[str] | None = None) -> None:
        counts[kind] += 1
        if len(changes) < limit:
            entry = {"kind": kind, "item_id": rec["item_id"], "source_id": rec.get("source_id", "")}
            if fields is not None:
                entry["fields"] = fields
            changes.append(entry)

    a_iter, b_iter = _records_by_id(old), _records_by_id(new)
    a, b = next(a_iter, None), next(b_iter, None)
    while a is not None or b is not None:
        if b is None or (a is not None and a["item_id"] < b["item_id"]):
            note("removed", a)
            a = next(a_iter, None)
        elif a is None or b["item_id"] < a["item_id"]:
            note("added", b)
            b = next(b_iter, None)
        else:
            fields = _changed_fields(a, b)
            if fields:
                for f in fields:
                    field_counts[f] = field_counts.get(f, 0) + 1
                note("changed", b, fields)
            else:
                counts["unchanged"] += 1
            a, b = next(a_iter, None), next(b_iter, None)
    return {
        "from": old.number,
        "to": new.number,
        "identical": old.manifest_sha256 == new.manifest_sha256,
        "counts": counts,
        "changed_fields": dict(sorted(field_counts.items())),
        "changes": changes,
        "truncated": sum(counts[k] for k in ("added", "removed", "changed")) > len(changes),
    }


# ------------------------------------------------------------------------------------------
# Export jobs
# ------------------------------------------------------------------------------------------


def export_jobs_for_project(*, project: Project, limit: int = 10):
    return ExportJob.objects.filter(project=project).select_related("release", "created_by")[:limit]


def export_job_get_for_project(*, project: Project, job_id) -> ExportJob:
    try:
        return ExportJob.objects.select_related("release").get(project=project, pk=int(job_id))
    except (ExportJob.DoesNotExist, TypeError, ValueError):
        raise Http404("No such export job") from None


def release_latest_at(project) -> datetime | None:
    """When the project's newest published release was built (None: never). Every gold record
    created before it may be in a release: adjudication locks reviewers' revisions by it."""
    return Release.objects.filter(project=project).aggregate(at=Max("created_at"))["at"]


# ------------------------------------------------------------------------------------------
# Release settings (the card's and datasheet's words)
# ------------------------------------------------------------------------------------------

#: Hugging Face task categories by preset, when the lead has not chosen any.
PRESET_TASKS = {
    "meme3w": ["image-text-to-text", "image-classification", "object-detection"],
    "aha": ["image-text-to-text", "image-classification"],
    "memecap": ["image-to-text", "image-text-to-text"],
    "vikr": ["image-text-to-text", "image-to-text"],
}
CARD_TEXT_FIELDS = (
    "license_name",
    "license_url",
    "summary",
    "motivation",
    "funding",
    "collection",
    "annotators",
    "intended_uses",
    "prohibited_uses",
    "limitations",
    "personal_information",
    "maintenance",
    "contact",
    "homepage",
    "citation",
    "content_warning",
    "hub_repo",
)


def release_settings_get(*, project: Project) -> ReleaseSettings:
    """The project's release settings, or unsaved defaults (nothing is written by reading)."""
    found = ReleaseSettings.objects.filter(project=project).first()
    return found if found is not None else ReleaseSettings(project=project)


def _csv(text: str) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def release_card_settings(*, project: Project) -> dict:
    """The settings as the card uses them, defaults filled in (snapshotted into the manifest)."""
    s = release_settings_get(project=project)
    languages = _csv(s.languages) or sorted(
        {
            code.split("-")[0].lower()
            for code in Item.objects.filter(project=project)
            .exclude(language="")
            .values_list("language", flat=True)
            .distinct()
        }
    )
    return {
        "pretty_name": s.pretty_name or project.name,
        "license": s.license or "other",
        "creators": [line.strip() for line in (s.creators or "").splitlines() if line.strip()],
        "languages": languages,
        "task_categories": _csv(s.task_categories) or PRESET_TASKS.get(project.preset, ["image-classification"]),
        **{name: (getattr(s, name) or "").strip() for name in CARD_TEXT_FIELDS},
    }


def exclusions_by_reason(*, project: Project) -> dict[str, int]:
    """Items a lead or a workflow flag took out of the dataset, counted by their reason."""
    rows = (
        Item.objects.filter(project=project, stage=Stage.EXCLUDED)
        .values("excluded_reason")
        .annotate(n=Count("id"))
        .order_by("excluded_reason")
    )
    return {(r["excluded_reason"] or "excluded by a lead (no reason given)"): r["n"] for r in rows}


def construction_counts(*, project: Project) -> dict | None:
    """For a workflow whose last stage reviews a model's output (MemeBench: QC of the LLM's
    checklists): items in, removed by reason and by the stage that removed them, reviewed gold
    accepted as converted or edited (paper: 1,500 candidates -> 1,253 with 247 removed). None
    for other workflows. Four queries."""
    workflow = project.get_workflow()
    if not any(s.review is not None for s in workflow.stages):
        return None
    excluded = dict(Item.objects.filter(project=project, stage=Stage.EXCLUDED).values_list("pk", "excluded_reason"))
    last_event: dict[int, dict] = {}
    events = HistoryEvent.objects.filter(project=project, kind="excluded", item_id__in=list(excluded)).order_by("id")
    for item_id, new in events.values_list("item_id", "new"):
        last_event[item_id] = new if isinstance(new, dict) else {}
    by_reason: dict[str, int] = {}
    by_stage: dict[str, dict[str, int]] = {}
    for item_id, text in excluded.items():
        event = last_event.get(item_id, {})
        reason = event.get("flag") or (text or "").split(":", 1)[0].strip() or "excluded by a lead"
        stage = event.get("stage_name") or ("lead" if item_id not in last_event else "?")
        by_reason[reason] = by_reason.get(reason, 0) + 1
        by_stage.setdefault(stage, {})
        by_stage[stage][reason] = by_stage[stage].get(reason, 0) + 1
    accepted = edited = 0
    fields_edited: dict[str, int] = {}
    for provenance in GoldRecord.objects.filter(item__project=project, is_current=True).values_list(
        "provenance", flat=True
    ):
        reviewed = {k: v for k, v in (provenance or {}).items() if isinstance(v, dict) and v.get("source") == "review"}
        if not reviewed:
            continue
        changed = [k for k, v in reviewed.items() if v.get("edited")]
        for k in changed:
            fields_edited[k] = fields_edited.get(k, 0) + 1
        edited, accepted = edited + bool(changed), accepted + (not changed)
    total = Item.objects.filter(project=project).count()
    converted = (
        Conversion.objects.filter(item__project=project, status=JobStatus.DONE)
        .values("stage", "provider__name", "model_name")
        .annotate(n=Count("id"))
        .order_by("stage", "provider__name", "model_name")
    )
    converted_by = [
        {
            "stage": workflow.stage(r["stage"]).name if r["stage"] < len(workflow.stages) else str(r["stage"]),
            "provider": r["provider__name"] or "",
            "model": r["model_name"],
            "items": r["n"],
        }
        for r in converted
    ]
    return {
        "items": total,
        # Who converted (MemeBench: "Gemini-3.1-Pro then converts each explanation"): release
        # readers are leads and researchers; annotators never see it.
        "converted_by": converted_by,
        "removed": len(excluded),
        "kept": total - len(excluded),
        "removed_by_reason": dict(sorted(by_reason.items())),
        "removed_by_stage": {k: dict(sorted(v.items())) for k, v in sorted(by_stage.items())},
        "reviewed_accepted": accepted,
        "reviewed_edited": edited,
        "reviewed_fields_edited": dict(sorted(fields_edited.items())),
    }


def release_archive_layout(release: Release) -> ArchiveLayout:
    """The release's zip archive as a layout over its files (exports.archive); its index was
    written when the release was published (exports.services.release_archive_prepare for
    releases published before archives existed)."""
    return ArchiveLayout(release_dir(release), when=archive_time(release.manifest.get("data_as_of")))


def hub_pushes_for_release(*, release: Release, limit: int = 5):
    return HubPush.objects.filter(release=release).select_related("release", "created_by")[:limit]
