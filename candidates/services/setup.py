"""Configuring candidate providers: validated settings, API keys named (never stored)."""

from __future__ import annotations

import logging
import re
from pathlib import Path

from django.db import IntegrityError, transaction
from django.utils import timezone

from candidates.endpoints import MAX_REPLAY_BYTES, EndpointRefused, base_url_check, replay_file_path
from candidates.models import Provider, ProviderKind
from core.errors import Invalid
from projects.models import Project

log = logging.getLogger(__name__)

ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]{0,99}$")
MAX_TIMEOUT_SECONDS = 300.0  # below the task's soft time limit (tasks.py)


# -- providers ---------------------------------------------------------------------------------


def replay_file_save(*, project: Project, uploaded_file) -> str:
    """Store an uploaded replay JSONL in the project's replay folder; returns its name."""
    name = Path(uploaded_file.name or "").name
    try:
        path = replay_file_path(project.pk, name)
    except EndpointRefused as exc:
        raise Invalid(f"The replay file name cannot be used: {exc}.", errors={"replay_upload": str(exc)}) from None
    if uploaded_file.size is not None and uploaded_file.size > MAX_REPLAY_BYTES:
        raise Invalid(f"A replay file has at most {MAX_REPLAY_BYTES:,} bytes.", errors={"replay_upload": "too large"})
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".part")
    with open(tmp, "wb") as fh:
        for chunk in uploaded_file.chunks():
            fh.write(chunk)
    tmp.replace(path)
    return name


def _provider_clean(
    *,
    project: Project,
    instance: Provider | None,
    name: str,
    kind: str,
    model: str,
    base_url: str,
    api_key_env: str,
    replay_file: str,
    requests_per_minute: int,
    timeout_seconds: float,
) -> dict:
    errors: dict[str, str] = {}
    name, model, base_url, api_key_env, replay_file = (
        (name or "").strip(),
        (model or "").strip(),
        (base_url or "").strip(),
        (api_key_env or "").strip(),
        (replay_file or "").strip(),
    )
    if not name:
        errors["name"] = "Give the provider a name."
    elif len(name) > 80:
        errors["name"] = "At most 80 characters."
    elif Provider.objects.filter(project=project, name=name).exclude(pk=getattr(instance, "pk", None)).exists():
        errors["name"] = "Another provider of this project has this name."
    if kind not in ProviderKind.values:
        errors["kind"] = f"Unknown kind; choose one of {', '.join(ProviderKind.values)}."
    if not model:
        errors["model"] = "Give the model name the endpoint expects."
    elif len(model) > 200:
        errors["model"] = "At most 200 characters."
    if base_url:
        # Not URLValidator: self-hosted servers often have bare host names (http://vllm:8000/v1).
        try:
            base_url_check(base_url)
        except EndpointRefused as exc:
            errors["base_url"] = f"This URL cannot be used: {exc}."
    elif kind == ProviderKind.OPENAI_COMPATIBLE:
        errors["base_url"] = "An OpenAI-compatible server needs its base URL (e.g. http://gpu-host:8000/v1)."
    if api_key_env and not ENV_NAME.match(api_key_env):
        errors["api_key_env"] = (
            "Give the NAME of an environment variable (upper-case letters, digits and _, e.g. OPENAI_API_KEY), "
            "never the key itself."
        )
    elif not api_key_env and kind in (ProviderKind.OPENAI, ProviderKind.GEMINI):
        errors["api_key_env"] = "Name the environment variable that holds the API key (e.g. OPENAI_API_KEY)."
    if kind == ProviderKind.REPLAY:
        if not replay_file:
            errors["replay_file"] = "A replay provider needs a JSONL file: upload one, or name a file of this project."
        else:
            try:
                if not replay_file_path(project.pk, replay_file).is_file():
                    errors["replay_file"] = f"This project has no replay file {replay_file!r}: upload it first."
            except EndpointRefused as exc:
                errors["replay_file"] = f"{exc}."
    else:
        replay_file = ""
    try:
        requests_per_minute = int(requests_per_minute)
        if not 1 <= requests_per_minute <= 100_000:
            raise ValueError
    except (TypeError, ValueError):
        errors["requests_per_minute"] = "A whole number between 1 and 100000."
    try:
        timeout_seconds = float(timeout_seconds)
        if not 1 <= timeout_seconds <= MAX_TIMEOUT_SECONDS:
            raise ValueError
    except (TypeError, ValueError):
        errors["timeout_seconds"] = f"Between 1 and {MAX_TIMEOUT_SECONDS:g} seconds."
    if errors:
        raise Invalid(" ".join(errors.values()), errors=errors)
    return {
        "name": name,
        "kind": kind,
        "model": model,
        "base_url": base_url,
        "api_key_env": api_key_env,
        "replay_file": replay_file,
        "requests_per_minute": requests_per_minute,
        "timeout_seconds": timeout_seconds,
    }


def provider_create(
    *,
    project: Project,
    name: str,
    kind: str,
    model: str,
    base_url: str = "",
    api_key_env: str = "",
    replay_file: str = "",
    requests_per_minute: int = 60,
    timeout_seconds: float = 60.0,
    enabled: bool = True,
) -> Provider:
    """Raises Invalid with {field: message} on bad input; never stores an API key."""
    clean = _provider_clean(
        project=project,
        instance=None,
        name=name,
        kind=kind,
        model=model,
        base_url=base_url,
        api_key_env=api_key_env,
        replay_file=replay_file,
        requests_per_minute=requests_per_minute,
        timeout_seconds=timeout_seconds,
    )
    try:
        with transaction.atomic():
            return Provider.objects.create(project=project, enabled=enabled, **clean)
    except IntegrityError:
        raise Invalid(
            "Another provider of this project has this name.",
            errors={"name": "Another provider of this project has this name."},
        ) from None


def provider_update(
    *,
    provider: Provider,
    name: str,
    kind: str,
    model: str,
    base_url: str = "",
    api_key_env: str = "",
    replay_file: str = "",
    requests_per_minute: int = 60,
    timeout_seconds: float = 60.0,
    enabled: bool = True,
) -> Provider:
    clean = _provider_clean(
        project=provider.project,
        instance=provider,
        name=name,
        kind=kind,
        model=model,
        base_url=base_url,
        api_key_env=api_key_env,
        replay_file=replay_file,
        requests_per_minute=requests_per_minute,
        timeout_seconds=timeout_seconds,
    )
    for key, value in clean.items():
        setattr(provider, key, value)
    provider.enabled = enabled
    try:
        with transaction.atomic():
            provider.save()
    except IntegrityError:
        raise Invalid(
            "Another provider of this project has this name.",
            errors={"name": "Another provider of this project has this name."},
        ) from None
    return provider


def provider_set_enabled(*, provider: Provider, enabled: bool) -> Provider:
    Provider.objects.filter(pk=provider.pk).update(enabled=enabled, updated_at=timezone.now())
    provider.enabled = enabled
    return provider
