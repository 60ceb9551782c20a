"""The store contract: one protocol every backend implements.

A store keeps runs, checkpoint records (header + opaque payload bytes) and
leases. It never decodes a payload. Every method is synchronous; the async API
runs them in a worker thread, so there is one implementation per backend.

Invariants a backend must keep (the contract suite in savegame.testing proves them):

* ``create_run`` inserts the run row, its first checkpoint and its lease
  (token 1) in one atomic step; an existing run id is a ConflictError.
* ``put_checkpoint`` inserts the checkpoint and moves the run's head, status and
  step in one atomic step, and only if the run's current fencing token equals
  ``lease_token``; otherwise it raises LeaseLostError and writes nothing.
* A stored checkpoint id is never overwritten: a second put of the same id is a ConflictError.
* Fencing tokens only grow: every successful ``acquire_lease`` returns a token
  greater than any token that run had before, including released ones.
* Histories are newest first; checkpoint ids sort by creation time.
* Storage engine: a checkpoint may be a delta against ``header.base_id``;
  ``get_chain`` returns it with every base down to a keyframe. Blobs are
  content-addressed bytes, written with the checkpoint that first refers to
  them (``put_checkpoint(blobs=...)``) and never changed afterwards except by
  ``rewrite`` (re-encryption). Pruning deletes only what the caller names.
* Journal: ``record_intent`` is insert-if-absent keyed by (run_id, request_id)
  and returns the entry that is stored afterwards (the existing one when
  present, except a NOT_DONE entry, which the new intent replaces);
  ``record_intents`` does that for several entries of one run atomically. Effects
  passed to ``put_checkpoint`` are inserted the same way in the checkpoint's
  transaction. Lease-fenced journal writes check the token like checkpoints.
* Waiting runs (stores that claim ``Capabilities.waits``): a checkpoint with status
  waiting comes with a :class:`~savegame.model.Waiting`; the run's wake time becomes its
  ``until``, or :data:`~savegame.model.WOKEN` when ``need`` of its topics have a pending
  event. ``deliver_event`` wakes the run the same way under the same lock, so an event
  that arrives while the run goes to sleep is never missed. ``claim_run`` takes woken runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from savegame.model import (
    CheckpointHeader,
    CheckpointRecord,
    EffectKind,
    EffectRecord,
    EffectStatus,
    Lease,
    RunInfo,
    RunStatus,
    Waiting,
    quick_init,
)

#: ``list_effects(limit=ALL_EFFECTS)``: the whole journal. The runtime must see every
#: entry of a run, or a re-executed step could miss a recorded result and call again.
ALL_EFFECTS = 2**62


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What a backend promises beyond the base contract; the contract suite skips the rest."""

    persistent: bool
    """Data survives the process (and, with the default settings, a power loss)."""
    multi_process: bool
    """Several processes may use the same store at once."""
    waits: bool = False
    """Runs may wait for timers, events and child runs: ``put_checkpoint(waiting=...)``,
    ``deliver_event``, woken runs claimed, ``RunInfo.wake_at``. A store without it
    refuses ``ctx.sleep``, ``ctx.wait_for`` and ``ctx.start_child`` (and ``send``)."""
    group_commit: bool = False
    """The store is a :class:`BatchStore`: ``put_checkpoints`` writes several runs'
    checkpoints in one transaction (one commit, one fsync), each as ``put_checkpoint``
    would, a failing one leaving the others written."""
    schedules: bool = False
    """The store keeps schedules and fires each occurrence once across handles and
    processes (:class:`~savegame.stores.schedules.ScheduleStore`); a store without it
    refuses ``savegame schedule`` and ``savegame.client.schedule``."""
    queues: bool = False
    """Declared queues with limits decided at claim time (``stores._queues.QueueStore``:
    ``declare_queue``, ``list_queues``, ``create_run(queue=...)``, ``claim_run(queues=...)``).
    A store without it refuses ``submit(queue=...)`` and ``Worker(queues=...)``."""
    pooled: bool = False
    """The handle keeps a pool of connections and calls from many threads run at once,
    so a worker's slots share one handle (PostgreSQL, Redis): one pool per worker
    process, sized by the URL's ``pool_max``, rather than one per slot, which met the
    server's ``max_connections`` with 4 workers of 16 slots."""
    blocking: bool = True
    """Calls wait on a disk or a network, so an async run makes them in a worker thread
    and its event loop goes on meanwhile. Without it (``memory://``) a call takes
    microseconds, less than the hop to a thread and back, and is made on the loop."""


@quick_init  # one a checkpoint: its field set by a plain store, not object.__setattr__
@dataclass(frozen=True, slots=True)
class PutResult:
    """What ``put_checkpoint`` read of the run in the transaction that wrote the record."""

    cancel_requested: bool
    """The run's cancel flag as committed: the runtime starts the next step without
    reading the run again (on PostgreSQL and Redis a round trip per step)."""


#: The old name of :class:`PutResult`, kept for stores written against it.
Written = PutResult


@quick_init  # one a checkpoint of a batched put (an arun's on memory://, say)
@dataclass(frozen=True, slots=True)
class Put:
    """The arguments of one ``put_checkpoint`` call, for ``BatchStore.put_checkpoints``."""

    record: CheckpointRecord
    lease_token: int
    error: str | None = None
    effects: Sequence[EffectRecord] = ()
    blobs: Mapping[str, bytes] | None = None
    waiting: Waiting | None = None
    events: Sequence[EffectRecord] = ()


@dataclass(frozen=True, slots=True)
class Delivery:
    """What ``deliver_event`` did."""

    entry: EffectRecord
    """The event entry as stored: the one given, or the one already there."""
    delivered: bool
    """False when an entry with that request id was there already (a duplicate send)."""


@dataclass(frozen=True, slots=True)
class ThreadInfo:
    """A thread summarised from its runs."""

    thread_id: str
    runs: int
    latest_run_id: str
    updated_at: float
    """Epoch seconds of the latest change to any of its runs."""


@dataclass(frozen=True, slots=True)
class StoreStats:
    """Sizes for ``savegame stats`` and benchmarks."""

    runs: int
    checkpoints: int
    payload_bytes: int
    """Sum of stored checkpoint payload sizes."""
    file_bytes: int | None
    """On-disk size where the backend can tell (SQLite file plus WAL), else None."""
    blobs: int = 0
    blob_bytes: int = 0
    effects: int = 0


@dataclass(frozen=True, slots=True)
class RunSize:
    """Storage used by one run (``savegame stats``)."""

    run_id: str
    thread_id: str
    status: RunStatus
    checkpoints: int
    payload_bytes: int
    """Sum of the run's checkpoint payload sizes."""
    effects: int
    effect_bytes: int
    """Sum of the run's journal argument and result sizes."""


@dataclass(frozen=True, slots=True)
class RunPosition:
    """Where a run sorts in :meth:`Store.list_runs`: the keyset a next page starts after."""

    created_at: datetime
    run_id: str

    @classmethod
    def of(cls, run: RunInfo) -> RunPosition:
        return cls(run.created_at, run.run_id)


@runtime_checkable
class Store(Protocol):
    """Where checkpoints, runs and leases live."""

    @property
    def url(self) -> str:
        """The URL this store was opened with (without secrets)."""
        ...

    @property
    def capabilities(self) -> Capabilities: ...

    # -- runs ---------------------------------------------------------------
    def create_run(
        self,
        run: RunInfo,
        first: CheckpointRecord,
        *,
        owner: str | None,
        ttl: float,
        blobs: Mapping[str, bytes] | None = None,
        sole: bool = False,
    ) -> Lease:
        """Insert a run with its first checkpoint (and the blobs it brings) and a lease.

        The lease is held by ``owner`` for ``ttl`` seconds; ``owner`` None
        creates the run unowned (token 1, no owner: queued for a worker fleet,
        claimable at once). The run's status is the first record's.

        ``sole``: the run must be the only unfinished one of its thread and start from
        the thread's newest checkpoint (the first record's parent), checked in the same
        transaction as the insert, so of two processes starting runs on one thread at
        once one creates its run and the other is refused, whatever their timing.

        Raises:
            ConflictError: a run with that id exists; ``sole``: the thread's newest
                checkpoint is no longer the first record's parent (read it again).
            ThreadBusyError: ``sole``, and another run of the thread is unfinished.
        """
        ...

    def get_run(self, run_id: str) -> RunInfo:
        """Raises NotFoundError for an unknown run id."""
        ...

    def list_runs(
        self,
        *,
        thread_id: str | None = None,
        status: RunStatus | None = None,
        limit: int = 100,
        workflow: str | None = None,
        search: str | None = None,
        before: RunPosition | None = None,
    ) -> list[RunInfo]:
        """Runs, newest first (``created_at``, then ``run_id``, descending), filtered.

        Args:
            thread_id, status, workflow: only runs with that thread, status, workflow name.
            search: only runs whose run id or thread id contains this text, ignoring case.
            before: a page's last run (its position): only the runs that sort after it, so
                pages follow each other by keyset, each as fast as the first.
        """
        ...

    def list_threads(self, *, limit: int = 100) -> list[ThreadInfo]:
        """Threads, most recently updated first."""
        ...

    # -- checkpoints ----------------------------------------------------------
    def put_checkpoint(
        self,
        record: CheckpointRecord,
        *,
        lease_token: int,
        error: str | None = None,
        effects: Sequence[EffectRecord] = (),
        blobs: Mapping[str, bytes] | None = None,
        waiting: Waiting | None = None,
        events: Sequence[EffectRecord] = (),
    ) -> PutResult:
        """Insert ``record`` and move its run's head to it, fenced by ``lease_token``.

        The run's status and step become the record's; ``error`` is stored on the
        run. ``effects`` (results of reads made during the step) are journaled in
        the same transaction, insert-if-absent. ``blobs`` (digest -> bytes) are
        stored insert-if-absent before or with the record, never after it, so a
        committed record never points at a missing blob: every digest in
        ``record.header.blobs`` must be given or already stored, checked in the
        transaction (a concurrent blob collection may have removed one the
        caller believed present), else ConflictError and nothing is written.

        Returns what the same transaction read of the run (its cancel flag).

        ``waiting`` (stores with ``Capabilities.waits``): given exactly when the record's
        status is waiting. The run's wake time becomes ``waiting.until``, or WOKEN when
        ``need`` of its ``topics`` already have a pending event; any other status clears
        it. ``events``: pending event entries for *other* runs (a child's end, for its
        parent), delivered in this transaction as ``deliver_event`` does; one for a run
        that does not exist (any more) is dropped.

        Raises:
            LeaseLostError: the run's fencing token is no longer ``lease_token``.
            ConflictError: the checkpoint id exists already, or a referenced blob is missing.
            NotFoundError: the run does not exist.
            ValueError: ``waiting`` given for another status or missing for waiting; an
                entry in ``events`` that is not a pending event.
        """
        ...

    def get_checkpoint(self, checkpoint_id: str) -> CheckpointRecord:
        """Raises NotFoundError for an unknown id."""
        ...

    def latest_checkpoint(self, run_id: str) -> CheckpointRecord:
        """The run's head. Raises NotFoundError for an unknown run."""
        ...

    def thread_head(self, thread_id: str) -> CheckpointRecord | None:
        """The newest checkpoint of any run of the thread, or None for a new thread."""
        ...

    def list_checkpoints(
        self,
        run_id: str,
        *,
        limit: int | None = None,
        before: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> list[CheckpointHeader]:
        """A run's history, newest first, without payloads.

        Args:
            limit: at most this many headers.
            before: only checkpoints whose id sorts before this one (paging).
            metadata: only checkpoints whose metadata has each of these top-level
                keys equal to the given scalar value.
        Raises:
            NotFoundError: the run does not exist.
        """
        ...

    # -- leases ---------------------------------------------------------------
    def claim_run(
        self,
        owner: str,
        ttl: float,
        *,
        workflows: Sequence[str] | None = None,
        versions: Sequence[str] | None = None,
    ) -> Lease | None:
        """Atomically take the oldest runnable run and lease it to ``owner``; None when there is none.

        Runnable: status queued or running, with no owner or an expired lease
        (its worker died or stopped); with ``Capabilities.waits``, also waiting and
        woken (``wake_at`` at or before this caller's clock), no live lease: those are
        taken first, soonest wake time first. Optionally only runs of these workflow
        names, and only runs started under one of these code ``versions``
        (``RunInfo.version``; a run without one is not among them). Concurrent claimers never get the same run (PostgreSQL:
        ``FOR UPDATE SKIP LOCKED``); the token grows as with ``acquire_lease``.
        """
        ...

    def acquire_lease(
        self, run_id: str, owner: str, ttl: float, *, takeover_token: int | None = None
    ) -> Lease:
        """Take ownership of a run.

        Succeeds when the run has no owner, the lease has expired, or its current
        token equals ``takeover_token`` (the caller proved that holder dead).
        The new token is one more than the run's previous token.

        Raises:
            LeaseHeldError: another owner holds a live lease.
            NotFoundError: the run does not exist.
        """
        ...

    def renew_lease(self, run_id: str, token: int, ttl: float) -> Lease:
        """Extend our lease. Raises LeaseLostError when ``token`` is no longer current."""
        ...

    def release_lease(self, run_id: str, token: int) -> None:
        """Give up our lease; a no-op when ``token`` is no longer current. The token is kept."""
        ...

    # -- journal ----------------------------------------------------------------
    def record_intent(self, effect: EffectRecord, *, lease_token: int) -> EffectRecord:
        """Journal ``effect`` unless its (run_id, request_id) is there already; return what is stored.

        An existing NOT_DONE entry is replaced by ``effect``.

        Raises:
            LeaseLostError: the run's fencing token is no longer ``lease_token``.
            NotFoundError: the run does not exist.
        """
        ...

    def record_intents(
        self, effects: Sequence[EffectRecord], *, lease_token: int
    ) -> list[EffectRecord]:
        """``record_intent`` of each entry, in order, in one atomic step (one commit): all
        are journaled or none. A request id given twice gets the first entry back twice.

        A caller with several entries at once (a LangGraph task's pending writes) pays
        one fenced write for them, not one each; an empty list is a no-op.

        Raises:
            LeaseLostError: the run's fencing token is no longer ``lease_token``.
            NotFoundError: the run does not exist.
            ValueError: the entries belong to more than one run.
        """
        ...

    def record_result(
        self,
        run_id: str,
        request_id: str,
        *,
        status: EffectStatus,
        result: bytes | None = None,
        error: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        checksum: str,
        lease_token: int | None,
        expect: EffectStatus | None = None,
        expect_checksum: str | None = None,
    ) -> EffectRecord:
        """Settle a journal entry: set status, result, error and completed_at; merge ``metadata``.

        ``lease_token`` None is a person acting outside any lease (approve,
        resolve); otherwise the write is fenced like a checkpoint. ``checksum``
        is the entry's new integrity check, computed by the caller. ``expect``:
        write only if the entry is still in that status, checked and written
        atomically, so of two people deciding one gate at once exactly one wins.
        ``expect_checksum``: write only if the entry's stored check is still this one,
        the one the caller verified and built the new check on (a ``rekey`` that
        re-sealed the entry meanwhile would otherwise leave a check over other bytes).

        Raises:
            LeaseLostError: fenced and the token is stale.
            NotFoundError: no such entry.
            EffectSettledError: ``expect`` is given and the entry is in another status, or
                ``expect_checksum`` is given and the entry changed since it was read.
        """
        ...

    def get_effect(self, run_id: str, request_id: str) -> EffectRecord:
        """Raises NotFoundError for an unknown entry."""
        ...

    def list_effects(
        self,
        run_id: str | None = None,
        *,
        kinds: Sequence[EffectKind] | None = None,
        statuses: Sequence[EffectStatus] | None = None,
        request_prefix: str | None = None,
        limit: int = 10_000,
    ) -> list[EffectRecord]:
        """Journal entries, oldest first (by created_at, then request_id), of one run or of all runs.

        Args:
            kinds: only entries of these kinds (an empty list matches nothing).
            statuses: only entries in these statuses (an empty list matches nothing).
            request_prefix: only entries whose request id starts with this literal text
                (no pattern: ``%``, ``_`` and ``\\`` are themselves; ``""`` matches all).
                With a ``run_id``, served by an index of that run's request ids, so
                reading one part of a long journal costs what that part holds.
            limit: at most this many entries.
        """
        ...

    def deliver_event(self, event: EffectRecord) -> Delivery:
        """Journal a pending event entry into its run, outside any lease (``Capabilities.waits``).

        Insert-if-absent by (run_id, request_id), so a second delivery of one request id
        (a send repeated with the same key) is dropped and the stored entry returned. In
        the same atomic step the run is woken if it is waiting and ``need`` of its topics
        now have a pending event.

        Raises:
            NotFoundError: the run does not exist.
            ValueError: ``event`` is not a pending entry of kind event.
        """
        ...

    def request_cancel(self, run_id: str) -> None:
        """Flag the run so its owner stops at the next step boundary (``RunInfo.cancel_requested``).

        Raises:
            NotFoundError: the run does not exist.
        """
        ...

    # -- storage engine -----------------------------------------------------------
    def get_chain(self, checkpoint_id: str) -> list[CheckpointRecord]:
        """The record, then its base, the base's base ... down to a keyframe (base_id None).

        One round trip where the backend allows (a recursive query).

        Raises:
            NotFoundError: the checkpoint, or a base it needs, is missing.
        """
        ...

    def get_blobs(self, digests: Sequence[str]) -> dict[str, bytes]:
        """The stored bytes of each digest that exists (missing ones are left out)."""
        ...

    def missing_blobs(self, digests: Sequence[str]) -> set[str]:
        """The digests among ``digests`` that are not stored."""
        ...

    def delete_checkpoints(self, checkpoint_ids: Sequence[str]) -> int:
        """Delete these checkpoints (not their runs); return how many went.

        The caller (retention) guarantees no kept checkpoint needs them as a base
        and no run's head is among them.
        """
        ...

    def delete_runs(self, run_ids: Sequence[str]) -> int:
        """Delete runs with their checkpoints and journal; return how many runs went."""
        ...

    def delete_unreferenced_blobs(self) -> tuple[int, int]:
        """Delete blobs no stored checkpoint refers to; return (blobs, bytes) freed."""
        ...

    def rewrite(
        self,
        records: Sequence[CheckpointRecord] = (),
        effects: Sequence[EffectRecord] = (),
        blobs: Mapping[str, bytes] | None = None,
        runs: Sequence[RunInfo] = (),
    ) -> None:
        """Replace stored records in place (``rekey``): same ids, new bytes and checks.

        Each record replaces the stored checkpoint of its id whole: header (format
        version, metadata, blob digests, which the blob references follow), payload
        and checksum; it must belong to the same run and thread. Each effect
        replaces the arguments, result, error, metadata and checksum of the entry
        with its (run_id, request_id). Blobs are stored under their digests,
        inserted or replaced (a record rewritten to name a new digest brings it
        here). Each run replaces the metadata, error and checksum of the row with
        its run id. Nothing else changes. One transaction where the backend allows.

        Raises:
            NotFoundError: a checkpoint, effect or run named is not stored (nothing is replaced).
            ConflictError: a rewritten record names a blob neither given nor stored.
        """
        ...

    def run_sizes(self, *, thread_id: str | None = None, limit: int = 1000) -> list[RunSize]:
        """Storage per run, largest payload first."""
        ...

    # -- housekeeping -----------------------------------------------------------
    def delete_thread(self, thread_id: str) -> int:
        """Delete a thread's runs, checkpoints and journal entries; return how many checkpoints went."""
        ...

    def stats(self) -> StoreStats: ...

    def close(self) -> None: ...


@runtime_checkable
class BatchStore(Store, Protocol):
    """A store with ``Capabilities.group_commit``: checkpoints of several runs in one commit."""

    def put_checkpoints(self, puts: Sequence[Put]) -> list[PutResult | Exception]:
        """Write each put as ``put_checkpoint`` would, all in one transaction.

        Each put is checked and written as if on its own (a savepoint): one that
        ``put_checkpoint`` would refuse (``LeaseLostError``, ``ConflictError``,
        ``NotFoundError``, ``ValueError``, ``MissingBlobsError``, or the database
        driver's ``DataError`` for a value it cannot store) gets that exception in
        its place in the result, and nothing of it is written; the others are. The
        transaction then commits once. A failure of the transaction itself (the
        commit, the connection) raises, and then none of the puts is written.

        Returns:
            One item per put, in order: what its transaction read (``PutResult``), or the
            exception that refused it.
        """
        ...
