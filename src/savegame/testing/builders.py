"""Small builders for runs and checkpoint records, for store tests and users' tests.

Records are built with the real codec, so checksums are genuine and a store
that damaged a payload would be caught by ``savegame.codec.decode``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from savegame.codec.envelope import encode
from savegame.ids import new_id
from savegame.model import CheckpointHeader, CheckpointRecord, RunInfo, RunStatus, Usage, utcnow

__all__ = ["OTHER_OWNER", "OWNER", "make_record", "make_run", "next_record"]

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
) -> CheckpointRecord:
    """Encode a checkpoint record; every header field can be set."""
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
    )
    return encode(header, {"step": step} if state is None else state)


def make_run(
    thread_id: str | None = None,
    *,
    run_id: str | None = None,
    workflow: str = "contract",
    metadata: Mapping[str, Any] | None = None,
    state: dict[str, Any] | None = None,
) -> tuple[RunInfo, CheckpointRecord]:
    """A new run and its input checkpoint (step 0), ready for ``Store.create_run``."""
    thread_id = thread_id or new_id()
    run_id = run_id or new_id()
    first = make_record(thread_id, run_id, state=state)
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
    )
