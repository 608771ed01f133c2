"""Where a provider may send requests and which replay files it may read (SSRF, file reads)."""

from __future__ import annotations

import socket

import pytest
from django.urls import reverse

from candidates.endpoints import EndpointRefused, base_url_check, replay_file_path
from candidates.models import Provider
from candidates.providers import PermanentProviderError, ProviderConfig, client_for
from candidates.services import provider_create
from core.errors import ServiceError as ValidationError

pytestmark = pytest.mark.django_db


@pytest.fixture
def strict(settings):
    settings.CONCORD_ALLOW_PRIVATE_PROVIDER_URLS = False


def _resolves_to(monkeypatch, address: str):
    family = socket.AF_INET6 if ":" in address else socket.AF_INET

    def fake(host, port, *args, **kwargs):
        return [(family, socket.SOCK_STREAM, 6, "", (address, port))]

    monkeypatch.setattr(socket, "getaddrinfo", fake)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:6379/",
        "http://localhost:8000/v1",
        "http://169.254.169.254/latest/meta-data/",
        "http://10.0.0.5/v1",
        "http://192.168.1.10:8000/v1",
        "http://[::1]:8000/v1",
        "http://0.0.0.0/",
    ],
)
def test_local_and_private_addresses_are_refused(strict, url):
    with pytest.raises(EndpointRefused, match="local or private"):
        base_url_check(url)


def test_a_name_that_resolves_to_a_private_address_is_refused(strict, monkeypatch):
    _resolves_to(monkeypatch, "10.1.2.3")
    with pytest.raises(EndpointRefused, match="local or private"):
        base_url_check("https://innocent.example.org/v1")


def test_public_addresses_pass(strict, monkeypatch):
    _resolves_to(monkeypatch, "93.184.216.34")
    assert base_url_check("https://api.example.org/v1") == "https://api.example.org/v1"


@pytest.mark.parametrize(
    "url, message",
    [
        ("file:///etc/passwd", "http"),
        ("gopher://x/", "http"),
        ("http://user:pw@api.example.org/", "credentials"),
        ("http://api.example.org:99999/", "port"),
        ("http://api .example.org/", "spaces"),
    ],
)
def test_malformed_urls_are_refused_whatever_the_setting(url, message):
    with pytest.raises(EndpointRefused, match=message):
        base_url_check(url)


def test_the_opt_in_allows_a_lab_server(settings):
    settings.CONCORD_ALLOW_PRIVATE_PROVIDER_URLS = True
    assert base_url_check("http://10.0.0.5:8000/v1")


def test_saving_a_provider_at_a_private_address_names_the_problem(strict, project):
    with pytest.raises(ValidationError) as exc:
        provider_create(
            project=project, name="p", kind="openai-compatible", model="m", base_url="http://169.254.169.254/v1"
        )
    assert "local or private" in exc.value.errors["base_url"]
    assert "CONCORD_ALLOW_PRIVATE_PROVIDER_URLS" in exc.value.errors["base_url"]
    assert not Provider.objects.exists()


def test_the_address_is_checked_again_before_a_call(settings, project):
    """A provider saved while the opt-in was on (or a name that now resolves elsewhere) is refused at call time."""
    settings.CONCORD_ALLOW_PRIVATE_PROVIDER_URLS = False
    config = ProviderConfig(kind="openai-compatible", model="m", base_url="http://127.0.0.1:6379/v1")
    with pytest.raises(PermanentProviderError, match="local or private"):
        client_for(config)


@pytest.mark.parametrize(
    "name",
    ["/etc/passwd", "../secret_key", "../../x.jsonl", "a/b.jsonl", "x.txt", ".hidden.jsonl", "", "x" * 200 + ".jsonl"],
)
def test_replay_files_are_names_not_paths(project, name):
    with pytest.raises(EndpointRefused):
        replay_file_path(project.pk, name)


def test_replay_files_of_another_project_are_not_reachable(project, lead):
    from candidates.factories import replay_file_write
    from projects.factories import project_with_members

    other = project_with_members("other", lead=[lead])
    replay_file_write(other, "", name="theirs.jsonl")
    with pytest.raises(ValidationError) as exc:
        provider_create(project=project, name="r", kind="replay", model="m", replay_file="theirs.jsonl")
    assert "no replay file" in exc.value.errors["replay_file"]


def test_provider_form_errors_show_no_server_path(strict, project, lead, client_for, settings):
    c = client_for(lead)
    r = c.post(
        reverse("candidate_providers", args=[project.slug]),
        {
            "name": "p",
            "kind": "replay",
            "model": "m",
            "replay_file": "../../../etc/passwd",
            "requests_per_minute": 60,
            "timeout_seconds": 60,
        },
    )
    assert r.status_code == 200  # the form again, with the message by the field
    body = r.content.decode()
    assert "letters, digits" in body
    assert str(settings.VAR_DIR) not in body and "/etc/passwd" not in body.replace("../../../etc/passwd", "")
