"""``migrate``: LangGraph threads from a SqliteSaver file or a PostgresSaver database into a
savegame store, written through :class:`SavegameSaver`, one thread at a time.

Per thread:

1. Its checkpoint ids are read from the source; the target's marker for it
   (:mod:`._claims`) says ``done`` (skipped: a migration finished it) or nothing.
   A thread the target already has LangGraph checkpoints of, without a marker, is
   someone else's (a graph ran there under that id): skipped, never mixed.
2. The marker is taken: created (one creator wins), or taken over from a migration
   that died, whose half-written thread is then deleted (``delete_thread``).
3. Every checkpoint, oldest first, is read by LangGraph's saver (``get_tuple``: its
   values, metadata and pending writes), checked for pure data (a type savegame does
   not store is reported with its path: :mod:`._guard`), and written with ``put`` and
   ``put_writes`` (each write with its task path). ``latest_only``: the newest
   checkpoint of each namespace only.
4. Verified: the thread's history and the latest of each namespace, as both savers
   return them (:mod:`._verify`). A difference, an unreadable row or an unstorable
   value undoes the thread (deleted, marker removed) and reports why.
5. The marker says ``done``, with what was moved.

**Whole or not at all, after a SIGKILL anywhere.** A thread is visible as
migrated only through its ``done`` marker, written last, after verification. A
migration killed before it leaves the marker at ``writing``, held by a process
that is gone; the next run takes it over (at once on the same host: the holder's
pid is gone or reused, as ``savegame resume`` checks; after the hold's 300 s on
another host), deletes whatever of the thread is there and writes it again. So
each thread lands once, whole, however often a migration is killed and rerun.

**A second migration at the same time.** Only the holder of a thread's marker
writes the thread. Creating the marker is one atomic insert, so of two processes
starting a thread one holds it and the other reports it ``being migrated by PID
...`` and goes on with the next thread (a rerun later finds it done). A hold is
taken over only from a holder that is provably dead (same host) or whose hold
expired (renewed every 5 s between checkpoints, it lasts 300 s), and ``done`` is
written fenced by the hold's token, so a process that lost its hold never marks a
thread done, and stops at its next renewal. What this does not close: a process on
another host frozen for longer than 300 s in the middle of writing one checkpoint,
which on waking finishes that one write into a thread another process now writes.

The source is only read: see :mod:`._sources`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from savegame import codec
from savegame.codec.storage import StorageConfig
from savegame.errors import SerializationError, StoreNotFoundError
from savegame.integrations.langgraph import _guard, _types
from savegame.integrations.langgraph._claims import DONE, Claim, Claims, Held, TakenOver, marker_id
from savegame.integrations.langgraph._saver import SavegameSaver
from savegame.integrations.langgraph._sources import Source, TaskPaths, open_source
from savegame.integrations.langgraph._verify import verify_thread
from savegame.stores import MemoryStore, Store, open_store

MIGRATED, ALREADY, SKIPPED, WOULD = "migrated", "already migrated", "skipped", "would migrate"


@dataclass(frozen=True, slots=True)
class ThreadResult:
    """What a migration did with one thread."""

    thread_id: str
    status: str
    """``migrated``, ``already migrated`` (a marker says so), ``skipped`` or, in a dry
    run, ``would migrate``."""
    checkpoints: int = 0
    """Checkpoints written (or that would be)."""
    writes: int = 0
    """Pending writes written."""
    namespaces: int = 0
    bytes_before: int = 0
    """The thread's rows in the source, as stored."""
    bytes_after: int = 0
    """Its records and journal entries in the target (blobs, shared, are in the report)."""
    reason: str | None = None
    """Why it was skipped."""
    path: str | None = None
    """Where the value that could not be stored sits in the source's checkpoint tuple
    (``checkpoint['channel_values']['x'][2]``, ``pending_writes[0][2]``)."""
    checkpoint_id: str | None = None
    """The source checkpoint the reason is about, if one."""


@dataclass(frozen=True, slots=True)
class MigrationReport:
    """What :func:`migrate` did."""

    source: str
    target: str
    dry_run: bool
    latest_only: bool
    results: tuple[ThreadResult, ...]
    seconds: float
    source_bytes: int | None
    """The source database's size (SQLite: file + WAL; PostgreSQL: its tables)."""
    target_bytes: int | None
    """The target's file size afterwards, where the store can tell (SQLite)."""
    blob_bytes: int = 0
    """Blob bytes the target gained (packs and large values, shared between threads)."""

    def _with(self, status: str) -> list[ThreadResult]:
        return [r for r in self.results if r.status == status]

    @property
    def migrated(self) -> list[ThreadResult]:
        return self._with(WOULD if self.dry_run else MIGRATED)

    @property
    def already(self) -> list[ThreadResult]:
        return self._with(ALREADY)

    @property
    def skipped(self) -> list[ThreadResult]:
        return self._with(SKIPPED)

    @property
    def checkpoints(self) -> int:
        return sum(r.checkpoints for r in self.migrated)

    @property
    def writes(self) -> int:
        return sum(r.writes for r in self.migrated)

    @property
    def bytes_before(self) -> int:
        return sum(r.bytes_before for r in self.migrated)

    @property
    def bytes_after(self) -> int:
        return sum(r.bytes_after for r in self.migrated) + self.blob_bytes

    @property
    def threads_per_second(self) -> float:
        return len(self.results) / self.seconds if self.seconds > 0 else 0.0


class _Skip(Exception):
    def __init__(self, reason: str, *, path: str | None = None, checkpoint: str | None = None):
        super().__init__(reason)
        self.reason, self.path, self.checkpoint = reason, path, checkpoint


def _conf(thread_id: str, ns: str, checkpoint_id: str | None = None) -> Any:
    conf = {"thread_id": thread_id, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def _storable(value: Any, path: str, checkpoint_id: str) -> None:
    try:
        codec.encode_value(value, path)
    except SerializationError as exc:
        unknown = _guard.first_unknown(value)
        reason = unknown.describe() if unknown is not None else exc.reason
        raise _Skip(reason, path=exc.path, checkpoint=checkpoint_id) from None


def check(tup: Any) -> None:
    """Refuse a checkpoint savegame cannot store, naming the path in the checkpoint tuple
    (``checkpoint['channel_values']['x'][2]``, ``pending_writes[0][2]``).

    Every value, also of channels whose version did not change: a source whose value
    moved without its version is caught here, not stored (measured: a tenth of a second
    for a 400-step thread of 2 KB messages)."""
    cid = tup.config["configurable"]["checkpoint_id"]
    checkpoint = tup.checkpoint
    for name, value in checkpoint.get("channel_values", {}).items():
        _storable(value, f"checkpoint['channel_values'][{name!r}]", cid)
    _storable({k: v for k, v in checkpoint.items() if k != "channel_values"}, "checkpoint", cid)
    _storable(tup.metadata, "metadata", cid)
    for index, (_, _, value) in enumerate(tup.pending_writes):
        _storable(value, f"pending_writes[{index}][2]", cid)


class _Migration:
    def __init__(
        self, source: Source, saver: SavegameSaver, claims: Claims, *, latest_only: bool
    ) -> None:
        self.source, self.saver, self.claims = source, saver, claims
        self.latest_only = latest_only

    def read(self, thread_id: str, ns: str, checkpoint_id: str) -> Any:
        try:
            tup = self.source.saver.get_tuple(_conf(thread_id, ns, checkpoint_id))
        except Exception as exc:  # whatever LangGraph's reader raises for this row
            raise _Skip(
                f"LangGraph's saver could not read it: {type(exc).__name__}: {exc}",
                checkpoint=checkpoint_id,
            ) from None
        if tup is None:
            raise _Skip("it left the source during the migration", checkpoint=checkpoint_id)
        return tup

    def plan(self, thread_id: str, rows: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """What to write, oldest first: every row, or with ``latest_only`` the newest of
        each namespace, and the ancestors LangGraph rebuilds its DeltaChannels from."""
        if not self.latest_only:
            return rows
        newest: dict[str, str] = {}
        for ns, cid in rows:  # oldest first: the last one seen is the newest
            newest[ns] = cid
        keep = set(newest.items())
        for ns, cid in newest.items():
            keep.update((ns, ancestor) for ancestor in self._deltas(thread_id, ns, cid))
        return sorted(keep, key=lambda r: r[1])

    def _deltas(self, thread_id: str, ns: str, checkpoint_id: str) -> list[str]:
        """The ancestors a DeltaChannel's value is replayed from: a DeltaChannel keeps no
        value in a checkpoint (only a snapshot now and then, and its name in the metadata's
        ``counters_since_delta_snapshot``); LangGraph folds the writes of the parent chain
        down to the nearest checkpoint that holds one."""
        tup = self.read(thread_id, ns, checkpoint_id)
        missing = {
            name
            for name in tup.metadata.get("counters_since_delta_snapshot") or {}
            if name not in tup.checkpoint.get("channel_values", {})
        }
        found: list[str] = []
        while missing and tup.parent_config is not None:
            parent = str(tup.parent_config["configurable"]["checkpoint_id"])
            tup = self.read(thread_id, ns, parent)
            found.append(parent)
            missing -= set(tup.checkpoint.get("channel_values", {}))
        return found

    def each(self, thread_id: str, plan: list[tuple[str, str]]) -> Iterable[Any]:
        """The planned tuples, read and checked, oldest first."""
        for ns, cid in plan:
            tup = self.read(thread_id, ns, cid)
            check(tup)
            yield tup

    def write(self, tup: Any, paths: TaskPaths) -> int:
        conf = tup.config["configurable"]
        thread_id, ns, cid = conf["thread_id"], conf.get("checkpoint_ns", ""), conf["checkpoint_id"]
        parent = tup.parent_config or _conf(thread_id, ns)
        checkpoint = tup.checkpoint
        tasks: dict[str, list[tuple[str, Any]]] = {}
        for task_id, channel, value in tup.pending_writes:
            tasks.setdefault(task_id, []).append((channel, value))
        try:
            saved = self.saver.put(parent, checkpoint, tup.metadata, checkpoint["channel_versions"])
            for task_id, writes in tasks.items():
                self.saver.put_writes(saved, writes, task_id, paths.get((ns, cid, task_id), ""))
        except SerializationError as exc:  # check() passed it: the saver's own rules refused
            raise _Skip(exc.reason, path=exc.path, checkpoint=cid) from None
        return len(tup.pending_writes)

    def thread(self, thread_id: str, *, dry_run: bool) -> ThreadResult:
        rows = self.source.checkpoints(thread_id)
        if not rows:
            return ThreadResult(thread_id, SKIPPED, reason="no such thread in the source")
        namespaces = sorted({ns for ns, _ in rows})
        marker = self.claims.marker(thread_id)
        if marker.phase == DONE:
            return ThreadResult(thread_id, ALREADY, reason=f"marked done by {marker_id(thread_id)}")
        if marker.phase is None and next(self.saver.list(_conf(thread_id, ""), limit=1), None):
            return ThreadResult(
                thread_id,
                SKIPPED,
                reason="the target has LangGraph checkpoints of this thread that no "
                "migration wrote: left as they are",
            )
        size = self.source.thread_bytes(thread_id)
        try:
            plan = self.plan(thread_id, rows)
        except _Skip as why:
            return _skipped(thread_id, why, size)
        if dry_run:
            try:
                writes = sum(len(t.pending_writes) for t in self.each(thread_id, plan))
            except _Skip as why:
                return _skipped(thread_id, why, size)
            return ThreadResult(thread_id, WOULD, len(plan), writes, len(namespaces), size)
        try:
            claim = self.claims.take(thread_id)
        except Held as held:
            return ThreadResult(thread_id, SKIPPED, reason=str(held), bytes_before=size)
        if not isinstance(claim, Claim):
            return ThreadResult(thread_id, ALREADY, reason="a concurrent migration finished it")
        try:
            return self._move(claim, plan, namespaces, size)
        except TakenOver as lost:
            return ThreadResult(thread_id, SKIPPED, reason=str(lost), bytes_before=size)

    def _move(
        self, claim: Claim, plan: list[tuple[str, str]], namespaces: list[str], size: int
    ) -> ThreadResult:
        thread_id = claim.thread_id
        if claim.resumed:  # what a killed migration wrote of it goes; written again below
            self.saver.delete_thread(thread_id)
        paths = self.source.task_paths(thread_id)
        writes = 0
        try:
            for tup in self.each(thread_id, plan):
                self.claims.renew(claim)
                writes += self.write(tup, paths)
            self.claims.renew(claim, now=True)
            kept = None if not self.latest_only else sorted(plan, key=lambda r: r[1], reverse=True)
            problems = verify_thread(self.source.saver, self.saver, thread_id, namespaces, kept)
            if problems:
                raise _Skip("verification failed: " + "; ".join(problems))
        except _Skip as why:
            self.claims.abandon(claim, lambda: self.saver.delete_thread(thread_id))
            return _skipped(thread_id, why, size)
        after = sum(
            r.payload_bytes + r.effect_bytes
            for r in self.saver.store.run_sizes(thread_id=thread_id)
            if r.run_id != claim.run_id
        )
        summary = {"checkpoints": len(plan), "writes": writes, "bytes_before": size}
        self.claims.finish(claim, {**summary, "bytes_after": after})
        return ThreadResult(thread_id, MIGRATED, len(plan), writes, len(namespaces), size, after)


def _skipped(thread_id: str, why: _Skip, size: int) -> ThreadResult:
    return ThreadResult(
        thread_id,
        SKIPPED,
        bytes_before=size,
        reason=why.reason,
        path=why.path,
        checkpoint_id=why.checkpoint,
    )


def migrate(
    source: str,
    to: str | Store,
    *,
    threads: Sequence[str] | None = None,
    latest_only: bool = False,
    dry_run: bool = False,
    types: Sequence[type[Any]] = (),
    storage: StorageConfig | None = None,
    on_start: Callable[[int], None] | None = None,
    on_thread: Callable[[ThreadResult], None] | None = None,
) -> MigrationReport:
    """Move LangGraph threads into a savegame store, written through :class:`SavegameSaver`.

    Safe to stop and run again: a thread lands whole or not at all, once (the module
    docstring says how, also with two migrations at once). The source is only read.

    Args:
        source: a LangGraph ``SqliteSaver`` file (a path or ``sqlite:///path``) or a
            ``PostgresSaver`` database (``postgresql://...``, its tables on the
            search path). Needs ``langgraph-checkpoint-sqlite`` or
            ``langgraph-checkpoint-postgres``.
        to: the savegame store (a URL or a Store).
        threads: only these thread ids (default: every thread of the source).
        latest_only: only the newest checkpoint of each namespace, with its writes
            (a graph continues from it; its history stays behind).
        dry_run: read and check everything, write nothing (not even the target file).
        types: classes registered with :func:`savegame.register` that the source's
            values hold (a pydantic model in the state); others are reported, not guessed.
        storage: the target's storage settings (None reads the environment).
        on_start: called with the number of threads before the first one.
        on_thread: called with each thread's result as it is done.

    Raises:
        ConfigurationError: the source is not a LangGraph database, or its driver
            (``langgraph-checkpoint-sqlite`` / ``-postgres``) is not installed.
    """
    started = time.perf_counter()
    src = open_source(source, [*_types.allowed_classes(), *types])
    try:
        store = _target(to, dry_run)
        try:
            report = _run(src, store, storage, threads, latest_only, dry_run, on_start, on_thread)
        finally:
            if store is not to:
                store.close()
    finally:
        src.close()
    return replace(report, seconds=time.perf_counter() - started)


def _target(to: str | Store, dry_run: bool) -> Store:
    if not dry_run:
        return open_store(to)
    try:
        return open_store(to, create=False)
    except StoreNotFoundError:
        return MemoryStore()  # nothing is there (and nothing is made): every thread is new


def _run(
    src: Source,
    store: Store,
    storage: StorageConfig | None,
    threads: Sequence[str] | None,
    latest_only: bool,
    dry_run: bool,
    on_start: Callable[[int], None] | None,
    on_thread: Callable[[ThreadResult], None] | None,
) -> MigrationReport:
    saver = SavegameSaver(store, storage=storage)
    job = _Migration(src, saver, Claims(store, storage, src.label), latest_only=latest_only)
    names = sorted(set(threads)) if threads else src.threads()
    blobs = store.stats().blob_bytes
    if on_start is not None:
        on_start(len(names))
    results: list[ThreadResult] = []
    for thread_id in names:
        results.append(job.thread(thread_id, dry_run=dry_run))
        if on_thread is not None:
            on_thread(results[-1])
    stats = store.stats()
    return MigrationReport(
        source=src.label,
        target=store.url,
        dry_run=dry_run,
        latest_only=latest_only,
        results=tuple(results),
        seconds=0.0,
        source_bytes=src.database_bytes(),
        target_bytes=None if dry_run else stats.file_bytes,
        blob_bytes=max(stats.blob_bytes - blobs, 0),
    )
