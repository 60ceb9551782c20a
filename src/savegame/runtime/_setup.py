"""Setting a run up to execute: create a new run, or check and load one to resume.

:func:`start_run` and :func:`prepare_resume` both end in a :class:`PreparedRun` run (its
workflow, the checkpoint it continues from, its lease); :meth:`PreparedRun.execution`
turns that into the :class:`Execution` the loop drives, the one place one is built.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import KW_ONLY, dataclass, replace
from datetime import datetime
from typing import Any

from savegame import codec, secrets
from savegame.codec import Chain, load_chain
from savegame.codec.storage import StorageConfig
from savegame.effects import Origin, decisions, parent_of
from savegame.errors import ConfigurationError, NotFoundError, RunStateError
from savegame.ids import check_given, new_id
from savegame.model import (
    VERSION_KEY,
    WORKSPACE_KEY,
    Checkpoint,
    CheckpointHeader,
    CheckpointRecord,
    Lease,
    RunInfo,
    RunStatus,
    Waiting,
    utcnow,
)
from savegame.runtime import _lease as leases
from savegame.runtime._bridge import Io, direct_io
from savegame.runtime._execution import Execution, Observer
from savegame.runtime._loader import as_workflow, load
from savegame.runtime._policy import CheckpointPolicy, Durability
from savegame.runtime._sigint import StopRequest
from savegame.runtime._trace import TRACE_KEY, anchor
from savegame.runtime._waiting import waits_for
from savegame.runtime._workflow import Workflow
from savegame.stores import Enqueue, queue_store
from savegame.stores.base import Store
from savegame.workspace import as_workspace


@dataclass(frozen=True, slots=True)
class PreparedRun:
    """A run set up to execute: its workflow, where it continues from, and its lease."""

    workflow: Workflow
    start: Checkpoint
    """Where to continue from, decoded and migrated."""
    record: CheckpointRecord
    """The stored record of ``start``."""
    chain: Chain | None
    """Where ``record`` sits in its chain; None when migration changed the state (the
    next record must then be a keyframe: a delta needs its base's exact state)."""
    lease: Lease
    """The run's lease: held by this process, or by nobody for a queued run."""
    _: KW_ONLY
    created: bool = False
    """The run was created here (``start``, its input checkpoint, is new)."""
    origin: Origin | None = None
    """When the run is a fork: where it came from (its calls replay against that journal)."""
    parent: str | None = None
    """When the run is a child run: its parent, told how it ends."""
    took_over: str | None = None
    """The process whose lease this one took over to resume the run (it had stopped
    without releasing it), or None."""

    def execution(
        self,
        store: Store,
        *,
        ttl: float,
        storage: StorageConfig | None,
        io: Io = direct_io,
        observer: Observer | None = None,
        policy: CheckpointPolicy | None = None,
        durability: Durability | None = None,
        should_stop: Callable[[], bool] | None = None,
        block: Callable[[Waiting], Awaitable[None]] | None = None,
        sigint: StopRequest | None = None,
    ) -> Execution:
        """What the loop drives: the workflow's policy and durability unless overridden."""
        return Execution(
            workflow=self.workflow,
            store=store,
            lease=self.lease,
            start=self.start,
            start_record=self.record,
            policy=policy or self.workflow.policy,
            durability=durability or self.workflow.durability,
            ttl=ttl,
            io=io,
            observer=observer or Observer(),
            storage=storage,
            chain=self.chain,
            origin=self.origin,
            parent=self.parent,
            should_stop=should_stop,
            workspace=as_workspace(self.workflow.workspace, self.start.run_id),
            block=block,
            sigint=sigint,
            took_over=self.took_over,
        )


def decode(
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


def start_run(
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
    sole: bool = False,
    enqueue: Enqueue | None = None,
) -> PreparedRun:
    """Create a run of ``wf`` with its input checkpoint, leased to this process (or,
    ``queued``, to nobody: the first worker to claim it leases it); ``sole``: only if no
    other run of the thread is unfinished and the thread did not move meanwhile (the
    store's ``create_run(sole=True)``); ``enqueue``: in that declared queue (a store with
    ``Capabilities.queues``; DuplicateRunError when its dedup key names an unfinished run)."""
    record, info, state, _ = first_checkpoint(
        wf, store, input, thread_id=thread_id, run_id=run_id, metadata=metadata, ref=ref,
        storage=storage, queued=queued,
    )  # fmt: skip
    # A queued run is created unowned: the first worker to claim it leases it.
    owner = None if queued else leases.owner_id()
    if enqueue is None:
        lease = store.create_run(info, record, owner=owner, ttl=ttl, sole=sole)
    else:
        queues = queue_store(store, f"queue {enqueue.queue!r}")
        lease = queues.create_run(info, record, owner=owner, ttl=ttl, sole=sole, queue=enqueue)
    start = Checkpoint(header=record.header, state=state)
    chain = Chain(0, 0, record.header.size)
    return PreparedRun(
        wf, start, record, chain, lease, created=True, parent=parent_of(info.metadata)
    )


def first_checkpoint(
    wf: Workflow,
    store: Store,
    input: Mapping[str, Any] | None,
    *,
    thread_id: str | None,
    run_id: str | None,
    metadata: Mapping[str, Any] | None,
    ref: str | None,
    storage: StorageConfig | None = None,
    queued: bool = False,
) -> tuple[CheckpointRecord, RunInfo, dict[str, Any], str | None]:
    """A new run's input checkpoint, encoded, and its row, not stored yet (``start_run``
    stores them; a schedule's firing, several at once): (record, row, state, parent)."""
    if input is not None and not isinstance(input, Mapping):
        raise ConfigurationError(
            f"run input must be a dict of state keys, not {type(input).__qualname__}"
        )
    codec.refuse_reserved(metadata or {})
    check_given(run_id=run_id, thread_id=thread_id)
    run_id = run_id or new_id()
    thread_id = thread_id or run_id
    entry = wf.entry_step()
    state, parent = _thread_state(store, thread_id, wf, storage)
    state.update(input or {})
    # Each run lists its own workspace files: its first checkpoint captures them anew.
    state.pop(WORKSPACE_KEY, None)
    metadata = dict(metadata or {})
    if VERSION_KEY in metadata:
        raise ConfigurationError(
            f"metadata key {VERSION_KEY!r} is savegame's: a run records its workflow's "
            "version there (Workflow(version=...))"
        )
    metadata[VERSION_KEY] = wf.code_version
    traced = anchor(metadata, run_id=run_id, thread_id=thread_id, workflow=wf.name)
    if traced is not None:
        metadata[TRACE_KEY] = traced
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
        metadata=metadata,
        created_at=now,
        state_version=wf.state_version,
    )
    # A run starts with a self-contained keyframe (create_run carries no blobs), so
    # a run never depends on another run's records.
    record = codec.encode(
        header, secrets.redact(state, wf.secrets) if wf.secrets else state, storage
    )
    return record, run_row(wf, record, ref, now, storage), state, parent


def _thread_state(
    store: Store, thread_id: str, wf: Workflow, storage: StorageConfig | None
) -> tuple[dict[str, Any], str | None]:
    """A new run's state before its input, and its parent checkpoint: empty on a new
    thread; a conversation continues from the thread's latest state."""
    head = store.thread_head(thread_id)
    if head is None:
        return {}, None
    return dict(decode(store, head, wf, storage)[0].state), head.checkpoint_id


def run_row(
    wf: Workflow,
    record: CheckpointRecord,
    ref: str | None,
    now: datetime,
    storage: StorageConfig | None,
) -> RunInfo:
    """The row of a run whose first checkpoint is ``record``, with its checksum."""
    info = RunInfo(
        run_id=record.run_id,
        thread_id=record.header.thread_id,
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
    return replace(info, checksum=codec.run_checksum(info, storage))


def workflow_of(info: RunInfo, workflow: Any, verb: str) -> Workflow:
    """The workflow ``info`` belongs to: ``workflow`` if given, else the one its verified
    reference imports; refused when the names differ (a run goes on in its own code)."""
    if workflow is None:
        if info.workflow_ref is None:
            raise ConfigurationError(
                f"run {info.run_id} has no stored workflow reference; pass the workflow to {verb}()"
            )
        workflow = load(info.workflow_ref)
    wf = as_workflow(workflow, info.workflow_ref or "workflow")
    if wf.name != info.workflow:
        raise ConfigurationError(
            f"run {info.run_id} belongs to workflow {info.workflow!r}, not {wf.name!r}"
        )
    return wf


def _resumable(store: Store, run_id: str, storage: StorageConfig | None) -> RunInfo:
    """The run's row, checked, when the run can continue now.

    Raises:
        RunStateError: it has ended, is compensating, or waits for a person or a wake-up.
    """
    info = codec.verify_run(store.get_run(run_id), storage)
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
    waiting = waits_for(store, info)
    if waiting is not None:
        raise RunStateError(
            run_id, f"waiting: {waiting} (resume it then, or wait for it: wait=True)", "resume"
        )
    return info


def prepare_resume(
    run_id: str,
    store: Store,
    workflow: Any,
    *,
    from_checkpoint: str | None,
    ttl: float,
    storage: StorageConfig | None = None,
    lease: Lease | None = None,
) -> PreparedRun:
    """Check that ``run_id`` can continue, take its lease (unless given one) and load
    its checkpoint: the latest, or ``from_checkpoint``."""
    # Checked before anything in it is used: its workflow reference is imported below.
    info = _resumable(store, run_id, storage)
    wf = workflow_of(info, workflow, "resume")
    # A worker arrives holding the lease it claimed (and keeps it on failure: it may
    # hold the run back rather than release it); everyone else takes it here.
    claimed, lease = lease is not None, lease or leases.acquire(store, run_id, ttl=ttl)
    # A lease still on the row when this process took it was never released: its
    # holder stopped mid-execution (SIGKILL, a lost host), whether or not it got to
    # write a checkpoint first. The new execution's first checkpoint names it.
    held = None if claimed else info.lease
    took_over = held.owner if held is not None and held.owner != lease.owner else None
    try:
        if not claimed:
            # Read again under the lease: the import above takes as long as the user's
            # module does, and another process may have run the run on meanwhile (to its
            # end, or to a pause). Compared with the head below, the row read before
            # would call that a damaged record.
            info = _resumable(store, run_id, storage)
        if from_checkpoint is not None:
            record = store.get_checkpoint(from_checkpoint)
            if record.run_id != run_id:
                raise NotFoundError("checkpoint", f"{from_checkpoint} in run {run_id}")
        else:
            record = store.latest_checkpoint(run_id)
            codec.check_head(info, record)
        cp, chain = decode(store, record, wf, storage)
        if cp.next is None:
            raise RunStateError(run_id, cp.status.value, "resume")
    except BaseException:
        if not claimed:
            store.release_lease(run_id, lease.token)
        raise
    origin, parent = Origin.of(info.metadata), parent_of(info.metadata)
    return PreparedRun(
        wf, cp, record, chain, lease, origin=origin, parent=parent, took_over=took_over
    )
