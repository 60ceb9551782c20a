"""Read-only views over a store for people and tools (the CLI renders these)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from savegame.codec import load_state, reveal_metadata, reveal_run_metadata
from savegame.codec.storage import StorageConfig
from savegame.errors import NotFoundError
from savegame.model import Checkpoint, CheckpointHeader, RunInfo, RunStatus
from savegame.stores import RunPosition, Store, opened_store
from savegame.stores.base import ThreadInfo


def get_run(
    run_id: str, *, store: Store | str | None = None, storage: StorageConfig | None = None
) -> RunInfo:
    """The run's row: status, head, lease, metadata (sensitive values decrypted when the
    keyring allows). Raises NotFoundError."""
    with opened_store(store, create=False) as s:
        return reveal_run_metadata(s.get_run(run_id), storage)


def list_runs(
    *,
    thread_id: str | None = None,
    status: RunStatus | str | None = None,
    limit: int = 100,
    workflow: str | None = None,
    search: str | None = None,
    before: str | None = None,
    store: Store | str | None = None,
    storage: StorageConfig | None = None,
) -> list[RunInfo]:
    """Runs, newest first (metadata as in :func:`get_run`), a page at a time.

    Args:
        thread_id, status, workflow: only runs of that thread, status, workflow name.
        search: only runs whose run id or thread id contains this text (any case).
        before: the last run id of the previous page: the next page starts after it.

    Raises:
        NotFoundError: ``before`` names no run.
    """
    with opened_store(store, create=False) as s:
        after = None if before is None else RunPosition.of(s.get_run(before))
        runs = s.list_runs(
            thread_id=thread_id, status=RunStatus(status) if status else None, limit=limit,
            workflow=workflow, search=search or None, before=after,
        )  # fmt: skip
        return [reveal_run_metadata(r, storage) for r in runs]


def list_threads(*, limit: int = 100, store: Store | str | None = None) -> list[ThreadInfo]:
    with opened_store(store, create=False) as s:
        return s.list_threads(limit=limit)


def history(
    run_id: str,
    *,
    limit: int | None = None,
    before: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    store: Store | str | None = None,
    storage: StorageConfig | None = None,
) -> list[CheckpointHeader]:
    """A run's checkpoints, newest first, without decoding states.

    Sensitive metadata (``StorageConfig.sensitive_metadata``) is decrypted when
    the keyring allows; filtering on it is not possible (it is stored encrypted).
    """
    with opened_store(store, create=False) as s:
        headers = s.list_checkpoints(run_id, limit=limit, before=before, metadata=metadata)
        return [reveal_metadata(h, storage) for h in headers]


def get_checkpoint(
    ident: str, *, store: Store | str | None = None, storage: StorageConfig | None = None
) -> Checkpoint:
    """A decoded checkpoint by checkpoint id, or a run's latest checkpoint by run id.

    The state is returned as stored (no migration); integrity is verified along
    the record's whole chain (its delta bases down to a keyframe).

    Raises:
        NotFoundError: neither a run nor a checkpoint has that id.
        CorruptRecordError: the record failed its integrity check (or is stored in
            plaintext while ``storage`` requires encryption).
        EncryptionKeyError: the record's key id is not in the keyring.
    """
    with opened_store(store, create=False) as s:
        try:
            record = s.latest_checkpoint(ident)
        except NotFoundError:
            try:
                record = s.get_checkpoint(ident)
            except NotFoundError:
                raise NotFoundError("run or checkpoint", ident) from None
        return load_state(s, record, storage)
