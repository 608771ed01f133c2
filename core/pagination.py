"""Pagination that refuses bad limit/offset with a 400 naming the parameter (never a 500)."""
from __future__ import annotations

from rest_framework import exceptions
from rest_framework.pagination import LimitOffsetPagination


class StrictLimitOffsetPagination(LimitOffsetPagination):
    """limit/offset must be whole numbers in range: anything else is a 400 naming the parameter."""

    max_limit = 1000
    max_offset = 10**9

    def _parse(self, request, name: str, default: int | None, maximum: int) -> int | None:
        raw = request.query_params.get(name)
        if raw in (None, ""):
            return default
        if not raw.isdigit() or len(raw) > 12:
            raise exceptions.ValidationError({name: f"must be a whole number between 0 and {maximum}"})
        value = int(raw)
        if value > maximum:
            raise exceptions.ValidationError({name: f"must be at most {maximum}"})
        return value

    def get_limit(self, request):
        limit = self._parse(request, self.limit_query_param, self.default_limit, self.max_limit)
        if limit == 0:
            raise exceptions.ValidationError({self.limit_query_param: "must be at least 1"})
        return limit

    def get_offset(self, request):
        return self._parse(request, self.offset_query_param, 0, self.max_offset)


