"""Shared fixtures: personas (healthchecks-style), isolated media, eager Celery by default.

Tests that need PostgreSQL, Redis, a worker process or Chromium skip with a clear reason when
those are missing, except under CONCORD_REQUIRE_SERVICES=1 (CI), where a skip is a failure.
"""

from __future__ import annotations

import os
import shutil

import pytest

# Playwright's sync API runs an event loop in the test thread; the ORM calls made by the test
# itself are still synchronous and safe.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")


def require(condition: bool, reason: str) -> None:
    if condition:
        return
    if os.environ.get("CONCORD_REQUIRE_SERVICES") == "1":
        pytest.fail(f"required in CI but unavailable: {reason}")
    pytest.skip(reason)


@pytest.fixture(autouse=True)
def _isolated_media(settings, tmp_path):
    # PBKDF2 at full strength costs ~0.3 s per persona; tests don't need it.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    settings.MEDIA_ROOT = tmp_path / "media"
    settings.VAR_DIR = tmp_path / "var"
    settings.VAR_DIR.mkdir()
    # The fake LLM servers listen on 127.0.0.1; candidates/tests/test_endpoints.py turns this off.
    settings.CONCORD_ALLOW_PRIVATE_PROVIDER_URLS = True


@pytest.fixture(autouse=True)
def _eager_celery():
    from concord.celery import app

    old = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = old


@pytest.fixture
def make_user(db):
    from projects.factories import user_create

    return user_create


@pytest.fixture
def lead(make_user):
    return make_user("lead")


@pytest.fixture
def annotator_a(make_user):
    return make_user("annotator_a")


@pytest.fixture
def annotator_b(make_user):
    return make_user("annotator_b")


@pytest.fixture
def annotator_c(make_user):
    return make_user("annotator_c")


@pytest.fixture
def reviewer(make_user):
    return make_user("reviewer")


@pytest.fixture
def auditor(make_user):
    return make_user("auditor")


@pytest.fixture
def researcher(make_user):
    return make_user("researcher")


@pytest.fixture
def outsider(make_user):
    """A lead of another project: must never see anything of ``project``."""
    from projects.factories import project_with_members

    user = make_user("outsider")
    project_with_members("other", lead=[user], annotator=[user], reviewer=[user], researcher=[user])
    return user


@pytest.fixture
def project(lead, annotator_a, annotator_b, reviewer, auditor, researcher):
    from projects.factories import project_with_members

    return project_with_members(
        "p1",
        lead=[lead],
        annotator=[annotator_a, annotator_b],
        reviewer=[reviewer],
        auditor=[auditor],
        researcher=[researcher],
    )


@pytest.fixture
def items(project, tmp_path):
    from projects.factories import items_create

    return items_create(project, tmp_path / "src", 4)


@pytest.fixture
def client_for(client):
    from projects.factories import PASSWORD

    def login(user):
        assert client.login(username=user.username, password=PASSWORD)
        return client

    return login


@pytest.fixture(scope="session")
def chromium_browser():
    require(shutil.which(CHROMIUM) is not None or os.path.exists(CHROMIUM), f"Chromium not found at {CHROMIUM}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # pragma: no cover
        require(False, "playwright is not installed")
    pw = sync_playwright().start()
    browser = pw.chromium.launch(
        executable_path=CHROMIUM,
        args=[
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ],
    )
    yield browser
    browser.close()
    pw.stop()


@pytest.fixture
def page(chromium_browser):
    context = chromium_browser.new_context()
    pg = context.new_page()
    errors: list[str] = []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.console_errors = errors
    yield pg
    context.close()


@pytest.fixture
def browser_login(page, live_server):
    from projects.factories import PASSWORD

    def login(user, *, pg=None):
        pg = pg or page
        pg.goto(f"{live_server.url}/accounts/login/")
        pg.fill("#id_username", user.username)
        pg.fill("#id_password", PASSWORD)
        pg.click("button[type=submit]")
        pg.wait_for_url(f"{live_server.url}/")
        return pg

    return login


@pytest.fixture(autouse=True)
def _plain_static_storage(settings):
    # The manifest storage needs collectstatic; tests (and live_server) use the source files.
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
