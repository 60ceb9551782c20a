"""The batch statements' array parameters, in PostgreSQL's binary array format, made cheaply.

psycopg dumps a Python list by looking at its elements (a dumper per element type,
upgraded for the list's shape, then one call per element), in Python: for WRITE_PLAIN's
28 arrays that was the largest part of a batch's client CPU (callgrind, a batch of 64
plain puts: 171 k instructions a put with psycopg's list dumping, 148 k with this;
benchmarks/pg_put_cpu.py). A column here is
wrapped in the class of its SQL type, whose dumper writes the whole array at once:
the element length words and values come from ``struct`` over the column (C loops),
with a Python loop only for a column that holds a NULL.

The wire format (PostgreSQL's ``array_send``): dimensions, a has-NULLs flag, the
element type's oid, then per dimension its length and lower bound (1), then each
element as a 4-byte length (-1: NULL) and its binary value.

Anything a column holds that the fast path cannot write (a value of another type, a
NUL in a text, an integer out of range) raises ``psycopg.DataError``, a statement
failure: the store then writes the batch again with the one-by-one statements, where
psycopg's own dumpers refuse it as they always did.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Sequence
from itertools import chain, repeat
from typing import Any, ClassVar, cast

import psycopg
from psycopg.adapt import Dumper
from psycopg.pq import Format

_I32 = struct.Struct("!i")
_NULL = _I32.pack(-1)
_DIM = struct.Struct("!iiIii")
"""One dimension: ndim 1, the NULL flag, the element oid, the length, lower bound 1."""
_EMPTY = struct.Struct("!iiI")
_INT8 = struct.Struct("!iq")
_INT4 = struct.Struct("!ii")


class Column:
    """A batch column of one SQL type (a subclass per type), as an array parameter."""

    __slots__ = ("items",)
    element_oid: ClassVar[int]

    def __init__(self, items: Sequence[Any]) -> None:
        self.items = items


class TextColumn(Column):
    __slots__ = ()
    element_oid = 25


class ByteaColumn(Column):
    __slots__ = ()
    element_oid = 17


class Int8Column(Column):
    __slots__ = ()
    element_oid = 20


class Int4Column(Column):
    __slots__ = ()
    element_oid = 23


_ARRAY_OIDS = {TextColumn: 1009, ByteaColumn: 1001, Int8Column: 1016, Int4Column: 1007}
COLUMNS: dict[str, type[Column]] = {
    "text": TextColumn,
    "bytea": ByteaColumn,
    "bigint": Int8Column,
    "int": Int4Column,
}
"""By the SQL type a statement casts the parameter to (``%b::bigint[]``)."""


def column_types(sql: str) -> list[type[Column]]:
    """The column classes of a statement's array parameters, in order, from its casts."""
    return [COLUMNS[t] for t in re.findall(r"%b::(\w+)\[\]", sql)]


def _head(oid: int, n: int, nulls: bool) -> bytes:
    return _DIM.pack(1, nulls, oid, n, 1) if n else _EMPTY.pack(0, 0, oid)


def _varlen(oid: int, items: Sequence[bytes | None]) -> bytes:
    if None in items:
        body = [_NULL if b is None else _I32.pack(len(b)) + b for b in items]
        return _head(oid, len(items), True) + b"".join(body)
    present = cast("Sequence[bytes]", items)
    lengths = map(_I32.pack, map(len, present))
    return _head(oid, len(items), False) + b"".join(
        chain.from_iterable(zip(lengths, present, strict=True))
    )


_BYTES_OR_NULL = frozenset((bytes, type(None)))


def _bytea(items: Sequence[Any]) -> bytes:
    if not _BYTES_OR_NULL.issuperset(map(type, items)):
        # A memoryview's len() counts its items, not its bytes (4 for 16 bytes of int32s):
        # the length word would not match the value. Their bytes, as psycopg sends them.
        items = [b if b is None or type(b) is bytes else memoryview(b).tobytes() for b in items]
    return _varlen(17, items)


def _text(items: Sequence[str | None], encoding: str) -> bytes:
    present = [s for s in items if s is not None]
    if "\x00" in "".join(present):  # TypeError for a value that is not a str
        raise psycopg.DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
    if encoding == "utf-8":
        encoded = list(map(str.encode, present))
    else:
        encoded = [s.encode(encoding) for s in present]
    if len(present) != len(items):
        it = iter(encoded)
        return _varlen(25, [None if s is None else next(it) for s in items])
    return _varlen(25, encoded)


def _fixed(oid: int, pack: struct.Struct, size: int, items: Sequence[int | None]) -> bytes:
    if None in items:
        body = [_NULL if v is None else pack.pack(size, v) for v in items]
        return _head(oid, len(items), True) + b"".join(body)
    return _head(oid, len(items), False) + b"".join(map(pack.pack, repeat(size), items))


class _ColumnDumper(Dumper):
    format = Format.BINARY

    def __init__(self, cls: type, context: Any = None) -> None:
        super().__init__(cls, context)
        self.oid = _ARRAY_OIDS[cast("type[Column]", cls)]
        # The text's bytes in the client encoding, as psycopg's own str dumper sends them:
        # UTF-8 for SQL_ASCII (codec "ascii"), which takes any bytes but NUL, as psycopg does.
        encoding = "utf-8" if self.connection is None else self.connection.info.encoding
        self._encoding = "utf-8" if encoding == "ascii" else encoding

    def dump(self, obj: Any) -> bytes:
        items = obj.items
        try:
            if isinstance(obj, TextColumn):
                return _text(items, self._encoding)
            if isinstance(obj, ByteaColumn):
                return _bytea(items)
            if isinstance(obj, Int8Column):
                return _fixed(20, _INT8, 8, items)
            return _fixed(23, _INT4, 4, items)
        except (TypeError, ValueError, struct.error) as exc:  # psycopg.DataError is neither
            raise psycopg.DataError(f"a batch column psycopg would have to dump: {exc}") from exc


def register(conn: psycopg.Connection[Any]) -> None:
    """Dump the column classes on ``conn``."""
    for cls in _ARRAY_OIDS:
        conn.adapters.register_dumper(cls, _ColumnDumper)
