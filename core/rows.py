"""Model instances from hand-written SQL, for the few queries every annotator request runs.

Building a query through the ORM costs about 0.3-0.6 ms of CPU per query (compiling the
queryset into SQL, then the iterator machinery), several times what PostgreSQL needs to answer
it; the annotation workspace's hot queries (who is this member, their preference, their
annotation) are the same few shapes on every request. ``model_from_row`` turns a row whose
first columns are ``columns(model)`` into the instance the ORM would have built: the same
``Model.from_db`` with the fields' database converters (JSON decoding, time zones) applied.

Use it only for short, fixed queries whose SQL is written once at import; parameters always go
through the driver (``cursor.execute(sql, params)``), never into the string.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

from django.db import connections, router
from django.db.models import Model
from django.db.transaction import TransactionManagementError


@cache
def _layout(model: type[Model], alias: str) -> tuple[list[str], list[tuple[int, Any, list]]]:
    """(attnames in column order, [(index, field, converters)] of the fields that convert)."""
    connection = connections[alias]
    fields = model._meta.concrete_fields
    converting = []
    for i, f in enumerate(fields):
        # As the ORM's compiler asks (SQLCompiler.get_converters): of the column expression.
        col = f.get_col(model._meta.db_table)
        converters = connection.ops.get_db_converters(col) + col.get_db_converters(connection)
        if converters:
            converting.append((i, col, converters))
    return [f.attname for f in fields], converting


def columns(model: type[Model], table_alias: str, names: Sequence[str] | None = None) -> str:
    """The SELECT list of every concrete column of ``model``, in ``model_from_row``'s order (or
    of the fields ``names``, in that order, for ``values_of``)."""
    fields = model._meta.concrete_fields if names is None else [model._meta.get_field(n) for n in names]
    return ", ".join(f'{table_alias}."{f.column}"' for f in fields)


def width(model: type[Model]) -> int:
    return len(model._meta.concrete_fields)


def alias_for(model: type[Model]) -> str:
    return router.db_for_read(model)


def model_from_row(model: type[Model], row: Sequence[Any], *, start: int = 0, alias: str | None = None) -> Model:
    """The ``model`` instance of ``row[start:start + width(model)]`` (the ``columns`` order)."""
    alias = alias or alias_for(model)
    names, converting = _layout(model, alias)
    values = list(row[start : start + len(names)])
    connection = connections[alias]
    for i, f, converters in converting:
        for convert in converters:
            values[i] = convert(values[i], f, connection)
    return model.from_db(alias, names, values)


def reverse_one_to_one_from_row(
    instance: Model, accessor: str, row: Sequence[Any], *, start: int, alias: str
) -> Model | None:
    """The reverse one-to-one ``accessor`` of ``instance`` from ``row[start:]`` (its model's
    ``columns`` from a LEFT JOIN: a NULL primary key is none), cached on both sides as
    ``select_related`` does, so reading it runs no query."""
    relation = instance._meta.get_field(accessor)
    model = relation.related_model
    pk_at = start + model._meta.concrete_fields.index(model._meta.pk)
    related = model_from_row(model, row, start=start, alias=alias) if row[pk_at] is not None else None
    if related is not None:
        relation.field.set_cached_value(related, instance)
    relation.set_cached_value(instance, related)
    return related


def instances(model: type[Model], sql: str, params: Sequence[Any]) -> list[Model]:
    """The ``model`` instances of a query whose select list is ``columns(model, ...)``."""
    alias = alias_for(model)
    return [model_from_row(model, row, alias=alias) for row in fetch_rows(alias, sql, params)]


def for_update_of(alias: str, table_alias: str) -> str:
    """The row-lock clause of ``select_for_update(of=("self",))`` for a hand-written query, which
    must run inside a transaction as the ORM's does (SQLite: none; its IMMEDIATE transactions
    serialize writers instead)."""
    connection = connections[alias]
    if not connection.in_atomic_block:
        raise TransactionManagementError("select_for_update cannot be used outside of a transaction.")
    if not connection.features.has_select_for_update:
        return ""
    if connection.features.has_select_for_update_of:
        return f" FOR UPDATE OF {table_alias}"
    return " FOR UPDATE"


def fetch_rows(alias: str, sql: str, params: Sequence[Any]) -> list[tuple]:
    with connections[alias].cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def values_of(model: type[Model], names: Sequence[str], row: Sequence[Any], *, alias: str | None = None) -> tuple:
    """``row``'s values as the ORM's ``values_list(*names)`` of ``model``'s own fields gives them
    (converted: on SQLite a time comes back as text)."""
    alias = alias or alias_for(model)
    connection = connections[alias]
    out = []
    for name, value in zip(names, row, strict=True):
        col, converters = _column_converters(model, name, alias)
        for convert in converters:
            value = convert(value, col, connection)
        out.append(value)
    return tuple(out)


@cache
def _column_converters(model: type[Model], name: str, alias: str) -> tuple[Any, list]:
    connection = connections[alias]
    col = model._meta.get_field(name).get_col(model._meta.db_table)
    return col, connection.ops.get_db_converters(col) + col.get_db_converters(connection)


def adapt_time(alias: str, value):
    """A datetime parameter as the ORM passes it (SQLite: UTC text; PostgreSQL: as is)."""
    return connections[alias].ops.adapt_datetimefield_value(value)
