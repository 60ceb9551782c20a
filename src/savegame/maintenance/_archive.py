"""The export file: ``savegame export`` writes it, ``savegame import`` reads it.

Layout (docs/export.md)::

    b"SAVEGAME-EXPORT\\n"                      16 bytes of magic
    frame*                                     one per record
    frame := length (4 bytes, big-endian) | SHA-256 of body (32 bytes) | body
    body  := zstd(JSON object)

The first frame is the header ``{"type": "header", "format": "savegame-export",
"version": 1, "created": ISO time, "counts": {...}}``, then one frame per run row,
checkpoint, journal entry and blob, then ``{"type": "end", "sha256": ...}``, the
SHA-256 of every byte before that last frame. Each frame has its own check so a
damaged byte is reported with the record and the offset it sits in; the end
frame makes a truncated file (or one with a frame cut out) fail as a whole.

Records are the store's rows as they are stored (sealed payloads stay sealed),
serialized field by field from their dataclasses (a field added to RunInfo,
CheckpointHeader or EffectRecord travels without a change here): bytes as
base64, times as ISO 8601, enums by value. Bodies are compressed one by one,
not the file as a whole, so damage stays attributable to one record.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import hashlib
import struct
import types
import typing
from collections.abc import Iterator, Mapping
from datetime import datetime
from typing import Any, TypeVar

import orjson
import zstandard

from savegame.errors import DamagedExportError

MAGIC = b"SAVEGAME-EXPORT\n"
FORMAT = "savegame-export"
VERSION = 1
#: A record's body may not decompress beyond this (a hostile file must not fill memory).
MAX_RECORD = 1 << 30
#: Nor the whole file beyond this many times its size (plus a floor). Records travel as
#: stored, already compressed, so a real export grows about 1.3x; a zstd bomb of a few
#: kilobytes per record would otherwise be held whole, record after record.
MAX_GROWTH, GROWTH_FLOOR = 20, 64 << 20
_FRAME = struct.Struct(">I32s")


class Budget:
    """What one file may unpack to, in all: :data:`MAX_GROWTH` times its size plus
    :data:`GROWTH_FLOOR`. Every zstd frame in it is charged: a record's body here, and the
    frames nested inside records (a blob's bytes, a checkpoint's payload: zstd again) when
    the import checks them. zstandard allocates the size a frame states before reading
    it, so each frame is held to the budget by the size it states, before it is unpacked
    (measured: a 419-byte file whose blob stated 1.5 GiB took 1.6 GB of memory)."""

    def __init__(self, file_size: int) -> None:
        self.left = GROWTH_FLOOR + MAX_GROWTH * file_size

    def take(self, size: int) -> None:
        self.left -= size


T = TypeVar("T")


# -- records as JSON, by their dataclass fields -------------------------------------


def encode(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_json(value)
    if isinstance(value, tuple | list):
        return [encode(v) for v in value]
    if isinstance(value, Mapping):
        return {k: encode(v) for k, v in value.items()}
    return value


def to_json(record: Any) -> dict[str, Any]:
    """A record's fields as JSON data (every field, so new ones come along)."""
    return {f.name: encode(getattr(record, f.name)) for f in dataclasses.fields(record)}


def _wrong(hint: Any, value: Any) -> ValueError:
    return ValueError(f"expected {getattr(hint, '__name__', hint)}, found {type(value).__name__}")


def decode(hint: Any, value: Any) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return decode(inner, value)
    if hint is Any:
        return value
    if origin is tuple:
        if not isinstance(value, list):
            raise _wrong(hint, value)
        return tuple(decode(args[0], v) for v in value)
    if origin is not None and issubclass(origin, Mapping):
        if not isinstance(value, dict):
            raise _wrong(hint, value)
        return value
    if hint is bytes:
        if not isinstance(value, str):
            raise _wrong(hint, value)
        return base64.b64decode(value, validate=True)
    if hint is datetime:
        when = datetime.fromisoformat(value) if isinstance(value, str) else None
        if when is None or when.tzinfo is None:
            raise ValueError(f"expected an ISO time with a zone, found {value!r}")
        return when
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return hint(value)
    if dataclasses.is_dataclass(hint):
        return from_json(typing.cast(type[Any], hint), value)
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if not isinstance(value, hint) or (hint is int and isinstance(value, bool)):
        raise _wrong(hint, value)
    return value


def from_json(cls: type[T], data: Any) -> T:
    """The record ``to_json`` wrote. Raises ValueError naming the field that is wrong."""
    if not isinstance(data, dict):
        raise _wrong(cls, data)
    hints = typing.get_type_hints(cls)
    known = {f.name for f in dataclasses.fields(typing.cast(Any, cls))}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{cls.__name__} has no field {unknown[0]!r} (a newer savegame's file?)")
    values = {}
    for name in known & set(data):
        try:
            values[name] = decode(hints[name], data[name])
        except (ValueError, TypeError, KeyError) as exc:
            raise ValueError(f"{cls.__name__}.{name}: {exc}") from None
    try:
        return cls(**values)
    except TypeError as exc:
        raise ValueError(f"{cls.__name__}: {exc}") from None


# -- frames ---------------------------------------------------------------------------


class Writer:
    """Frames written to a binary file, the running SHA-256 kept for the end frame."""

    def __init__(self, out: typing.BinaryIO) -> None:
        self._out = out
        self._sha = hashlib.sha256(MAGIC)
        self._zstd = zstandard.ZstdCompressor(level=3)
        self.size = len(MAGIC)
        out.write(MAGIC)

    def _frame(self, obj: dict[str, Any]) -> bytes:
        body = self._zstd.compress(orjson.dumps(obj))
        return _FRAME.pack(len(body), hashlib.sha256(body).digest()) + body

    def write(self, obj: dict[str, Any]) -> None:
        frame = self._frame(obj)
        self._sha.update(frame)
        self._out.write(frame)
        self.size += len(frame)

    def end(self) -> None:
        frame = self._frame({"type": "end", "sha256": self._sha.hexdigest()})
        self._out.write(frame)
        self.size += len(frame)


def bomb(record: int | None = None, offset: int | None = None) -> DamagedExportError:
    return DamagedExportError(
        f"its records unpack to more than {MAX_GROWTH}x the file's size "
        "(a decompression bomb, not an export)",
        record=record,
        offset=offset,
    )


def frames(data: bytes, budget: Budget | None = None) -> Iterator[tuple[int, int, dict[str, Any]]]:
    """(index, offset, object) of every record before the end frame, each checked; the
    end frame's SHA-256 checked last. Each body is charged to ``budget`` (a new one for
    ``data`` if None) by the size it states, before it is unpacked.

    Raises:
        DamagedExportError: naming the record and its offset.
    """
    if not data.startswith(MAGIC):
        raise DamagedExportError("not a savegame export (its first bytes are not the magic)")
    sha = hashlib.sha256(MAGIC)
    offset, index = len(MAGIC), 0
    unzstd = zstandard.ZstdDecompressor()
    budget = Budget(len(data)) if budget is None else budget
    while True:
        if offset == len(data):
            raise DamagedExportError(
                f"truncated: it ends after record {index - 1}, before its end record",
                record=index,
                offset=offset,
            )
        if offset + _FRAME.size > len(data):
            raise DamagedExportError(
                "truncated inside the record's frame header", record=index, offset=offset
            )
        length, digest = _FRAME.unpack_from(data, offset)
        start = offset + _FRAME.size
        if start + length > len(data):
            raise DamagedExportError(
                f"truncated: the record needs {length} bytes, {len(data) - start} are left",
                record=index,
                offset=offset,
            )
        body = data[start : start + length]
        if hashlib.sha256(body).digest() != digest:
            raise DamagedExportError(
                "the record fails its SHA-256 (a damaged byte)", record=index, offset=offset
            )
        try:
            stated = zstandard.frame_content_size(body)
            if stated > MAX_RECORD:
                raise DamagedExportError(
                    "the record claims more than 1 GiB", record=index, offset=offset
                )
            if stated > budget.left:
                raise bomb(index, offset)
            # A frame that states no size (savegame's writer always states it) is unpacked
            # only as far as the budget goes.
            plain = unzstd.decompress(body, max_output_size=max(min(MAX_RECORD, budget.left), 1))
            budget.take(len(plain))
            if budget.left < 0:
                raise bomb(index, offset)
            obj = orjson.loads(plain)
        except (zstandard.ZstdError, orjson.JSONDecodeError) as exc:
            raise DamagedExportError(
                f"the record does not decode: {exc}", record=index, offset=offset
            ) from None
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            raise DamagedExportError(
                "the record is not an object with a type", record=index, offset=offset
            )
        if obj["type"] == "end":
            if obj.get("sha256") != sha.hexdigest():
                raise DamagedExportError(
                    "the file fails its SHA-256 (a record was added, removed or changed)",
                    record=index,
                    offset=offset,
                )
            if start + length != len(data):
                raise DamagedExportError(
                    f"{len(data) - start - length} bytes follow the end record",
                    record=index,
                    offset=offset,
                )
            return
        sha.update(data[offset : start + length])
        yield index, offset, obj
        offset, index = start + length, index + 1
