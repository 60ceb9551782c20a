"""Queueing runs for a worker fleet, and driving a run a worker claimed."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from savegame.codec.storage import StorageConfig
from savegame.inspect.history import opened
from savegame.model import Lease, RunInfo, RunResult
from savegame.runtime import lease as leases
from savegame.runtime.api import _prepare_resume, _start, _sync
from savegame.runtime.loader import as_workflow, reference_of
from savegame.runtime.runner import Execution, Observer, direct_io, execute
from savegame.stores.base import Store


def submit(
    workflow: Any,
    input: Mapping[str, Any] | None = None,
    *,
    thread_id: str | None = None,
    run_id: str | None = None,
    store: Store | str | None = None,
    metadata: Mapping[str, Any] | None = None,
    storage: StorageConfig | None = None,
) -> RunInfo:
    """Queue a run for the worker fleet (``savegame worker``) instead of running it here.

    The run is created with its input checkpoint and status ``queued``, owned by
    nobody; the first worker that claims it executes it. Workers import the
    workflow from the reference stored with the run, so it must live in an
    importable module or file.

    Returns:
        The queued run's row.
    """
    wf = as_workflow(workflow)
    ref = reference_of(workflow)
    with opened(store) as s:
        start, _, _ = _start(
            wf, s, input, thread_id=thread_id, run_id=run_id, metadata=metadata,
            ttl=leases.DEFAULT_TTL, ref=ref, storage=storage, queued=True,
        )  # fmt: skip
        return s.get_run(start.run_id)


def resume_claimed(
    lease: Lease,
    *,
    store: Store,
    lease_ttl: float = leases.DEFAULT_TTL,
    should_stop: Callable[[], bool] | None = None,
    observer: Observer | None = None,
    storage: StorageConfig | None = None,
) -> RunResult:
    """Drive a run whose lease a worker claimed, until it ends, pauses or ``should_stop``."""
    try:
        wf, start, record, chain, held = _prepare_resume(
            lease.run_id, store, None, None, lease_ttl, storage, lease=lease
        )
    except BaseException:
        store.release_lease(lease.run_id, lease.token)
        raise
    ex = Execution(
        workflow=wf,
        store=store,
        lease=held,
        start=start,
        start_record=record,
        policy=wf.policy,
        durability=wf.durability,
        ttl=lease_ttl,
        io=direct_io,
        observer=observer or Observer(),
        storage=storage,
        chain=chain,
        should_stop=should_stop,
    )
    return _sync(execute(ex))
