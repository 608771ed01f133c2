"""Small, strict readers for settings that come from the environment.

Each helper raises ImproperlyConfigured naming the variable and the bad value, so a typo in
a deployment fails at start-up instead of silently falling back to a default.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be one of 1/0/true/false/yes/no/on/off, got {raw!r}")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from exc
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name} must be >= {minimum}, got {value}")
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [part.strip() for part in raw.split(",") if part.strip()]


def secret_key_from_file(path: Path) -> str:
    """Return the install's secret key, generating it once into a 0600 file.

    The key is never a literal in the repository; each install gets its own. An existing file
    readable by others is refused rather than silently used.
    """
    if path.exists():
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            raise ImproperlyConfigured(f"{path} is readable by other users (mode {oct(mode)}); run chmod 600 on it")
        key = path.read_text().strip()
        if len(key) < 50:
            raise ImproperlyConfigured(f"{path} holds a secret key shorter than 50 characters")
        return key
    path.parent.mkdir(parents=True, exist_ok=True)
    key = secrets.token_urlsafe(64)
    # O_EXCL: two processes starting at once must not both write (and one read a half file).
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return secret_key_from_file(path)
    with os.fdopen(fd, "w") as fh:
        fh.write(key)
    return key
