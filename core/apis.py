"""DRF side of the core: the exception handler and the one REST representation of a job and
of an error. (Parsers and pagination are in core.parsers / core.pagination: DRF's settings
import them while rest_framework.views is being defined, so they must not import it.)"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404
from rest_framework import exceptions, serializers
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from core.errors import ServiceError


def _flatten(detail: Any) -> str:
    if isinstance(detail, dict):
        return "; ".join(f"{k}: {_flatten(v)}" for k, v in detail.items())
    if isinstance(detail, (list, tuple)):
        return "; ".join(_flatten(v) for v in detail)
    return str(detail)


def error_body(code: str, detail: str, errors: dict | None = None) -> dict:
    return {"code": code, "detail": detail, "errors": errors or {}}


def exception_handler(exc, context):
    """Every refusal of every endpoint as ``{"code", "detail", "errors": {field: message}}``."""
    if isinstance(exc, ServiceError):
        return Response(exc.as_dict(), status=exc.status)
    if isinstance(exc, DjangoValidationError):
        if hasattr(exc, "error_dict"):
            errors = {k: " ".join(v) for k, v in exc.message_dict.items()}
            return Response(error_body("invalid", " ".join(errors.values()), errors), status=400)
        return Response(error_body("invalid", " ".join(exc.messages)), status=400)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "Not found.")
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or "Your role does not allow this.")
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    if isinstance(exc, exceptions.ValidationError):
        detail = exc.detail
        if isinstance(detail, dict):
            errors = {k: _flatten(v) for k, v in detail.items()}
            message = errors.pop("non_field_errors", None) or "Some fields are invalid: " + ", ".join(errors)
        else:
            errors, message = {}, _flatten(detail)
        response.data = error_body("invalid", message, errors)
    elif isinstance(exc, exceptions.APIException):
        codes = exc.get_codes()
        response.data = error_body(codes if isinstance(codes, str) else exc.default_code, _flatten(exc.detail))
    return response


class JobOutput(serializers.Serializer):
    """The one REST representation of a job, whatever its kind."""

    id = serializers.IntegerField(source="pk")
    kind = serializers.CharField()
    status = serializers.CharField(help_text="pending / running / done / failed / cancelled")
    phase = serializers.CharField(help_text="What the job is doing now.")
    progress_done = serializers.IntegerField()
    progress_total = serializers.IntegerField()
    percent = serializers.IntegerField()
    error = serializers.CharField(help_text="Why the job failed, naming the row or step.")
    stalled = serializers.BooleanField(help_text="Running without a heartbeat within the lease: its worker was lost.")
    attempts = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    heartbeat_at = serializers.DateTimeField(allow_null=True)
    taken_over_at = serializers.DateTimeField(allow_null=True)


class ErrorOutput(serializers.Serializer):
    """The body of every refusal (core.apis.exception_handler)."""

    code = serializers.CharField(help_text="invalid / stale / busy / not_found / permission_denied / ...")
    detail = serializers.CharField()
    errors = serializers.DictField(child=serializers.CharField(), help_text="Per-field messages.")
