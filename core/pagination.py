"""Pagination of the REST list endpoints: bad ``limit`` / ``offset`` are refused with 400.

DRF's LimitOffsetPagination silently replaces a malformed or negative value by the default
and passes any large one to the database, where ``limit=99999999999999999999`` overflowed the
integer of the LIMIT clause (500 on SQLite and PostgreSQL; found by schemathesis,
tests/security/test_schemathesis.py). Here both are whole numbers within documented bounds,
and anything else is a 400 naming the parameter.
"""

from __future__ import annotations

import re

from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination

MAX_LIMIT = 1000
#: Far beyond any list's length, and within every database's integer (LIMIT/OFFSET are bigint).
MAX_OFFSET = 2**31 - 1
_WHOLE = re.compile(r"[0-9]{1,12}")


def _bounded(name: str, raw: str, low: int, high: int) -> int:
    if _WHOLE.fullmatch(raw) is None or not low <= int(raw) <= high:
        raise ValidationError({name: [f"must be a whole number from {low} to {high:,} (got {raw[:40]!r})"]})
    return int(raw)


class StrictLimitOffsetPagination(LimitOffsetPagination):
    max_limit = MAX_LIMIT

    def get_limit(self, request) -> int:
        raw = request.query_params.get(self.limit_query_param)
        if raw is None:
            return self.default_limit
        return _bounded(self.limit_query_param, raw, 1, self.max_limit)

    def get_offset(self, request) -> int:
        raw = request.query_params.get(self.offset_query_param)
        if raw is None:
            return 0
        return _bounded(self.offset_query_param, raw, 0, MAX_OFFSET)

    def get_schema_operation_parameters(self, view) -> list[dict]:
        bounds = {self.limit_query_param: (1, self.max_limit), self.offset_query_param: (0, MAX_OFFSET)}
        params = super().get_schema_operation_parameters(view)
        for param in params:
            low, high = bounds[param["name"]]
            param["schema"] = {**param.get("schema", {}), "minimum": low, "maximum": high}
            param["description"] = f"{param.get('description', '')} ({low} to {high:,}; anything else: 400)".strip()
        return params
