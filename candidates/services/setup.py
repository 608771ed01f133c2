"""Configuring candidate providers: validated settings, API keys named (never stored)."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from candidates.models import Provider, ProviderKind
from core.errors import Invalid
from projects.models import Project

log = logging.getLogger(__name__)

ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]{0,99}$")
MAX_TIMEOUT_SECONDS = 300.0  # below the task's soft time limit (tasks.py)


# -- providers ---------------------------------------------------------------------------------


def _replay_path_clean(value: str) -> str:
    # Replay files are read by the server: confine them to the var directory so a lead cannot
    # point a provider at arbitrary files on the host.
    root = Path(settings.VAR_DIR).resolve()
    path = Path(value)
    path = (path if path.is_absolute() else root / path).resolve()
    if root != path and root not in path.parents:
        raise Invalid(
            "The replay file must be inside the var folder.", errors={"replay_path": f"must be inside {root}"}
        )
    if not path.is_file():
        raise Invalid("No such replay file.", errors={"replay_path": f"no such file: {path}"})
    return str(path)


def _provider_clean(
    *,
    project: Project,
    instance: Provider | None,
    name: str,
    kind: str,
    model: str,
    base_url: str,
    api_key_env: str,
    replay_path: str,
    requests_per_minute: int,
    timeout_seconds: float,
) -> dict:
    errors: dict[str, str] = {}
    name, model, base_url, api_key_env, replay_path = (
        (name or "").strip(),
        (model or "").strip(),
        (base_url or "").strip(),
        (api_key_env or "").strip(),
        (replay_path or "").strip(),
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
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in base_url):
            errors["base_url"] = "Give an http(s) URL, e.g. http://127.0.0.1:8000/v1."
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
        if not replay_path:
            errors["replay_path"] = "A replay provider needs a JSONL file."
        else:
            try:
                replay_path = _replay_path_clean(replay_path)
            except Invalid as exc:
                errors.update(exc.errors)
    else:
        replay_path = ""
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
        "replay_path": replay_path,
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
    replay_path: str = "",
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
        replay_path=replay_path,
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
    replay_path: str = "",
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
        replay_path=replay_path,
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
