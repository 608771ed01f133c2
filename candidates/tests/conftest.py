from __future__ import annotations

import pytest

from candidates.tests.fake_llm import FakeLLM


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    # Every persona is created with a password; PBKDF2 would dominate these tests' run time.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def fake_llm():
    server = FakeLLM().start()
    yield server
    server.stop()


@pytest.fixture
def api_keys(monkeypatch):
    monkeypatch.setenv("CONCORD_TEST_OPENAI_KEY", "sk-test-openai-0123456789")
    monkeypatch.setenv("CONCORD_TEST_GEMINI_KEY", "gm-test-gemini-0123456789")


@pytest.fixture
def three_providers(project, fake_llm, api_keys):
    """One provider of each network kind, all pointing at the fake server."""
    from candidates.services import provider_create

    common = {"project": project, "requests_per_minute": 6000, "timeout_seconds": 2}
    return [
        provider_create(
            name="gpt",
            kind="openai",
            model="gpt-test",
            base_url=f"{fake_llm.url}/v1",
            api_key_env="CONCORD_TEST_OPENAI_KEY",
            **common,
        ),
        provider_create(
            name="gem",
            kind="gemini",
            model="gemini-test",
            base_url=fake_llm.url,
            api_key_env="CONCORD_TEST_GEMINI_KEY",
            **common,
        ),
        provider_create(
            name="qwen", kind="openai-compatible", model="qwen-vl-test", base_url=f"{fake_llm.url}/v1", **common
        ),
    ]
