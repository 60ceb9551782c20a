"""Rows of the SQL backends (SQLite, PostgreSQL) as records: one column order, one decoding.

Both schemas keep the same columns in the same order; they differ only in how
JSON columns come back (SQLite: text to parse; psycopg: already parsed), which
the caller passes as ``json`` (its dialect's ``loads``). A row converter and the
SELECT that feeds it must agree column for column, so the column lists live here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from savegame.errors import CorruptRecordError
from savegame.model import (
    CheckpointHeader,
    CheckpointRecord,
    EffectKind,
    EffectRecord,
    EffectStatus,
    Lease,
    RunInfo,
    RunStatus,
    Usage,
)
from savegame.stores import _common

Json = Callable[[Any], Any]

HEADER_COLS = (
    "thread_id, run_id, checkpoint_id, parent_id, step, node, status, next, usage, metadata,"
    " created_at, expires_at, format_version, state_version, size, base_id, blobs"
)
RECORD_COLS = HEADER_COLS + ", checksum, payload"
RUN_COLS = (
    "run_id, thread_id, workflow, workflow_ref, status, step, head_checkpoint_id, created_at,"
    " updated_at, error, metadata, lease_owner, lease_token, lease_expires_at, cancel_requested,"
    " checksum, wake_at"
)
EFFECT_COLS = (
    "run_id, request_id, kind, name, step, node, call_index, status, arguments, result, error,"
    " metadata, created_at, completed_at, checksum"
)


# A history lists thousands of headers; these two were a third of decoding one.
_STATUSES = {status.value: status for status in RunStatus}


def _status(value: str) -> RunStatus:
    found = _STATUSES.get(value)
    return RunStatus(value) if found is None else found  # the enum names a bad value


@functools.lru_cache(maxsize=1024)
def _usage_text(text: str) -> Usage:
    # Usage is immutable, and consecutive checkpoints of a run mostly carry the same
    # counters (every step that calls no model): parse each distinct text once.
    return Usage.from_dict(_common.json_loads(text))


def _usage(value: Any, json: Json) -> Usage:
    # Text on SQLite; psycopg has already parsed PostgreSQL's json column into a dict.
    return _usage_text(value) if type(value) is str else Usage.from_dict(json(value))


def _undecodable(ident: Any, exc: Exception) -> CorruptRecordError:
    # A row edited outside savegame (a status no enum has, text in a number column) is a
    # damaged record, named like any other, never a stray ValueError from deep inside.
    return CorruptRecordError(str(ident), f"its row does not decode: {type(exc).__name__}: {exc}")


_DECODE_ERRORS = (ValueError, TypeError, KeyError, IndexError, AttributeError)


def header(row: Sequence[Any], json: Json) -> CheckpointHeader:
    try:
        return _header(row, json)
    except _DECODE_ERRORS as exc:
        raise _undecodable(row[2], exc) from exc


def _typed(
    row: Sequence[Any], ints: Sequence[int], texts: Sequence[int], opt: Sequence[int]
) -> None:
    """Raise TypeError unless the columns at ``ints`` hold ints, at ``texts`` strings and at
    ``opt`` strings or NULL: SQLite stores whatever an UPDATE gives, whatever the column's type."""
    for i in ints:
        if type(row[i]) is not int:
            raise TypeError(f"column {i} holds {type(row[i]).__name__}, not an integer")
    for i in texts:
        if type(row[i]) is not str:
            raise TypeError(f"column {i} holds {type(row[i]).__name__}, not text")
    for i in opt:
        if row[i] is not None and type(row[i]) is not str:
            raise TypeError(f"column {i} holds {type(row[i]).__name__}, not text")


_HEADER_INTS, _HEADER_TEXTS, _HEADER_OPT = (4, 10, 12, 13, 14), (0, 1, 2, 6), (3, 5, 7, 15)


def _header(row: Sequence[Any], json: Json) -> CheckpointHeader:
    _typed(row, _HEADER_INTS, _HEADER_TEXTS, _HEADER_OPT)
    return CheckpointHeader(
        thread_id=row[0],
        run_id=row[1],
        checkpoint_id=row[2],
        parent_id=row[3],
        step=row[4],
        node=row[5],
        status=_status(row[6]),
        next=row[7],
        usage=_usage(row[8], json),
        metadata=json(row[9]),
        created_at=_common.from_micros(row[10]),
        expires_at=None if row[11] is None else _common.from_micros(row[11]),
        format_version=row[12],
        state_version=row[13],
        size=row[14],
        base_id=row[15],
        blobs=tuple(json(row[16])),
    )


def record(row: Sequence[Any], json: Json) -> CheckpointRecord:
    head = header(row, json)
    checksum, payload = row[17], row[18]
    if type(checksum) is not str or not isinstance(payload, (bytes, memoryview)):
        raise _undecodable(row[2], TypeError("its checksum or payload has the wrong type"))
    return CheckpointRecord(header=head, checksum=checksum, payload=bytes(payload))


def run_info(row: Sequence[Any], json: Json) -> RunInfo:
    try:
        return _run_info(row, json)
    except _DECODE_ERRORS as exc:
        raise _undecodable(f"run {row[0]}", exc) from exc


def _run_info(row: Sequence[Any], json: Json) -> RunInfo:
    _typed(row, (5, 7, 8, 12), (0, 1, 2, 4, 15), (3, 6, 9, 11))
    if row[16] is not None and type(row[16]) is not int:
        raise TypeError(f"column 16 holds {type(row[16]).__name__}, not an integer")
    owner, token, expires_at = row[11], row[12], row[13]
    return RunInfo(
        run_id=row[0],
        thread_id=row[1],
        workflow=row[2],
        workflow_ref=row[3],
        status=_status(row[4]),
        step=row[5],
        head_checkpoint_id=row[6],
        created_at=_common.from_micros(row[7]),
        updated_at=_common.from_micros(row[8]),
        error=row[9],
        lease=None if owner is None else Lease(row[0], owner, token, expires_at),
        metadata=json(row[10]),
        cancel_requested=bool(row[14]),
        checksum=row[15],
        wake_at=None if row[16] is None else _common.from_micros(row[16]),
    )


def effect(row: Sequence[Any], json: Json) -> EffectRecord:
    try:
        return _effect(row, json)
    except _DECODE_ERRORS as exc:
        raise _undecodable(f"{row[0]}/{row[1]}", exc) from exc


def _effect(row: Sequence[Any], json: Json) -> EffectRecord:
    _typed(row, (4, 6, 12), (0, 1, 2, 3, 5, 7, 14), (10,))
    if not isinstance(row[8], (bytes, memoryview)) or not (
        row[9] is None or isinstance(row[9], (bytes, memoryview))
    ):
        raise TypeError("its arguments or result are not bytes")
    return EffectRecord(
        run_id=row[0],
        request_id=row[1],
        kind=EffectKind(row[2]),
        name=row[3],
        step=row[4],
        node=row[5],
        call_index=row[6],
        status=EffectStatus(row[7]),
        arguments=bytes(row[8]),
        result=None if row[9] is None else bytes(row[9]),
        error=row[10],
        metadata=json(row[11]),
        created_at=_common.from_micros(row[12]),
        completed_at=None if row[13] is None else _common.from_micros(row[13]),
        checksum=row[14],
    )
