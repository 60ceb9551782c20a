"""Small builders for runs, checkpoint records and journal entries, for store tests and users' tests.

Checkpoint records are built with the real codec, so checksums are genuine and
a store that damaged a payload would be caught by ``savegame.codec.decode``.
Journal entries carry a BLAKE2b checksum of their own (:func:`effect_checksum`);
stores keep a checksum as opaque text, so the suite only needs it to round trip.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from savegame.codec import encode
from savegame.ids import new_id
from savegame.model import (
    CheckpointHeader,
    CheckpointRecord,
    EffectKind,
    EffectRecord,
    EffectStatus,
    RunInfo,
    RunStatus,
    Usage,
    utcnow,
)

__all__ = [
    "OTHER_OWNER",
    "OWNER",
    "blob_digest",
    "effect_checksum",
    "make_effect",
    "make_record",
    "make_run",
    "next_record",
]

OWNER = "contract-host:1001:1"
"""A lease owner in the ``host:pid:start`` shape the runtime uses."""
OTHER_OWNER = "contract-host:1002:1"


def make_record(
    thread_id: str,
    run_id: str,
    *,
    checkpoint_id: str | None = None,
    parent_id: str | None = None,
    step: int = 0,
    node: str | None = None,
    status: RunStatus = RunStatus.RUNNING,
    next: str | None = "work",
    usage: Usage | None = None,
    metadata: Mapping[str, Any] | None = None,
    created_at: datetime | None = None,
    expires_at: datetime | None = None,
    state_version: int = 1,
    state: dict[str, Any] | None = None,
    base_id: str | None = None,
    blobs: Sequence[str] = (),
) -> CheckpointRecord:
    """Encode a checkpoint record; every header field can be set.

    ``base_id`` and ``blobs`` only label the header (stores never decode a
    payload), so a store test can build chains and blob references freely.
    """
    header = CheckpointHeader(
        thread_id=thread_id,
        run_id=run_id,
        checkpoint_id=checkpoint_id or new_id(),
        parent_id=parent_id,
        step=step,
        node=node,
        status=status,
        next=next,
        usage=usage or Usage(),
        metadata=dict(metadata or {}),
        created_at=created_at or utcnow(),
        expires_at=expires_at,
        state_version=state_version,
        base_id=base_id,
        blobs=tuple(blobs),
    )
    return encode(header, {"step": step} if state is None else state)


def make_run(
    thread_id: str | None = None,
    *,
    run_id: str | None = None,
    workflow: str = "contract",
    metadata: Mapping[str, Any] | None = None,
    state: dict[str, Any] | None = None,
    parent_id: str | None = None,
) -> tuple[RunInfo, CheckpointRecord]:
    """A new run and its input checkpoint (step 0, parented on ``parent_id``: the
    thread's checkpoint it starts from), ready for ``Store.create_run``."""
    thread_id = thread_id or new_id()
    run_id = run_id or new_id()
    first = make_record(thread_id, run_id, state=state, parent_id=parent_id)
    now = utcnow()
    run = RunInfo(
        run_id=run_id,
        thread_id=thread_id,
        workflow=workflow,
        workflow_ref="tests.workflows:contract",
        status=RunStatus.RUNNING,
        step=0,
        head_checkpoint_id=first.checkpoint_id,
        created_at=now,
        updated_at=now,
        metadata=dict(metadata or {}),
    )
    return run, first


def next_record(
    previous: CheckpointRecord,
    *,
    status: RunStatus = RunStatus.RUNNING,
    metadata: Mapping[str, Any] | None = None,
    node: str = "work",
    checkpoint_id: str | None = None,
    base_id: str | None = None,
    blobs: Sequence[str] = (),
) -> CheckpointRecord:
    """The checkpoint after ``previous``: one step further, parented on it."""
    header = previous.header
    step = header.step + 1
    return make_record(
        header.thread_id,
        header.run_id,
        checkpoint_id=checkpoint_id,
        parent_id=header.checkpoint_id,
        step=step,
        node=node,
        status=status,
        next=None if status.finished else "work",
        usage=header.usage + Usage(input_tokens=10, output_tokens=5, cost_usd=0.001, llm_calls=1),
        metadata=metadata,
        state={"step": step},
        base_id=base_id,
        blobs=blobs,
    )


def blob_digest(data: bytes) -> str:
    """A content digest for a test blob (stores treat digests as opaque strings)."""
    return "blake2b:" + hashlib.blake2b(data, digest_size=16).hexdigest()


def effect_checksum(
    run_id: str, request_id: str, arguments: bytes, result: bytes | None = None
) -> str:
    """A BLAKE2b-128 hex digest over an entry's identity, arguments and result."""
    digest = hashlib.blake2b(digest_size=16)
    # Length prefixes keep ("ab", "c") and ("a", "bc") apart.
    for part in (run_id.encode(), request_id.encode(), arguments, result or b""):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    digest.update(b"\x01" if result is not None else b"\x00")
    return digest.hexdigest()


def make_effect(
    run_id: str,
    request_id: str | None = None,
    *,
    kind: EffectKind = EffectKind.WRITE,
    name: str = "send_email",
    step: int = 1,
    node: str = "work",
    call_index: int = 0,
    status: EffectStatus = EffectStatus.PENDING,
    arguments: bytes = b'{"to":"ada@example.com"}',
    result: bytes | None = None,
    error: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    created_at: datetime | None = None,
    completed_at: datetime | None = None,
    checksum: str | None = None,
) -> EffectRecord:
    """A journal entry; every field can be set.

    The request id defaults to ``{run_id}/{step}/{call_index}``, stable like the
    runtime's, so two builders with the same position name the same entry.
    """
    request_id = request_id or f"{run_id}/{step}/{call_index}"
    return EffectRecord(
        run_id=run_id,
        request_id=request_id,
        kind=kind,
        name=name,
        step=step,
        node=node,
        call_index=call_index,
        status=status,
        arguments=arguments,
        result=result,
        error=error,
        metadata=dict(metadata or {}),
        created_at=created_at or utcnow(),
        completed_at=completed_at,
        checksum=checksum or effect_checksum(run_id, request_id, arguments, result),
    )
