"""Model records <-> the values :class:`savegame.stores.redis.RedisStore` keeps in Redis.

Kept apart from the store so it reads as the scripts it calls, and so each
encoder sits next to the decoder that must agree with it byte for byte.

* A checkpoint header is one JSON object (field ``h`` of the checkpoint hash);
  its size lives in a field of its own because ``rewrite`` replaces it.
* A run is a hash of strings; timestamps are integer microseconds.
* A journal entry is one value: a JSON array header (status first, so a script
  can read it with a pattern), a NUL byte, then the argument and result bytes.
  orjson escapes control characters, so the first NUL always ends the header.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import orjson

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


def _micros_or_none(value: Any) -> int | None:
    return None if value is None else _common.to_micros(value)


def _time_or_none(micros: int | None) -> Any:
    return None if micros is None else _common.from_micros(micros)


# -- checkpoints ------------------------------------------------------------------
def checkpoint_args(record: CheckpointRecord) -> list[bytes | str | int]:
    """The nine values the scripts' ``put_cp`` reads for one checkpoint.

    Raises:
        ValueError: a naive datetime or a blob digest that is not a string.
        SerializationError: metadata that is not JSON data.
    """
    h = record.header
    blobs = _common.header_blobs(h)
    data = {
        "thread_id": h.thread_id,
        "run_id": h.run_id,
        "checkpoint_id": h.checkpoint_id,
        "parent_id": h.parent_id,
        "step": h.step,
        "node": h.node,
        "status": RunStatus(h.status).value,
        "next": h.next,
        "usage": h.usage.to_dict(),
        "metadata": dict(h.metadata),
        "created_at": _common.to_micros(h.created_at),
        "expires_at": _micros_or_none(h.expires_at),
        "format_version": h.format_version,
        "state_version": h.state_version,
        "base_id": h.base_id,
        "blobs": list(blobs),
    }
    return [
        h.checkpoint_id,
        h.run_id,
        h.thread_id,
        _common.json_dumps(data, "metadata"),
        bytes(record.payload),
        record.checksum,
        h.size,
        h.base_id or "",
        _common.json_dumps(_common.unique(blobs), "blobs"),
    ]


_DECODE_ERRORS = (ValueError, TypeError, KeyError, IndexError, AttributeError)


def _undecodable(ident: str, exc: Exception) -> CorruptRecordError:
    # An edited value is a damaged record, named like any other (see savegame.stores._sql.rows).
    return CorruptRecordError(ident, f"its value does not decode: {type(exc).__name__}: {exc}")


def header(data: bytes, size: bytes) -> CheckpointHeader:
    try:
        return _header(data, size)
    except _DECODE_ERRORS as exc:
        found = re.search(rb'"checkpoint_id":"([^"\\]*)"', bytes(data))
        ident = found.group(1).decode(errors="replace") if found else "checkpoint header"
        raise _undecodable(ident, exc) from exc


def _header(data: bytes, size: bytes) -> CheckpointHeader:
    d = orjson.loads(data)
    return CheckpointHeader(
        thread_id=d["thread_id"],
        run_id=d["run_id"],
        checkpoint_id=d["checkpoint_id"],
        parent_id=d["parent_id"],
        step=d["step"],
        node=d["node"],
        status=RunStatus(d["status"]),
        next=d["next"],
        usage=Usage.from_dict(d["usage"]),
        metadata=d["metadata"],
        created_at=_common.from_micros(d["created_at"]),
        expires_at=_time_or_none(d["expires_at"]),
        format_version=d["format_version"],
        state_version=d["state_version"],
        size=int(size),
        base_id=d["base_id"],
        blobs=tuple(d["blobs"]),
    )


def record(data: bytes, payload: bytes, checksum: bytes, size: bytes) -> CheckpointRecord:
    return CheckpointRecord(header=header(data, size), payload=payload, checksum=checksum.decode())


# -- runs -------------------------------------------------------------------------
def run_fields(run: RunInfo, first: CheckpointHeader) -> dict[str, str | bytes]:
    """A new run's hash, lease fields aside (the create script sets those)."""
    fields: dict[str, str | bytes] = {
        "run_id": run.run_id,
        "thread_id": run.thread_id,
        "workflow": run.workflow,
        "status": RunStatus(first.status).value,
        "step": str(first.step),
        "head": first.checkpoint_id,
        "created_at": str(_common.to_micros(run.created_at)),
        "updated_at": str(_common.to_micros(run.updated_at)),
        "metadata": _common.json_dumps(dict(run.metadata), "run.metadata"),
        "cancel_requested": "1" if run.cancel_requested else "0",
        "checksum": run.checksum,
    }
    if run.workflow_ref is not None:
        fields["workflow_ref"] = run.workflow_ref
    if run.error is not None:
        fields["error"] = run.error
    if run.version is not None:  # what claim_run(versions=...) reads
        fields["version"] = run.version
    return fields


def expires_at(micros: bytes | str) -> float:
    """A lease expiry as stored (server microseconds) -> ``Lease.expires_at`` epoch seconds."""
    return int(micros) / 1e6


def run_info(row: Mapping[bytes, bytes]) -> RunInfo:
    try:
        return _run_info(row)
    except _DECODE_ERRORS as exc:
        raise _undecodable(f"run {row.get(b'run_id', b'?')!r}", exc) from exc


def _run_info(row: Mapping[bytes, bytes]) -> RunInfo:
    def text(name: str) -> str | None:
        value = row.get(name.encode())
        return None if value is None else value.decode()

    run_id = row[b"run_id"].decode()
    owner, expires = text("lease_owner"), row.get(b"lease_expires")
    lease = None
    if owner is not None and expires is not None:
        lease = Lease(run_id, owner, int(row[b"lease_token"]), expires_at(expires))
    return RunInfo(
        run_id=run_id,
        thread_id=row[b"thread_id"].decode(),
        workflow=row[b"workflow"].decode(),
        workflow_ref=text("workflow_ref"),
        status=RunStatus(row[b"status"].decode()),
        step=int(row[b"step"]),
        head_checkpoint_id=text("head"),
        created_at=_common.from_micros(int(row[b"created_at"])),
        updated_at=_common.from_micros(int(row[b"updated_at"])),
        error=text("error"),
        lease=lease,
        metadata=orjson.loads(row[b"metadata"]),
        cancel_requested=row.get(b"cancel_requested") == b"1",
        checksum=text("checksum") or "",
        wake_at=None if b"wake_at" not in row else _common.from_micros(int(row[b"wake_at"])),
    )


# -- journal ----------------------------------------------------------------------
def entry(e: EffectRecord) -> bytes:
    """Encode a journal entry (validated by :func:`_common.detached_effect` beforehand)."""
    head = [
        EffectStatus(e.status).value,
        EffectKind(e.kind).value,
        e.name,
        e.step,
        e.node,
        e.call_index,
        len(e.arguments),
        None if e.result is None else len(e.result),
        e.error,
        dict(e.metadata),
        _common.to_micros(e.created_at),
        _micros_or_none(e.completed_at),
        e.checksum,
    ]
    body = bytes(e.arguments) + (b"" if e.result is None else bytes(e.result))
    return _common.json_dumps(head, "effect.metadata") + b"\0" + body


def effect(run_id: str, request_id: str, data: bytes) -> EffectRecord:
    try:
        return _effect(run_id, request_id, data)
    except _DECODE_ERRORS as exc:
        raise _undecodable(f"{run_id}/{request_id}", exc) from exc


def _effect(run_id: str, request_id: str, data: bytes) -> EffectRecord:
    cut = data.index(b"\0")
    (status, kind, name, step, node, call_index, n_args, n_result, error, metadata, created,
     completed, checksum) = orjson.loads(data[:cut])  # fmt: skip
    body = data[cut + 1 :]
    return EffectRecord(
        run_id=run_id,
        request_id=request_id,
        kind=EffectKind(kind),
        name=name,
        step=step,
        node=node,
        call_index=call_index,
        status=EffectStatus(status),
        arguments=body[:n_args],
        result=None if n_result is None else body[n_args : n_args + n_result],
        error=error,
        metadata=metadata,
        created_at=_common.from_micros(created),
        completed_at=_time_or_none(completed),
        checksum=checksum,
    )
