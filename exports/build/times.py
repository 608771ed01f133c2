"""Timestamps as a release writes them (``2026-05-28T20:26:40.000000Z``, UTC), made by the
database where it can: rows then carry text instead of datetimes to decode and format."""

from __future__ import annotations

from django.db import connection
from django.db.models import CharField, Func


def iso_utc(ts) -> str | None:
    """``ts.strftime("%Y-%m-%dT%H:%M:%S.%fZ")``, from isoformat (~4x faster; same text: the
    first 26 characters of isoformat with microseconds are exactly those fields)."""
    return ts.isoformat(timespec="microseconds")[:26] + "Z" if ts is not None else None


class IsoUtc(Func):
    """PostgreSQL: a timestamp as ``iso_utc`` writes it. The text sorts as the times do
    (fixed width), so a newest time is a ``max`` of texts."""

    template = "to_char(%(expressions)s AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')"
    output_field = CharField()


def iso_in_sql() -> bool:
    """Whether this database writes the text itself (IsoUtc), else rows carry datetimes."""
    return connection.vendor == "postgresql"
