"""Checkpoint writers: synchronous (the default) and a bounded background writer."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Protocol

from savegame.codec.blobs import known
from savegame.errors import CheckpointWriteError, LeaseLostError, MissingBlobsError
from savegame.model import CheckpointRecord, EffectRecord
from savegame.stores.base import Store, Written

Committed = Callable[[CheckpointRecord, float], None]
_Item = tuple[CheckpointRecord, str | None, Sequence[EffectRecord], Mapping[str, bytes] | None]


class Writer(Protocol):
    def write(
        self,
        record: CheckpointRecord,
        *,
        error: str | None = None,
        effects: Sequence[EffectRecord] = (),
        blobs: Mapping[str, bytes] | None = None,
    ) -> Written | None:
        """Write (or queue) a record with its journal entries; raises an earlier write's error.

        Returns what the store read of the run as it committed, or None when the
        record was only queued."""
        ...

    def flush(self) -> None:
        """Block until everything queued is committed; raise the first write error."""
        ...

    def close(self) -> None: ...


class SyncWriter:
    """Commits each record before returning."""

    def __init__(self, store: Store, token: int, committed: Committed) -> None:
        self._store = store
        self._token = token
        self._committed = committed

    def write(
        self,
        record: CheckpointRecord,
        *,
        error: str | None = None,
        effects: Sequence[EffectRecord] = (),
        blobs: Mapping[str, bytes] | None = None,
    ) -> Written:
        started = time.perf_counter()
        written = self._store.put_checkpoint(
            record, lease_token=self._token, error=error, effects=effects, blobs=blobs or None
        )
        self._committed(record, time.perf_counter() - started)
        return written

    def flush(self) -> None:
        return None

    def close(self) -> None:
        return None


_STOP = object()


class AsyncWriter:
    """Writes records in order from a daemon thread through a bounded queue.

    A full queue blocks the run (back-pressure) rather than dropping records.
    The first write error stops the writer; it is raised by the next ``write``
    or ``flush`` so the run stops at its next step boundary.
    """

    def __init__(
        self, store: Store, token: int, committed: Committed, *, maxsize: int = 16
    ) -> None:
        self._store = store
        self._token = token
        self._committed = committed
        self._queue: queue.Queue[_Item | None] = queue.Queue(maxsize=maxsize)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._loop, name="savegame-writer", daemon=True)
        self._thread.start()

    def _loop(self) -> None:

        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                if self._error is not None:
                    continue  # drain without writing: order matters more than progress
                record, error, effects, blobs = item
                started = time.perf_counter()
                try:
                    self._store.put_checkpoint(
                        record,
                        lease_token=self._token,
                        error=error,
                        effects=effects,
                        blobs=blobs or None,
                    )
                except LeaseLostError as exc:
                    self._error = exc  # not a write failure: someone else owns the run now
                    continue
                except BaseException as exc:
                    if isinstance(exc, MissingBlobsError):
                        # A prune elsewhere removed blobs believed stored: this run stops
                        # (resumable), and later runs ask the store again instead of failing too.
                        known.forget(self._store)
                    # Raised on the run's thread at its next boundary, named like a sync failure.
                    failure = CheckpointWriteError(record.run_id, record.header.step, exc)
                    failure.__cause__ = exc
                    self._error = failure
                    continue
                try:
                    self._committed(record, time.perf_counter() - started)
                except BaseException as exc:
                    # The record is durable; what failed is what follows it (an observer,
                    # say). Stop the run at its next boundary, as a sync writer would,
                    # rather than let this thread die and flush() wait forever.
                    failure = CheckpointWriteError(record.run_id, record.header.step, exc)
                    failure.__cause__ = exc
                    self._error = failure
            finally:
                self._queue.task_done()

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def write(
        self,
        record: CheckpointRecord,
        *,
        error: str | None = None,
        effects: Sequence[EffectRecord] = (),
        blobs: Mapping[str, bytes] | None = None,
    ) -> None:
        self._raise()
        self._queue.put((record, error, effects, blobs))

    def flush(self) -> None:
        self._queue.join()
        self._raise()

    def close(self) -> None:
        if self._thread.is_alive():
            self._queue.put(None)  # the stop marker
            self._thread.join()
