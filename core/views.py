"""HTML side of the core error model: one decorator for views and one helper for forms."""

from __future__ import annotations

import json
from contextlib import contextmanager
from functools import wraps

from django.contrib import messages
from django.http import HttpResponseRedirect, JsonResponse
from django.template.response import TemplateResponse
from django.utils.http import url_has_allowed_host_and_scheme

from core.errors import Invalid, ServiceError
from core.parsers import MAX_JSON_DEPTH, depth_within


def error_response(request, exc: ServiceError, *, back: str | None = None):
    """htmx and JSON callers get the error at its status (a fragment, or JSON); a plain form
    post gets the message on the page it came from (its Referer, when on this site)."""
    if getattr(request, "htmx", False):
        return TemplateResponse(request, "core/_error.html", {"error": exc}, status=exc.status)
    if "application/json" in request.headers.get("Accept", "") or request.content_type == "application/json":
        return JsonResponse(exc.as_dict(), status=exc.status)
    messages.error(request, " ".join([exc.message, *(f"{k}: {v}" for k, v in exc.errors.items() if k != "__all__")]))
    if back is None:
        back = request.headers.get("Referer", "")
        if request.method == "GET" or not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
            back = request.get_full_path() if request.method == "GET" else "/"
    return HttpResponseRedirect(back)


def service_errors(view=None, *, back=None):
    """Turn a ServiceError raised anywhere below the view into a response (see error_response).

    ``back(request, *args, **kwargs) -> url``: where a plain form post returns with the message
    (default: the page it came from)."""

    def decorate(view):
        @wraps(view)
        def wrapper(request, *args, **kwargs):
            try:
                return view(request, *args, **kwargs)
            except ServiceError as exc:
                return error_response(request, exc, back=back(request, *args, **kwargs) if back else None)

        return wrapper

    return decorate(view) if view is not None else decorate


@contextmanager
def form_errors(form):
    """Inside a form view: a ServiceError becomes errors on the bound form (per field when the
    field exists, else on the form), and the view goes on to render the form again."""
    try:
        yield
    except ServiceError as exc:
        placed = set()
        for name, message in exc.errors.items():
            if name in form.fields:
                form.add_error(name, message)
                placed.add(message)
        if exc.message not in placed:
            form.add_error(None, exc.message)


class CaughtError:
    """What caught_service_error() caught: the error, its message, per-field errors and status."""

    exc: ServiceError | None = None
    message = ""
    status = 200

    def __init__(self):
        self.errors: dict[str, str] = {}


@contextmanager
def caught_service_error():
    """Inside a page view that re-renders itself with the messages (nothing typed is lost): a
    ServiceError ends the block and is kept on the yielded object; the view goes on after it."""
    caught = CaughtError()
    try:
        yield caught
    except ServiceError as exc:
        caught.exc, caught.message, caught.errors, caught.status = exc, exc.message, dict(exc.errors), exc.status


#: Request bodies of the JSON views (reviewer page): bounded in size and nesting depth, so
#: hostile input answers 400, never 500 (a RecursionError from deep nesting).
MAX_JSON_BODY = 1_000_000


def json_body(request) -> dict:
    """The request's JSON object, or Invalid (400) naming what is wrong with it."""
    if len(request.body) > MAX_JSON_BODY:
        raise Invalid(f"The request body is larger than {MAX_JSON_BODY:,} bytes.")
    try:
        data = json.loads(request.body or b"{}")
    except RecursionError:
        raise Invalid(f"The JSON is nested deeper than {MAX_JSON_DEPTH} levels.") from None
    except (ValueError, UnicodeDecodeError):
        raise Invalid("The request body is not valid JSON.") from None
    if not isinstance(data, dict):
        raise Invalid("Send a JSON object.")
    if not depth_within(data, MAX_JSON_DEPTH):
        raise Invalid(f"The JSON is nested deeper than {MAX_JSON_DEPTH} levels.")
    return data
