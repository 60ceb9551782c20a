"""Queueing runs for a worker fleet, and driving a run a worker claimed."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from savegame import codec
from savegame.codec import check_head, seal_error
from savegame.codec.storage import StorageConfig
from savegame.effects import parent_of
from savegame.errors import (
    ConfigurationError,
    ConflictError,
    LeaseHeldError,
    LeaseLostError,
    WorkflowImportError,
    describe,
)
from savegame.model import CheckpointRecord, Lease, RunInfo, RunResult, RunStatus
from savegame.runtime import (
    DEFAULT_TTL,
    Observer,
    OnExists,
    OnThreadBusy,
    StartOptions,
    Workflow,
    as_workflow,
    begin_submit,
    events_for_parent,
    execute,
    prepare_resume,
    reference_of,
    run_sync,
)
from savegame.stores import Enqueue
from savegame.stores.base import Store

log = logging.getLogger("savegame.worker")


def submit(
    workflow: Any,
    input: Mapping[str, Any] | None = None,
    *,
    thread_id: str | None = None,
    run_id: str | None = None,
    store: Store,
    metadata: Mapping[str, Any] | None = None,
    storage: StorageConfig | None = None,
    on_exists: OnExists = "continue",
    on_thread_busy: OnThreadBusy = "reject",
    observer: Observer | None = None,
    queue: str | None = None,
    priority: int = 0,
    dedup_key: str | None = None,
) -> RunInfo:
    """Queue a run for the worker fleet (``savegame worker``) instead of running it here.

    The operation behind :meth:`savegame.Savegame.submit`, which documents it, on the open
    ``store``.
    """
    wf = as_workflow(workflow)
    if queue is None and (priority != 0 or dedup_key is not None):
        raise ConfigurationError("submit: priority and dedup_key need a queue (queue='name')")
    start = StartOptions(
        thread_id=thread_id,
        run_id=run_id,
        metadata=metadata,
        ttl=DEFAULT_TTL,
        ref=reference_of(workflow),
        storage=storage,
        on_exists=on_exists,
        on_thread_busy=on_thread_busy,
        observer=observer or Observer(),
        queued=True,
        enqueue=None if queue is None else Enqueue(queue, priority, dedup_key),
    )
    return begin_submit(wf, store, input, start)


def resume_claimed(
    lease: Lease,
    *,
    store: Store,
    lease_ttl: float = DEFAULT_TTL,
    should_stop: Callable[[], bool] | None = None,
    observer: Observer | None = None,
    storage: StorageConfig | None = None,
    loaded: Callable[[Workflow], None] | None = None,
) -> RunResult:
    """Drive a run whose lease a worker claimed, until it ends, pauses or ``should_stop``
    (``loaded``: told the workflow as this process imported it, before a step runs).

    A run that cannot even start is marked failed (parked). Two kinds keep ``lease``
    held rather than released, so no worker claims them again at once (see
    :func:`hold_back`): one whose workflow does not import here (WorkflowImportError),
    which a worker with the code will run, so it is not failed for it; and one that
    cannot be parked either (its head checkpoint is damaged, say).
    """
    try:
        ready = prepare_resume(
            lease.run_id,
            store,
            workflow=None,
            from_checkpoint=None,
            ttl=lease_ttl,
            storage=storage,
            lease=lease,
        )
    except BaseException as exc:
        stuck = (
            isinstance(exc, Exception)
            and not isinstance(exc, ConflictError)
            and (isinstance(exc, WorkflowImportError) or not _park(store, lease, exc, storage))
        )
        if not stuck:
            store.release_lease(lease.run_id, lease.token)
        raise
    if loaded is not None:
        loaded(ready.workflow)
    ex = ready.execution(
        store, ttl=lease_ttl, storage=storage, observer=observer, should_stop=should_stop
    )
    return run_sync(execute(ex))


def hold_back(store: Store, lease: Lease, seconds: float) -> Lease | None:
    """Keep every worker from claiming ``lease``'s run for ``seconds``: a run that failed
    and is still runnable would otherwise be claimed again at once, in a tight loop.

    The lease is held, not released: renewed for ``seconds`` when still ours, taken
    again when it was released (the runner releases on every exit). Claimers skip a
    leased run until it expires, so this works across slots, workers and hosts.

    Returns:
        The lease held, or None when another owner holds the run now (it is theirs to
        deal with).
    """
    try:
        return store.renew_lease(lease.run_id, lease.token, seconds)
    except LeaseLostError:
        try:
            return store.acquire_lease(lease.run_id, lease.owner, seconds)
        except LeaseHeldError:
            return None


def _own_head(store: Store, run_id: str) -> CheckpointRecord:
    """The run's head, if its row agrees it is (a marker signs what it sits on)."""
    head = store.latest_checkpoint(run_id)
    check_head(store.get_run(run_id), head)
    return head


def _park(store: Store, lease: Lease, error: Exception, storage: StorageConfig | None) -> bool:
    """Take a run this worker cannot even start (it has no workflow reference, its
    checkpoint is damaged...) out of the queue: mark it failed with the reason, so
    the fleet moves on instead of claiming it again and again. ``savegame resume``
    retries it once the cause is fixed. False when that failed too.
    """
    try:
        record = codec.marker(
            _own_head(store, lease.run_id),
            RunStatus.FAILED,
            {"error": describe(error), "parked_by": "worker"},
            storage,
            resumable=True,
        )
        sealed = seal_error(lease.run_id, describe(error, with_type=False), storage)
        told = events_for_parent(
            _parent(store, lease.run_id, storage), lease.run_id, RunStatus.FAILED,
            error=describe(error), storage=storage,
        )  # fmt: skip
        if told:  # a child that cannot even start: its parent hears it failed
            store.put_checkpoint(record, lease_token=lease.token, error=sealed, events=told)
        else:
            store.put_checkpoint(record, lease_token=lease.token, error=sealed)
    except Exception as exc:  # parking is best effort: the lease is held, then expires
        log.warning("could not mark run %s failed: %s", lease.run_id, exc)
        return False
    return True


def _parent(store: Store, run_id: str, storage: StorageConfig | None) -> str | None:
    """The parent a run's checked row names; None when the row itself does not check."""
    try:
        return parent_of(codec.verify_run(store.get_run(run_id), storage).metadata)
    except Exception:
        return None
