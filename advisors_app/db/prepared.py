"""``PreparedQuery``: a queryset compiled to SQL once per process, run with new values.

Django builds and compiles a queryset's SQL every time it is evaluated. For the few small,
indexed reads every chat turn makes before its first token (the chain version, the caller's
conversation, the memory window) that costs about as long as PostgreSQL takes to answer them.
A ``PreparedQuery`` builds its queryset once per database with placeholder values, keeps the
SQL, and later runs it with the caller's values in the placeholders' places, converting the
columns as the ORM would (JSON fields decoded, and so on). The queryset stays the one
definition of the query; only the compiling is cached.

Placeholders must be values the ORM passes through unchanged (strings, and integers within
the field's range: Django turns a lookup on an out-of-range integer into a constant) and must
not appear elsewhere in the query: they are recognised in the compiled parameters by equality.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import QuerySet

__all__ = ["PreparedQuery", "rows_together"]

#: A parameter slot: the placeholder's name, or ``None`` with the constant to send.
_Slot = tuple[str | None, Any]


class _Compiled:
    __slots__ = ("converters", "slots", "sql")

    def __init__(self, sql: str, slots: list[_Slot], converters: list[tuple[int, Any]]) -> None:
        self.sql = sql
        self.slots = slots
        self.converters = converters


class PreparedQuery:
    """``build(**placeholders)`` returns the queryset (a ``values_list`` keeps the column order
    stable); :meth:`rows` runs it with ``values`` for the placeholders, on database
    ``using``, and returns its rows as tuples."""

    def __init__(self, build: Callable[..., QuerySet[Any]], **placeholders: Any) -> None:
        self._build = build
        self._placeholders = placeholders
        self._compiled: dict[str, _Compiled] = {}
        self._lock = threading.Lock()

    def _compile(self, using: str) -> _Compiled:
        with self._lock:
            found = self._compiled.get(using)
            if found is not None:
                return found
            compiler = self._build(**self._placeholders).query.get_compiler(using)
            sql, params = compiler.as_sql()
            slots: list[_Slot] = [(self._placeholder_of(value), value) for value in params]
            missing = set(self._placeholders) - {name for name, _ in slots if name}
            if missing:
                raise ValueError(f"placeholders not found in the query: {sorted(missing)}")
            columns = [select[0] for select in compiler.select[: compiler.col_count]]
            converters = [
                (position, (converters, expression))
                for position, (converters, expression) in compiler.get_converters(columns).items()
            ]
            compiled = self._compiled[using] = _Compiled(sql, slots, converters)
            return compiled

    def _placeholder_of(self, param: Any) -> str | None:
        # By equality: the backend may wrap a value (psycopg's ``Int8(...)`` for a bigint).
        for name, value in self._placeholders.items():
            if type(param) is not bool and param == value:
                return name
        return None

    def rows(self, using: str = "default", **values: Any) -> list[tuple[Any, ...]]:
        """The query's rows with ``values`` in the placeholders' places (blocking)."""
        return rows_together((self, values), using=using)[0]

    def _params(self, using: str, values: Mapping[str, Any]) -> tuple[_Compiled, list[Any]]:
        compiled = self._compiled.get(using) or self._compile(using)
        return compiled, [value if name is None else values[name] for name, value in compiled.slots]


def _converted(
    compiled: _Compiled, rows: list[Any], connection: BaseDatabaseWrapper
) -> list[tuple[Any, ...]]:
    if not compiled.converters:
        return [tuple(row) for row in rows]
    converted = []
    for row in rows:
        items = list(row)
        for position, (converters, expression) in compiled.converters:
            value = items[position]
            for converter in converters:
                value = converter(value, expression, connection)
            items[position] = value
        converted.append(tuple(items))
    return converted


def rows_together(
    *queries: tuple[PreparedQuery, Mapping[str, Any]], using: str = "default"
) -> list[list[tuple[Any, ...]]]:
    """The rows of each ``(query, values)``, in order, read in one round trip (blocking).

    A turn's reads before its first token are independent of each other; waiting for each
    answer before sending the next query cost a round trip per query — on a busy server
    each one a wake-up of PostgreSQL's backend and of this thread. With psycopg 3 the
    queries go out together in pipeline mode and the answers come back together; other
    drivers run them one after the other.
    """
    connection = connections[using]
    statements = [query._params(using, values) for query, values in queries]
    with contextlib.ExitStack() as stack:
        cursors = [stack.enter_context(connection.cursor()) for _ in statements]
        pipeline = getattr(connection.connection, "pipeline", None)
        together = pipeline() if pipeline is not None and len(statements) > 1 else None
        # The pipeline reports a failed query when it ends: as the ORM's DatabaseError.
        with connection.wrap_database_errors, together or contextlib.nullcontext():
            for cursor, (compiled, params) in zip(cursors, statements, strict=True):
                cursor.execute(compiled.sql, params)
        fetched = [cursor.fetchall() for cursor in cursors]
    return [
        _converted(compiled, rows, connection)
        for (compiled, _), rows in zip(statements, fetched, strict=True)
    ]
