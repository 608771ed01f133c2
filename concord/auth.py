"""Login rate limiting (django-axes): failed logins are counted per account and per address.

At ``AXES_FAILURE_LIMIT`` failures within ``AXES_COOLOFF_TIME`` (settings, from the
environment) every further login for that account, or from that address, is refused with 429
and a message until the cool-off has passed; an administrator can lift it earlier
(``manage.py axes_reset_username <name>`` / ``axes_reset_ip <address>``, or the admin).
"""

from __future__ import annotations

from axes.backends import AxesStandaloneBackend
from django.conf import settings
from django.shortcuts import render


class LoginRateLimitBackend(AxesStandaloneBackend):
    """Axes' check, for logins made over HTTP (the login page and the admin's).

    ``authenticate()`` without a request is no HTTP login (Django's test client ``login()``,
    management commands): there is no address to count, so this backend stays out of it and
    the next backend decides; Axes' own backend would raise instead.
    """

    def authenticate(self, request, username=None, password=None, **kwargs):
        if request is None:
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)


def lockout_response(request, original_response=None, credentials=None):
    """AXES_LOCKOUT_CALLABLE: the page a locked-out login gets (429)."""
    minutes = max(1, int(settings.AXES_COOLOFF_TIME.total_seconds() // 60))
    return render(
        request,
        "registration/lockout.html",
        {
            "minutes": minutes,
            "failure_limit": settings.AXES_FAILURE_LIMIT,
        },
        status=429,
    )
