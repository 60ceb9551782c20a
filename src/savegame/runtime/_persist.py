"""Saving a checkpoint: from a step's state to a durable record, and the notice back.

The loop asks once per step boundary (:meth:`Saver.save`; :meth:`Saver.stop` for
the checkpoint that ends this process's work on a run), and the whole path is here:

1. encode the state as a keyframe or a delta (:class:`~savegame.codec.Encoder`),
   declared secret fields replaced by references to their names;
2. seal the blobs the store may lack (:meth:`~savegame.codec.Encoder.to_upload`);
3. write the record with its journal entries and blobs in one transaction
   (``Store.put_checkpoint``): at once with sync durability, so it is committed
   before the next step runs (in a batch with other runs' where the store allows,
   runtime/_commit.py; an ``arun`` hands it to its event loop's committer, which
   sends the loop's runs' saves to an io thread together); through a bounded queue
   to a writer thread with async durability (:class:`AsyncSaver`);
4. the commit notice: the encoder learns the record's blobs are stored, the
   ``on_checkpoint`` observer hears of the record.

An encoding error is raised as it is: nothing was written, and the loop decides
what the step counts as. Whatever fails after it is a ``CheckpointWriteError``
naming the step (or ``LeaseLostError``: someone else owns the run now).
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from savegame import codec, secrets
from savegame.codec import Encoded, Encoder, known_blobs, seal_error
from savegame.errors import CheckpointWriteError, LeaseLostError, MissingBlobsError
from savegame.model import (
    WORKSPACE_KEY,
    CheckpointHeader,
    CheckpointRecord,
    EffectRecord,
    Waiting,
    quick_init,
)
from savegame.runtime._bridge import threaded_io
from savegame.runtime._commit import committer, group_of
from savegame.runtime._execution import Execution
from savegame.stores.base import BatchStore, Put, PutResult
from savegame.workspace import Snapshots, manifest_of, restore


@dataclass(frozen=True, slots=True)
class Beside:
    """What a write carries for the store besides its record, journal entries and blobs."""

    waiting: Waiting | None = None
    """What a waiting record waits for (``put_checkpoint(waiting=...)``)."""
    events: Sequence[EffectRecord] = ()
    """Events for other runs, delivered with the record (a child's end, to its parent)."""


NOTHING = Beside()

_Queued = tuple[CheckpointRecord, str | None, Sequence[EffectRecord], dict[str, bytes], Beside]
"""A record queued for the writer thread: its error text, journal entries, blobs and the rest."""


@quick_init  # one a checkpoint: its fields set by plain stores, not object.__setattr__
@dataclass(frozen=True, slots=True)
class SaveResult:
    """What :meth:`Saver.save` wrote."""

    record: CheckpointRecord
    """The record: committed (sync durability) or queued (async)."""
    written: PutResult | None
    """What the store read of the run in the transaction that committed ``record``,
    while still current: None when the record was only queued, or when an
    ``on_checkpoint`` observer ran since the commit (it may have asked to cancel)."""


class Saver:
    """Saves the checkpoints of one execution; each is committed before ``save`` returns.

    :func:`saver` picks this class or :class:`AsyncSaver` from the durability.
    The loop calls it from one task; with async durability the writer thread
    runs the commit notice. It holds nothing of the loop's, so the writer thread
    never points back at the loop that owns it (a reference cycle that kept a
    finished run's state alive until the collector's next full pass).
    """

    def __init__(self, ex: Execution, state: dict[str, Any]) -> None:
        """``state``: what ``ex.start_record`` holds, the base of the next delta."""
        self.ex = ex
        self.encoder = (
            Encoder(ex.storage, base=ex.start_record, state=state, chain=ex.chain)
            if ex.chain is not None
            else Encoder(ex.storage)
        )
        self.last = ex.start_record
        """The last record known to be committed."""
        self.snapshots: Snapshots | None = None
        """The workspace's captures, once :meth:`restore_workspace` has run."""
        self.group = committer(ex.store)
        """Where this run's writes share a transaction with other runs' (group commit)."""
        self.loop_group = group_of(ex.store) if ex.io is threaded_io else None
        """Set for an ``arun`` on a group-commit store: its saves go through its event
        loop's committer (one io hop per batch) instead of an io call each."""

    def restore_workspace(self, state: dict[str, Any]) -> bool:
        """Put the workspace back as ``state`` (the start checkpoint's) holds it, before
        the first step; False when it holds none (the loop then checkpoints one)."""
        ws = self.ex.workspace
        assert ws is not None
        manifest = manifest_of(state)
        stats = None
        since = time.time_ns()  # before the restore's first stat, like a capture's start
        if manifest is not None:
            label = self.ex.start_record.checkpoint_id
            stats = restore(ws, manifest, self.ex.store, self.ex.storage, label).stats
        self.snapshots = Snapshots(ws, manifest, dict(stats or {}), self.ex.storage, since=since)
        return manifest is not None

    async def save(
        self,
        header: CheckpointHeader,
        state: dict[str, Any],
        dirty: Collection[str],
        effects: Sequence[EffectRecord],
        beside: Beside = NOTHING,
    ) -> SaveResult:
        """Save ``state`` under ``header`` with the journal's buffered ``effects``.

        ``dirty`` names the top-level keys set since the last record (all a delta
        looks at); ``beside``: events for other runs the write carries.

        Raises:
            Exception: the encoding's own error (a SerializationError naming the
                path, or whatever a value raised): nothing was written.
            CheckpointWriteError: the record could not be written, or what follows
                its commit failed (an observer); the step is named. With async
                durability, an earlier record's.
            LeaseLostError: another process owns the run now.
        """
        files: dict[str, bytes] = {}
        if self.snapshots is not None:
            # The files as this step left them, part of the checkpoint that ends it.
            capture = await self.ex.io(self.snapshots.capture)
            if capture.changed or WORKSPACE_KEY not in state:
                state[WORKSPACE_KEY] = capture.manifest
                dirty = {*dirty, WORKSPACE_KEY}
            files = capture.files
        encoded = self._encode(header, state, dirty, files)
        written = await self._write(encoded, error=None, effects=effects, beside=beside)
        # Good for the boundary right after this write only, and only if no user code
        # ran since the transaction read it: an on_checkpoint observer may ask to cancel
        # (a budget guard, say), and that must stop the run before its next step.
        if self.ex.observer.on_checkpoint is not None:
            written = None
        return SaveResult(encoded.record, written)

    async def stop(
        self,
        header: CheckpointHeader,
        state: dict[str, Any],
        dirty: Collection[str],
        effects: Sequence[EffectRecord],
        *,
        error: str | None,
        beside: Beside = NOTHING,
    ) -> CheckpointRecord:
        """Save the checkpoint that ends this process's work on the run, committed when
        this returns; ``error``: the run row's error text (sealed here under a keyring);
        ``beside``: what a waiting record waits for, events for other runs.

        A state that does not encode is not saved: the last committed one is, with its
        resume point, under ``header``'s status.
        """
        await self.flush()  # ``last`` is then the last record written
        try:
            encoded = self._encode(header, state, dirty)
        except Exception:
            # Steps since the last checkpoint left something unsaveable in the
            # state: fall back to the last committed state and its resume point.
            # Any error, not only SerializationError: the stop checkpoint must be
            # written, or the run stays running with no owner and is claimed again.
            last = self.last.header
            header = replace(
                header, step=last.step, node=last.node, usage=last.usage,
                next=last.next if header.next is not None else None,
                state_version=last.state_version,
            )  # fmt: skip
            encoded = Encoded(codec.rewrap(self.last, header, self.ex.storage))
        await self._write(
            encoded,
            error=seal_error(header.run_id, error, self.ex.storage),
            effects=effects,
            beside=beside,
        )
        await self.flush()
        return encoded.record

    async def flush(self) -> CheckpointRecord:
        """Wait until every record saved is committed; return the last one.

        Raises:
            CheckpointWriteError, LeaseLostError: an earlier write failed (async).
        """
        return self.last

    def announce(self, record: CheckpointRecord) -> None:
        """The commit notice for a record written by someone else (compensation)."""
        self._committed(record, 0.0)

    def close(self) -> None:
        """Stop the writer thread, if any; the loop is done."""

    def _encode(
        self,
        header: CheckpointHeader,
        state: dict[str, Any],
        dirty: Collection[str],
        files: dict[str, bytes] | None = None,
    ) -> Encoded:
        # The state as saved: declared secret fields become references to their names.
        fields = self.ex.workflow.secrets
        return self.encoder.encode(
            header, secrets.redact(state, fields) if fields else state, dirty, files
        )

    async def _write(
        self,
        encoded: Encoded,
        *,
        error: str | None,
        effects: Sequence[EffectRecord],
        beside: Beside = NOTHING,
    ) -> PutResult | None:
        record = encoded.record
        try:
            written: PutResult
            if self.loop_group is not None:
                on_loop = self.loop_group.on_loop(asyncio.get_running_loop())
                written = await on_loop.put(_Save(self, encoded, error, effects, beside))
            else:
                written = await self.ex.io(self._commit, encoded, error, effects, beside)
        except (LeaseLostError, CheckpointWriteError):
            raise
        except Exception as exc:
            raise CheckpointWriteError(record.run_id, record.header.step, exc) from exc
        return written

    def _commit(
        self,
        encoded: Encoded,
        error: str | None,
        effects: Sequence[EffectRecord],
        beside: Beside = NOTHING,
    ) -> PutResult:
        """Upload, write, notice: the whole save of one record, in one io call."""
        blobs = self.encoder.to_upload(self.ex.store, encoded)
        started = time.perf_counter()
        try:
            outcome = self._put(encoded.record, error, effects, blobs, beside)
        except MissingBlobsError as exc:
            # Re-sent once by finish, as a batch's refusal is.
            save = _Save(self, encoded, error, effects, beside)
            return save.finish(exc, time.perf_counter() - started)
        # What finish does with a put that succeeded, without building a _Save for it.
        self._committed(encoded.record, time.perf_counter() - started)
        return outcome

    def _put_for(
        self,
        record: CheckpointRecord,
        error: str | None,
        effects: Sequence[EffectRecord],
        blobs: dict[str, bytes],
        beside: Beside,
    ) -> Put:
        """The put of ``record`` as a group committer takes it."""
        return Put(
            record, self.ex.lease.token, error, effects, blobs or None,
            beside.waiting, beside.events,
        )  # fmt: skip

    def _put(
        self,
        record: CheckpointRecord,
        error: str | None,
        effects: Sequence[EffectRecord],
        blobs: dict[str, bytes],
        beside: Beside = NOTHING,
    ) -> PutResult:
        store = self.ex.store
        try:
            if self.group is not None:
                return self.group(self._put_for(record, error, effects, blobs, beside))
            if beside is NOTHING:
                # A store without waits (Capabilities.waits) need not know the two words.
                return store.put_checkpoint(
                    record,
                    lease_token=self.ex.lease.token,
                    error=error,
                    effects=effects,
                    blobs=blobs or None,
                )
            return store.put_checkpoint(
                record, lease_token=self.ex.lease.token, error=error, effects=effects,
                blobs=blobs or None, waiting=beside.waiting, events=beside.events,
            )  # fmt: skip
        except MissingBlobsError:
            # A prune elsewhere removed blobs this process believed stored: every
            # later upload asks the store again instead of failing too.
            known_blobs.forget(self.ex.store)
            raise

    def _committed(self, record: CheckpointRecord, seconds: float) -> None:
        """The commit notice: ``record`` is durable."""
        self.last = record
        self.encoder.committed(self.ex.store, record)
        if self.ex.observer.on_checkpoint is not None:
            self.ex.observer.on_checkpoint(record.header, seconds)


@dataclass(slots=True)
class _Save:
    """One record's save as its event loop's committer writes it (``_commit.Job``):
    what :meth:`Saver._commit` does, split around the batch."""

    saver: Saver
    encoded: Encoded
    error: str | None
    effects: Sequence[EffectRecord]
    beside: Beside

    @property
    def store(self) -> BatchStore:
        # group_of gave this store a committer: it is a BatchStore.
        return cast(BatchStore, self.saver.ex.store)

    def prepare(self) -> Put:
        saver = self.saver
        blobs = saver.encoder.to_upload(saver.ex.store, self.encoded)
        return saver._put_for(self.encoded.record, self.error, self.effects, blobs, self.beside)

    def finish(self, outcome: PutResult | Exception, seconds: float) -> PutResult:
        """The commit notice for ``outcome``'s record, or its error; a record refused
        for missing blobs is re-sent once first (``Saver._commit`` ends here too)."""
        saver, record = self.saver, self.encoded.record
        if isinstance(outcome, MissingBlobsError):
            # A prune elsewhere removed blobs this process believed stored: ask the store
            # again and re-send once, alone.
            known_blobs.forget(saver.ex.store)
            blobs = saver.encoder.to_upload(saver.ex.store, self.encoded)
            started = time.perf_counter()
            outcome = saver._put(record, self.error, self.effects, blobs, self.beside)
            seconds = time.perf_counter() - started
        elif isinstance(outcome, Exception):
            raise outcome
        saver._committed(record, seconds)
        return outcome


class AsyncSaver(Saver):
    """Writes records in order from a daemon thread through a bounded queue.

    A full queue blocks the run (back-pressure) rather than dropping records.
    The first write error stops the writer; it is raised by the next ``save``,
    ``stop`` or ``flush`` so the run stops at its next step boundary. Blobs are
    sealed on the run's side (the encoder is the run's), so a write that finds
    blobs missing is not retried: the run stops, resumable.
    """

    def __init__(self, ex: Execution, state: dict[str, Any], *, maxsize: int = 16) -> None:
        super().__init__(ex, state)
        self._queue: queue.Queue[_Queued | None] = queue.Queue(maxsize=maxsize)
        self._error: BaseException | None = None
        # The thread's target points back at this saver until the thread ends (close).
        self._thread = threading.Thread(target=self._drain, name="savegame-writer", daemon=True)
        self._thread.start()

    async def flush(self) -> CheckpointRecord:
        await self.ex.io(self._join)
        return self.last

    def close(self) -> None:
        if self._thread.is_alive():
            self._queue.put(None)  # the stop marker
            self._thread.join()

    async def _write(
        self,
        encoded: Encoded,
        *,
        error: str | None,
        effects: Sequence[EffectRecord],
        beside: Beside = NOTHING,
    ) -> None:
        record = encoded.record
        try:
            blobs = await self.ex.io(self.encoder.to_upload, self.ex.store, encoded)
            await self.ex.io(self._enqueue, (record, error, effects, blobs, beside))
        except (LeaseLostError, CheckpointWriteError):
            raise  # an earlier write's error names the step whose write failed
        except Exception as exc:
            raise CheckpointWriteError(record.run_id, record.header.step, exc) from exc

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def _enqueue(self, item: _Queued) -> None:
        self._raise()
        self._queue.put(item)

    def _join(self) -> None:
        self._queue.join()
        self._raise()

    def _drain(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                if self._error is not None:
                    continue  # drain without writing: order matters more than progress
                self._error = self._commit_queued(*item)
            finally:
                self._queue.task_done()

    def _commit_queued(
        self,
        record: CheckpointRecord,
        error: str | None,
        effects: Sequence[EffectRecord],
        blobs: dict[str, bytes],
        beside: Beside,
    ) -> BaseException | None:
        """Write one queued record and give notice; the error that stops the writer, if any."""
        started = time.perf_counter()
        try:
            self._put(record, error, effects, blobs, beside)
        except LeaseLostError as exc:
            return exc  # not a write failure: someone else owns the run now
        except BaseException as exc:
            return _failed(record, exc)
        try:
            self._committed(record, time.perf_counter() - started)
        except BaseException as exc:
            # The record is durable; what failed is what follows it (an observer,
            # say). Stop the run at its next boundary, as a sync save would,
            # rather than let this thread die and flush() wait forever.
            return _failed(record, exc)
        return None


def _failed(record: CheckpointRecord, exc: BaseException) -> CheckpointWriteError:
    """Raised on the run's thread at its next boundary, named like a sync failure."""
    failure = CheckpointWriteError(record.run_id, record.header.step, exc)
    failure.__cause__ = exc
    return failure


def saver(ex: Execution, state: dict[str, Any]) -> Saver:
    """The saver for ``ex``'s durability; ``state``: what ``ex.start_record`` holds."""
    return AsyncSaver(ex, state) if ex.durability == "async" else Saver(ex, state)
