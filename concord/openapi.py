"""OpenAPI postprocessing: every operation documents the error statuses it can answer.

drf-spectacular documents what a view's ``extend_schema`` says, usually the success status
only. The refusals below are produced for every endpoint by the framework and by
projects.access, so they are added here, once, for every operation (a new endpoint gets
them too); statuses specific to one operation (409 stale or busy, 413 upload too large, ...)
stay in that view's ``extend_schema``. tests/security/test_schemathesis.py fails on any
status an endpoint returns that its operation does not list.
"""

from __future__ import annotations

ERROR_SCHEMA = {
    "type": "object",
    "description": "Why the request was refused.",
    "properties": {
        "detail": {"type": "string", "description": "A message fit to show to the user."},
        "code": {"type": "string", "description": "Machine-readable reason, where the endpoint has several."},
        "errors": {"type": "object", "additionalProperties": True, "description": "Per-field messages."},
    },
    "additionalProperties": True,
}

#: status -> description, and the condition under which an operation can answer it.
AUTH = {
    "401": "No or invalid credentials (send `Authorization: Token <key>`).",
    "403": "Authenticated, but the caller's role in this project does not allow this "
    "(or a session request without its CSRF token).",
}
NOT_FOUND = "No such project for the caller (non-members get 404, never 403), or no such object in it."
BAD_REQUEST = "Malformed request: invalid parameters or body (per-field messages in `errors`)."
UNSUPPORTED = "The body's content type is not one this endpoint reads (see its request body)."
BODY_METHODS = {"post", "put", "patch"}


def _error_response(description: str) -> dict:
    schema = {"$ref": "#/components/schemas/Error"}
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def document_error_responses(result: dict, generator, request, public) -> dict:
    """drf-spectacular POSTPROCESSING_HOOKS entry (see SPECTACULAR_SETTINGS)."""
    result.setdefault("components", {}).setdefault("schemas", {}).setdefault("Error", ERROR_SCHEMA)
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            responses = operation["responses"]
            wanted = dict(AUTH)
            if "{" in path:
                wanted["404"] = NOT_FOUND
            if method in BODY_METHODS or operation.get("parameters"):
                wanted["400"] = BAD_REQUEST
            if "requestBody" in operation:
                wanted["415"] = UNSUPPORTED
            for status, description in wanted.items():
                responses.setdefault(status, _error_response(description))
    return result
