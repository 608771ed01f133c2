"""Where a provider may send requests and read replies (SSRF and file-read protection).

- A base URL is http(s) with a host and no credentials, and must not reach this machine or a
  private network (loopback, RFC 1918, link-local, reserved, multicast: e.g. Redis on
  127.0.0.1:6379, cloud metadata at 169.254.169.254) unless the deployment opts in with
  CONCORD_ALLOW_PRIVATE_PROVIDER_URLS=1 (a self-hosted vLLM on the lab network; the tests' local
  fake server). Checked when the provider is saved and again before every call, on the
  addresses the name resolves to then (a name that later resolves elsewhere is caught).
- A replay file is a *name* in the project's own replay folder (var/replay/<project id>/),
  never a path: a lead cannot point a provider at another project's file or the secret key, and
  messages show the name only, never a server path.
"""

from __future__ import annotations

import ipaddress
import re
import socket
from pathlib import Path
from urllib.parse import urlsplit

from django.conf import settings

REPLAY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}\.jsonl$")
MAX_REPLAY_BYTES = 200 * 1024 * 1024


class EndpointRefused(ValueError):
    """A base URL or replay file the provider may not use, with the reason to show the lead."""


def base_url_check(url: str) -> str:
    """The URL, or EndpointRefused saying why it may not be used."""
    if any(c.isspace() for c in url):
        raise EndpointRefused("the URL contains spaces")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise EndpointRefused("give an http(s) URL with a host, e.g. https://api.example.org/v1")
    if parts.username or parts.password:
        raise EndpointRefused("credentials do not belong in the URL: name an API key variable instead")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
    except ValueError:
        raise EndpointRefused("the port is not a number between 0 and 65535") from None
    if getattr(settings, "CONCORD_ALLOW_PRIVATE_PROVIDER_URLS", False):
        return url
    try:
        infos = socket.getaddrinfo(parts.hostname, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise EndpointRefused(f"the host {parts.hostname!r} cannot be resolved") from None
    for info in infos:
        address = ipaddress.ip_address(info[4][0].split("%", 1)[0])
        if (
            address.is_private
            or address.is_loopback
            or address.is_link_local
            or address.is_reserved
            or address.is_multicast
            or address.is_unspecified
        ):
            raise EndpointRefused(
                f"{parts.hostname!r} points at a local or private address; a server on your own network "
                "needs CONCORD_ALLOW_PRIVATE_PROVIDER_URLS=1 in the server's environment"
            )
    return url


def replay_folder(project_id: int) -> Path:
    return Path(settings.VAR_DIR) / "replay" / str(int(project_id))


def replay_file_path(project_id: int, name: str) -> Path:
    """The file of a replay provider, by name inside its project's folder (EndpointRefused otherwise)."""
    if not isinstance(name, str) or not REPLAY_NAME.match(name):
        raise EndpointRefused("a replay file name is letters, digits, '.', '_' or '-' and ends in .jsonl")
    folder = replay_folder(project_id).resolve()
    path = (folder / name).resolve()
    if path.parent != folder:
        raise EndpointRefused("a replay file is named, not given as a path")
    return path


def replay_names(project_id: int) -> list[str]:
    folder = replay_folder(project_id)
    return (
        sorted(p.name for p in folder.glob("*.jsonl") if p.is_file() and REPLAY_NAME.match(p.name))
        if folder.is_dir()
        else []
    )
