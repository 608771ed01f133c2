"""One family of service errors (CONVENTIONS "Errors").

A service refuses with a ``ServiceError``: a machine-readable ``code``, the HTTP ``status``
it maps to, a ``message`` fit to show to the person who asked, and per-field ``errors``
({field: message}). ``core.apis.exception_handler`` (DRF) and ``core.views.service_errors``
(HTML/htmx views) turn it into a response, so no endpoint needs its own try/except.
"""

from __future__ import annotations

from typing import ClassVar


class ServiceError(Exception):
    code: ClassVar[str] = "invalid"
    status: ClassVar[int] = 400

    def __init__(self, message: str, *, errors: dict[str, str] | None = None, code: str | None = None):
        super().__init__(message)
        self.message = message
        self.errors = dict(errors or {})
        if code is not None:
            self.code = code

    def as_dict(self) -> dict:
        return {"code": self.code, "detail": self.message, "errors": self.errors}


class Invalid(ServiceError):
    """Bad input: 400 with the field(s) and rule(s) that failed."""


class NotFound(ServiceError):
    code = "not_found"
    status = 404


class Forbidden(ServiceError):
    code = "forbidden"
    status = 403


class Conflict(ServiceError):
    """The request is fine but the state does not allow it now (409)."""

    code = "conflict"
    status = 409


class StaleVersion(Conflict):
    """An edit based on an older version than the stored one: nothing was overwritten."""

    code = "stale"


class Busy(Conflict):
    """Another job of the same kind is already pending or running."""

    code = "busy"


class TooLarge(ServiceError):
    code = "too_large"
    status = 413
