"""run / resume and their async twins: set up an Execution and drive it."""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections.abc import Coroutine, Mapping
from dataclasses import replace
from typing import Any, TypeVar

from savegame import codec, secrets
from savegame.codec import envelope
from savegame.codec.engine import Chain
from savegame.codec.engine import load as load_chain
from savegame.codec.storage import StorageConfig
from savegame.effects import decisions
from savegame.errors import ConfigurationError, NotFoundError, RunStateError
from savegame.ids import check_given, new_id
from savegame.model import (
    Checkpoint,
    CheckpointHeader,
    CheckpointRecord,
    Lease,
    RunInfo,
    RunResult,
    RunStatus,
    utcnow,
)
from savegame.runtime import lease as leases
from savegame.runtime.loader import as_workflow, load, reference_of
from savegame.runtime.policy import CheckpointPolicy, Durability
from savegame.runtime.runner import Execution, Io, Observer, direct_io, execute, threaded_io
from savegame.runtime.workflow import Workflow
from savegame.stores import Store, open_store

T = TypeVar("T")

#: Marks "no value given" so that ``resume(run_id, value=None)`` can supply None.
_NO_VALUE: Any = object()


class _Box:
    """Holds a coroutine's result behind the plain object repr.

    On its way out, ``asyncio.run`` formats the repr of its SIGINT handler, which
    holds the finished main task and, through it, the task's result: a RunResult
    with the whole state (20 ms for a 4 MB conversation, on every run and resume).
    """

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


async def _boxed(coro: Coroutine[Any, Any, T]) -> _Box:
    return _Box(await coro)


def _sync(coro: Coroutine[Any, Any, T]) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        box = asyncio.run(_boxed(coro))
    else:
        # Called from inside an event loop (a notebook, a server): run on a private loop.
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            box = pool.submit(asyncio.run, _boxed(coro)).result()
    value: T = box.value
    return value


def _decode(
    store: Store, record: CheckpointRecord, wf: Workflow, storage: StorageConfig | None
) -> tuple[Checkpoint, Chain | None]:
    """The checkpoint, migrated; and its chain position unless migration changed the state
    (the next record must then be a keyframe: a delta needs its base's exact state)."""
    loaded = load_chain(store, record, storage)
    cp = loaded.checkpoint
    if wf.secrets:
        # Declared secret fields come back from the provider, never from the store.
        cp = Checkpoint(header=cp.header, state=secrets.restore(cp.state, wf.secrets))
    if cp.header.state_version == wf.state_version:
        return cp, loaded.chain
    state = codec.upgrade(
        cp.state,
        from_version=cp.header.state_version,
        to_version=wf.state_version,
        migrations=wf.migrations,
        workflow=wf.name,
        checkpoint_id=cp.checkpoint_id,
    )
    return Checkpoint(header=cp.header, state=state), None


def _start(
    wf: Workflow,
    store: Store,
    input: Mapping[str, Any] | None,
    *,
    thread_id: str | None,
    run_id: str | None,
    metadata: Mapping[str, Any] | None,
    ttl: float,
    ref: str | None,
    storage: StorageConfig | None = None,
    queued: bool = False,
) -> tuple[Checkpoint, CheckpointRecord, Any]:
    if input is not None and not isinstance(input, Mapping):
        raise ConfigurationError(
            f"run input must be a dict of state keys, not {type(input).__qualname__}"
        )
    envelope.refuse_reserved(metadata or {})
    check_given(run_id=run_id, thread_id=thread_id)
    run_id = run_id or new_id()
    thread_id = thread_id or run_id
    entry = wf.entry_step()
    state: dict[str, Any] = {}
    parent: str | None = None
    head = store.thread_head(thread_id)
    if head is not None:
        # A conversation continues: the thread's latest state, with this input on top.
        state = dict(_decode(store, head, wf, storage)[0].state)
        parent = head.checkpoint_id
    state.update(input or {})
    now = utcnow()
    header = CheckpointHeader(
        thread_id=thread_id,
        run_id=run_id,
        checkpoint_id=new_id(),
        parent_id=parent,
        step=0,
        node=None,
        status=RunStatus.QUEUED if queued else RunStatus.RUNNING,
        next=entry,
        metadata=dict(metadata or {}),
        created_at=now,
        state_version=wf.state_version,
    )
    # A run starts with a self-contained keyframe (create_run carries no blobs), so
    # a run never depends on another run's records.
    record = codec.encode(
        header, secrets.redact(state, wf.secrets) if wf.secrets else state, storage
    )
    info = RunInfo(
        run_id=run_id,
        thread_id=thread_id,
        workflow=wf.name,
        workflow_ref=ref,
        status=record.header.status,
        step=0,
        head_checkpoint_id=record.checkpoint_id,
        created_at=now,
        updated_at=now,
        # As sealed in the header: sensitive keys stay encrypted in the run row too.
        metadata=dict(record.header.metadata),
    )
    info = replace(info, checksum=envelope.run_checksum(info, storage))
    # A queued run is created unowned: the first worker to claim it leases it.
    lease = store.create_run(info, record, owner=None if queued else leases.owner_id(), ttl=ttl)
    return Checkpoint(header=record.header, state=state), record, lease


def _prepare_resume(
    run_id: str,
    store: Store,
    workflow: Any,
    from_checkpoint: str | None,
    ttl: float,
    storage: StorageConfig | None = None,
    lease: Lease | None = None,
) -> tuple[Workflow, Checkpoint, CheckpointRecord, Chain | None, Any]:
    # Checked before anything in it is used: its workflow reference is imported below.
    info = envelope.verify_run(store.get_run(run_id), storage)
    if info.status.finished or info.status is RunStatus.COMPENSATING:
        hint = (
            " (continue it with `savegame compensate`)"
            if info.status is RunStatus.COMPENSATING
            else ""
        )
        raise RunStateError(run_id, info.status.value + hint, "resume")
    reason = decisions.waiting_reason(store, run_id, storage)
    if reason is not None:
        raise RunStateError(run_id, f"interrupted: {reason}", "resume")
    if workflow is None:
        if info.workflow_ref is None:
            raise ConfigurationError(
                f"run {run_id} has no stored workflow reference; pass the workflow to resume()"
            )
        workflow = load(info.workflow_ref)
    wf = as_workflow(workflow, info.workflow_ref or "workflow")
    if wf.name != info.workflow:
        raise ConfigurationError(
            f"run {run_id} belongs to workflow {info.workflow!r}, not {wf.name!r}"
        )
    # A worker arrives holding the lease it claimed (and keeps it on failure: it may
    # hold the run back rather than release it); everyone else takes it here.
    claimed, lease = lease is not None, lease or leases.acquire(store, run_id, ttl=ttl)
    try:
        if from_checkpoint is not None:
            record = store.get_checkpoint(from_checkpoint)
            if record.run_id != run_id:
                raise NotFoundError("checkpoint", f"{from_checkpoint} in run {run_id}")
        else:
            record = store.latest_checkpoint(run_id)
            envelope.check_head(info, record)
        cp, chain = _decode(store, record, wf, storage)
        if cp.next is None:
            raise RunStateError(run_id, cp.status.value, "resume")
    except BaseException:
        if not claimed:
            store.release_lease(run_id, lease.token)
        raise
    return wf, cp, record, chain, lease


async def _arun(
    workflow: Any,
    input: Mapping[str, Any] | None,
    *,
    thread_id: str | None,
    run_id: str | None,
    store: Store | str | None,
    metadata: Mapping[str, Any] | None,
    policy: CheckpointPolicy | None,
    durability: Durability | None,
    observer: Observer | None,
    lease_ttl: float,
    io: Io,
    storage: StorageConfig | None,
) -> RunResult:
    wf = as_workflow(workflow)
    opened = open_store(store)
    try:
        ref = reference_of(workflow)
        observer = observer or Observer()
        began = time.perf_counter()
        start, record, lease = await io(
            _start,
            wf,
            opened,
            input,
            thread_id=thread_id,
            run_id=run_id,
            metadata=metadata,
            ttl=lease_ttl,
            ref=ref,
            storage=storage,
        )
        if observer.on_checkpoint is not None:
            observer.on_checkpoint(record.header, time.perf_counter() - began)
        ex = Execution(
            workflow=wf,
            store=opened,
            lease=lease,
            start=start,
            start_record=record,
            policy=policy or wf.policy,
            durability=durability or wf.durability,
            ttl=lease_ttl,
            io=io,
            observer=observer,
            storage=storage,
            chain=Chain(0, 0, record.header.size),
        )
        return await execute(ex)
    finally:
        if opened is not store:
            opened.close()


async def _aresume(
    run_id: str,
    *,
    value: Any,
    interrupt_id: str | None,
    store: Store | str | None,
    workflow: Any,
    from_checkpoint: str | None,
    policy: CheckpointPolicy | None,
    durability: Durability | None,
    observer: Observer | None,
    lease_ttl: float,
    io: Io,
    storage: StorageConfig | None,
) -> RunResult:
    opened = open_store(store)
    try:
        if value is not _NO_VALUE:
            await io(
                decisions.supply, opened, run_id, value, interrupt_id=interrupt_id, storage=storage
            )
        wf, start, record, chain, lease = await io(
            _prepare_resume, run_id, opened, workflow, from_checkpoint, lease_ttl, storage
        )
        ex = Execution(
            workflow=wf,
            store=opened,
            lease=lease,
            start=start,
            start_record=record,
            policy=policy or wf.policy,
            durability=durability or wf.durability,
            ttl=lease_ttl,
            io=io,
            observer=observer or Observer(),
            storage=storage,
            chain=chain,
        )
        return await execute(ex)
    finally:
        if opened is not store:
            opened.close()


def run(
    workflow: Any,
    input: Mapping[str, Any] | None = None,
    *,
    thread_id: str | None = None,
    run_id: str | None = None,
    store: Store | str | None = None,
    metadata: Mapping[str, Any] | None = None,
    policy: CheckpointPolicy | None = None,
    durability: Durability | None = None,
    observer: Observer | None = None,
    lease_ttl: float = leases.DEFAULT_TTL,
    storage: StorageConfig | None = None,
) -> RunResult:
    """Start a run of ``workflow`` and drive it until it ends.

    Args:
        workflow: a Workflow or an Agent.
        input: top-level state keys to set before the first step. On an existing
            thread they are applied on top of the thread's latest state.
        thread_id: the thread to run on (default: a new thread named after the run).
        run_id: the run's id (default: a new time-sortable id).
        store: a Store, a store URL, or None for ``$SAVEGAME_STORE`` / ``./savegame.db``.
        metadata: stored with the run and its input checkpoint.
        policy: overrides the workflow's checkpoint policy.
        durability: overrides the workflow's durability (``"sync"`` or ``"async"``).
        observer: callbacks for progress and timelines.
        lease_ttl: seconds a dead owner's lease blocks other hosts from taking the run over.
        storage: how checkpoints are stored (keyframe cadence, blobs, compression,
            encryption keys); default from the environment (``SAVEGAME_KEYS`` ...),
            see :class:`savegame.codec.storage.StorageConfig`.

    Returns:
        The run's status, final state and last checkpoint id.

    Raises:
        StepError: a step raised; the run is marked failed and can be resumed.
        SerializationError: the state holds something that is not pure data.
        CheckpointWriteError: a checkpoint could not be written; the run stopped.
    """
    return _sync(
        _arun(
            workflow,
            input,
            thread_id=thread_id,
            run_id=run_id,
            store=store,
            metadata=metadata,
            policy=policy,
            durability=durability,
            observer=observer,
            lease_ttl=lease_ttl,
            io=direct_io,
            storage=storage,
        )
    )


async def arun(
    workflow: Any,
    input: Mapping[str, Any] | None = None,
    *,
    thread_id: str | None = None,
    run_id: str | None = None,
    store: Store | str | None = None,
    metadata: Mapping[str, Any] | None = None,
    policy: CheckpointPolicy | None = None,
    durability: Durability | None = None,
    observer: Observer | None = None,
    lease_ttl: float = leases.DEFAULT_TTL,
    storage: StorageConfig | None = None,
) -> RunResult:
    """Async twin of :func:`run`; store calls run in a worker thread."""
    return await _arun(
        workflow,
        input,
        thread_id=thread_id,
        run_id=run_id,
        store=store,
        metadata=metadata,
        policy=policy,
        durability=durability,
        observer=observer,
        lease_ttl=lease_ttl,
        io=threaded_io,
        storage=storage,
    )


def resume(
    run_id: str,
    *,
    value: Any = _NO_VALUE,
    interrupt_id: str | None = None,
    store: Store | str | None = None,
    workflow: Any = None,
    from_checkpoint: str | None = None,
    policy: CheckpointPolicy | None = None,
    durability: Durability | None = None,
    observer: Observer | None = None,
    lease_ttl: float = leases.DEFAULT_TTL,
    storage: StorageConfig | None = None,
) -> RunResult:
    """Continue a run from its latest checkpoint (or ``from_checkpoint``), loaded from the store only.

    Args:
        run_id: the run to continue.
        workflow: the Workflow or Agent; by default imported from the reference
            stored with the run.
        value: the value for the run's pending ``ctx.interrupt`` (recorded in the
            journal, then the step re-executes and receives it).
        interrupt_id: which pending interrupt ``value`` answers, when there are several.
        from_checkpoint: continue from this checkpoint of the run instead of the latest.
        storage: how checkpoints are stored and decrypted (see :func:`run`).

    Raises:
        NotFoundError: no such run or checkpoint.
        RunStateError: the run has ended (completed, cancelled, compensated), or
            waits for an approval or an interrupt value that was not given.
        LeaseHeldError: a live process is executing the run.
        CorruptRecordError: the checkpoint failed its integrity check.
    """
    return _sync(
        _aresume(
            run_id,
            value=value,
            interrupt_id=interrupt_id,
            store=store,
            workflow=workflow,
            from_checkpoint=from_checkpoint,
            policy=policy,
            durability=durability,
            observer=observer,
            lease_ttl=lease_ttl,
            io=direct_io,
            storage=storage,
        )
    )


async def aresume(
    run_id: str,
    *,
    value: Any = _NO_VALUE,
    interrupt_id: str | None = None,
    store: Store | str | None = None,
    workflow: Any = None,
    from_checkpoint: str | None = None,
    policy: CheckpointPolicy | None = None,
    durability: Durability | None = None,
    observer: Observer | None = None,
    lease_ttl: float = leases.DEFAULT_TTL,
    storage: StorageConfig | None = None,
) -> RunResult:
    """Async twin of :func:`resume`."""
    return await _aresume(
        run_id,
        value=value,
        interrupt_id=interrupt_id,
        store=store,
        workflow=workflow,
        from_checkpoint=from_checkpoint,
        policy=policy,
        durability=durability,
        observer=observer,
        lease_ttl=lease_ttl,
        io=threaded_io,
        storage=storage,
    )
