"""Read-only views over a store for people and tools (the CLI renders these)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from savegame.codec import load_state, reveal_metadata, reveal_run_metadata
from savegame.codec.storage import StorageConfig
from savegame.errors import NotFoundError
from savegame.model import Checkpoint, CheckpointHeader, RunInfo, RunStatus
from savegame.stores import RunPosition, Store
from savegame.stores.base import ThreadInfo


def get_run(run_id: str, *, store: Store, storage: StorageConfig | None = None) -> RunInfo:
    """The run's row: status, head, lease, metadata (sensitive values decrypted when the
    keyring allows). Raises NotFoundError.

    The operation behind :meth:`savegame.Savegame.get_run`, which documents it, on the open
    ``store``.
    """
    return reveal_run_metadata(store.get_run(run_id), storage)


def list_runs(
    *,
    thread_id: str | None = None,
    status: RunStatus | str | None = None,
    limit: int = 100,
    workflow: str | None = None,
    search: str | None = None,
    before: str | None = None,
    store: Store,
    storage: StorageConfig | None = None,
) -> list[RunInfo]:
    """Runs, newest first (metadata as in :func:`get_run`), a page at a time.

    The operation behind :meth:`savegame.Savegame.runs`, which documents it, on the open
    ``store``.
    """
    after = None if before is None else RunPosition.of(store.get_run(before))
    runs = store.list_runs(
        thread_id=thread_id, status=RunStatus(status) if status else None, limit=limit,
        workflow=workflow, search=search or None, before=after,
    )  # fmt: skip
    return [reveal_run_metadata(r, storage) for r in runs]


def list_threads(*, limit: int = 100, store: Store) -> list[ThreadInfo]:
    """Threads, most recently updated first, each summarised from its runs.

    The operation behind :meth:`savegame.Savegame.threads`, on the open ``store``.
    """
    return store.list_threads(limit=limit)


def history(
    run_id: str,
    *,
    limit: int | None = None,
    before: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    store: Store,
    storage: StorageConfig | None = None,
) -> list[CheckpointHeader]:
    """A run's checkpoints, newest first, without decoding states.

    The operation behind :meth:`savegame.Savegame.history`, which documents it, on the open
    ``store``.
    """
    headers = store.list_checkpoints(run_id, limit=limit, before=before, metadata=metadata)
    return [reveal_metadata(h, storage) for h in headers]


def get_checkpoint(ident: str, *, store: Store, storage: StorageConfig | None = None) -> Checkpoint:
    """A decoded checkpoint by checkpoint id, or a run's latest checkpoint by run id.

    The operation behind :meth:`savegame.Savegame.checkpoint`, which documents it, on the
    open ``store``.
    """
    try:
        record = store.latest_checkpoint(ident)
    except NotFoundError:
        try:
            record = store.get_checkpoint(ident)
        except NotFoundError:
            raise NotFoundError("run or checkpoint", ident) from None
    return load_state(store, record, storage)
