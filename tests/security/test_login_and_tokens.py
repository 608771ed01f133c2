"""Login rate limits and API tokens (issue item 4).

Failed logins are counted per account and per address (django-axes); at the limit further
attempts, even with the right password, get 429 and a message saying why and for how long.
Before the fix any number of wrong passwords could be tried (every attempt answered 200 with
the login form). Tokens can be created, replaced and revoked on the API token page, by every
role; before the fix there was no way to revoke one.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse
from rest_framework.authtoken.models import Token

from projects.factories import PASSWORD

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"


def attempt(username: str, password: str, *, ip: str, url: str = LOGIN):
    return Client(REMOTE_ADDR=ip).post(url, {"username": username, "password": password})


def limit() -> int:
    return getattr(settings, "AXES_FAILURE_LIMIT", 5)


def test_failed_logins_lock_the_account_from_every_address(lead):
    for i in range(limit()):
        r = attempt("lead", "wrong", ip=f"10.0.0.{i + 1}")  # a new address each time: only the account counts
        if i < limit() - 1:
            assert r.status_code == 200 and b"username and password didn't match" in r.content
    assert r.status_code == 429  # the failure that reaches the limit already says so
    r = attempt("lead", PASSWORD, ip="10.9.9.9")
    assert r.status_code == 429
    assert b"Too many failed logins" in r.content and b"minutes" in r.content
    assert "_auth_user_id" not in r.client.session


def test_failed_logins_lock_the_address_for_every_account(make_user):
    users = [make_user(f"user{i}") for i in range(limit() + 1)]
    statuses = [attempt(user.username, "wrong", ip="10.1.1.1").status_code for user in users[:-1]]  # one each
    assert statuses == [200] * (limit() - 1) + [429]
    r = attempt(users[-1].username, PASSWORD, ip="10.1.1.1")
    assert r.status_code == 429 and b"Too many failed logins" in r.content
    # Another address is not affected.
    r = attempt(users[-1].username, PASSWORD, ip="10.2.2.2")
    assert r.status_code == 302 and r["Location"] == reverse("home")


def test_below_the_limit_and_after_the_cool_off_the_right_password_works(lead):
    from axes.models import AccessAttempt

    for _ in range(limit() - 1):
        attempt("lead", "wrong", ip="10.3.3.3")
    assert attempt("lead", PASSWORD, ip="10.3.3.3").status_code == 302
    for _ in range(limit()):
        attempt("lead", "wrong", ip="10.4.4.4")
    assert attempt("lead", PASSWORD, ip="10.4.4.4").status_code == 429
    # The cool-off is over (attempts aged past it, instead of waiting).
    AccessAttempt.objects.update(
        attempt_time=AccessAttempt.objects.first().attempt_time - settings.AXES_COOLOFF_TIME - timedelta(seconds=1)
    )
    assert attempt("lead", PASSWORD, ip="10.4.4.4").status_code == 302


def test_the_admin_login_is_limited_too(make_user):
    make_user("staff", is_staff=True)
    for _ in range(limit()):
        attempt("staff", "wrong", ip="10.5.5.5", url="/admin/login/")
    assert attempt("staff", PASSWORD, ip="10.6.6.6", url="/admin/login/").status_code == 429


def _api(key: str) -> int:
    return Client(HTTP_AUTHORIZATION=f"Token {key}").get("/api/projects/").status_code


@pytest.mark.parametrize("persona", ["lead", "annotator_a", "reviewer", "auditor", "researcher", "outsider"])
def test_every_role_creates_replaces_and_revokes_its_token(request, persona, project):
    user = request.getfixturevalue(persona)
    c = Client()
    c.force_login(user)
    url = reverse("api_token")
    page = c.get(url)
    assert page.status_code == 200 and b"You have no API token yet" in page.content
    c.post(url, {"action": "create"})
    first = Token.objects.get(user=user).key
    assert first.encode() in c.get(url).content and _api(first) == 200
    r = c.post(url, {"action": "regenerate"}, follow=True)
    second = Token.objects.get(user=user).key
    assert second != first and b"the old one no longer works" in r.content
    assert _api(first) == 401 and _api(second) == 200
    r = c.post(url, {"action": "revoke"}, follow=True)
    assert not Token.objects.filter(user=user).exists()
    assert b"Token revoked" in r.content and b"You have no API token yet" in r.content
    assert _api(second) == 401
    # Re-issued after a revocation.
    c.post(url, {"action": "create"})
    assert _api(Token.objects.get(user=user).key) == 200


def test_token_actions_are_post_only_and_own_only(lead, researcher, project):
    Token.objects.create(user=researcher)
    c = Client()
    c.force_login(lead)
    assert c.get(reverse("api_token"), {"action": "revoke"}).status_code == 200
    assert c.post(reverse("api_token"), {"action": "revoke"}).status_code == 302
    assert Token.objects.filter(user=researcher).exists()  # the lead revoked only their own (none)
    r = Client().post(reverse("api_token"), {"action": "revoke"})
    assert r.status_code == 302 and r["Location"].startswith(LOGIN)
