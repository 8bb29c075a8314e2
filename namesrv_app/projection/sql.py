"""Hand-written SQL for the projection's busiest tables: one prepared statement per chunk.

The tables a registration storm rewrites (queue data, wire routes, live brokers) are
written this way instead of with the ORM's bulk_create and delete, which built a model
instance per row and a new SQL text per chunk and sent signals (see docs/BENCHMARKS.md,
"registration storm"). Same rows, same transaction: the caller opens it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TypeVar

from django.db import connections
from django.db.models import Field, Model

from namesrv_app.db_router import PROJECTION_DB
from namesrv_app.projection.pacing import keep_pace

SQL_CHUNK_ROWS = 400
"""Keys per ``IN (...)`` clause: below SQLite's historical limit of 999 variables."""

T = TypeVar("T")
Row = tuple[Any, ...]


def chunks(items: Iterable[T]) -> Iterator[list[T]]:
    """``items`` in lists of :data:`SQL_CHUNK_ROWS`, the writer's pace kept between two."""
    batch: list[T] = []
    for item in items:
        batch.append(item)
        if len(batch) >= SQL_CHUNK_ROWS:
            yield batch
            batch = []
            keep_pace()
    if batch:
        yield batch


def _table(model: type[Model], fields: Sequence[str]) -> tuple[str, list[str]]:
    """``model``'s table and the columns of ``fields``, quoted for the backend."""
    quote = connections[PROJECTION_DB].ops.quote_name
    meta = model._meta
    columns = []
    for name in fields:
        field = meta.get_field(name)
        assert isinstance(field, Field) and field.column, f"{model.__name__}.{name}: no column"
        columns.append(quote(field.column))
    return quote(meta.db_table), columns


def insert(model: type[Model], fields: Sequence[str], rows: Sequence[Row]) -> None:
    """INSERT ``rows`` (values of ``fields``, in order) into ``model``'s table."""
    if not rows:
        return
    table, columns = _table(model, fields)
    marks = ", ".join(["%s"] * len(fields))
    sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"
    with connections[PROJECTION_DB].cursor() as cursor:
        for chunk in chunks(rows):
            cursor.executemany(sql, chunk)


def delete_in(model: type[Model], field_name: str, values: Iterable[Any]) -> None:
    """DELETE the rows of ``model`` whose ``field_name`` is one of ``values``."""
    table, (column,) = _table(model, (field_name,))
    with connections[PROJECTION_DB].cursor() as cursor:
        for chunk in chunks(values):
            marks = ", ".join(["%s"] * len(chunk))
            cursor.execute(f"DELETE FROM {table} WHERE {column} IN ({marks})", chunk)


def delete_keys(model: type[Model], fields: Sequence[str], keys: Sequence[Row]) -> None:
    """DELETE the rows of ``model`` whose ``fields`` equal one of ``keys``."""
    if not keys:
        return
    table, columns = _table(model, fields)
    where = " AND ".join(f"{column} = %s" for column in columns)
    with connections[PROJECTION_DB].cursor() as cursor:
        for chunk in chunks(keys):
            cursor.executemany(f"DELETE FROM {table} WHERE {where}", chunk)
