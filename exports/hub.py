"""Publishing a release outward: one commit of its files to a Hugging Face Hub dataset repo.

The commit holds exactly what the release folder holds (the manifest's files, manifest.json
and the redistributable images under ``images/``; an image whose licence forbids
redistribution is in no release folder, so it cannot be sent). The README is the dataset card,
so the Hub shows the datasheet and the viewer reads the configs. The token comes from the
environment (``HF_TOKEN``), never from the database or a form; ``HF_ENDPOINT`` points
huggingface_hub at another Hub (tests: a local stand-in on 127.0.0.1).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from huggingface_hub import CommitOperationAdd, HfApi

from exports.archive import ARCHIVE_INDEX

REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")


class HubConfigError(ValueError):
    """The push cannot start: no token, or a malformed repo id."""


@dataclass(frozen=True)
class HubCommit:
    url: str
    oid: str
    files: int


def hub_files(folder: Path) -> list[str]:
    """Relative paths of every file a push sends, sorted (the archive index is not a release file)."""
    return sorted(
        p.relative_to(folder).as_posix() for p in Path(folder).rglob("*") if p.is_file() and p.name != ARCHIVE_INDEX
    )


def hub_operations(folder: Path) -> list[CommitOperationAdd]:
    return [CommitOperationAdd(path_in_repo=rel, path_or_fileobj=str(Path(folder) / rel)) for rel in hub_files(folder)]


def check_repo_id(repo_id: str) -> str:
    repo_id = (repo_id or "").strip()
    if not REPO_ID.match(repo_id) or ".." in repo_id:
        raise HubConfigError(f"{repo_id!r} is not a Hub repo id (owner/name)")
    return repo_id


def hub_token() -> str:
    token = os.environ.get("HF_TOKEN", "").strip()
    if not token:
        raise HubConfigError("HF_TOKEN is not set in the environment of the worker")
    return token


def hub_push_folder(*, folder: Path, repo_id: str, message: str, description: str = "") -> HubCommit:
    """Create the dataset repo if needed and commit every file of ``folder`` in one commit."""
    api = HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None, token=hub_token())
    repo_id = check_repo_id(repo_id)
    api.create_repo(repo_id=repo_id, repo_type="dataset", exist_ok=True)
    operations = hub_operations(folder)
    info = api.create_commit(
        repo_id=repo_id,
        repo_type="dataset",
        operations=operations,
        commit_message=message,
        commit_description=description,
    )
    return HubCommit(url=str(info.commit_url), oid=str(info.oid), files=len(operations))
