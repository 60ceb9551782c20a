"""One savegame run per (thread, namespace): a "line" of LangGraph checkpoints.

What the saver asks of the store, in savegame's terms: find a line, append a
checkpoint to it (delta-encoded against the line's last record), read one back, and
journal pending writes. The mapping is described in the package docstring.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Any, TypeVar

import orjson

from savegame import codec
from savegame.codec.storage import StorageConfig
from savegame.effects import Journal
from savegame.errors import ConfigurationError, LeaseHeldError, LeaseLostError, NotFoundError
from savegame.ids import new_id
from savegame.integrations.langgraph import _rides
from savegame.integrations.langgraph._rides import Ride, Seats
from savegame.model import (
    CheckpointHeader,
    EffectKind,
    EffectRecord,
    EffectStatus,
    RunInfo,
    RunStatus,
    evolve,
    evolver,
    quick_init,
    utcnow,
)
from savegame.stores import Store
from savegame.stores.base import ALL_EFFECTS

WORKFLOW = "langgraph"
OWNER = "langgraph"
#: LangGraph has no owner of a thread: the lease only fences savegame's own writers.
TTL = 10 * 365 * 24 * 3600.0
NS_KEY = "checkpoint_ns"
#: LangGraph's ``NS_SEP``: a nested subgraph's namespace is its callers' and its own.
NS_SEP = "|"
CHECKPOINT, METADATA, PARENT, CHANNEL = "lg:checkpoint", "lg:metadata", "lg:parent", "c:"
#: Shorter pending writes stay plain JSON: compressed alone they shrink by little; longer
#: ones are stored compressed (unless compression is off): a message appended to a
#: channel is about all a step's journal holds.
WRITE_COMPRESS_FROM = 512
WRITE_MARK = {"langgraph": "write"}
#: A rebuilt line's run names the run it replaces, a copied one the run it copies; the
#: journal entry FINISHED, written last, says the whole line is there. Until then
#: readers go on with the old run, so a kill mid-rebuild loses nothing.
REBUILD_OF, COPY_OF, FINISHED = "lg_rebuild_of", "lg_copy_of", "lg:finished"
#: The request ids of durable tools' calls: ``tool:<checkpoint>:<task>:<call>``
#: (:mod:`savegame.integrations.langgraph._tools`); pending writes' are ``<checkpoint>|...``.
TOOL_PREFIX = "tool:"
#: Lines kept in memory with their encoders (a service talks to many threads): past
#: this, the longest unused goes (its next checkpoint is a keyframe, its lease taken
#: again); a long-lived process stays bounded however many threads it has served.
MAX_LINES = 512
#: A line's deltas may reach this many bytes before a keyframe even when the thread's
#: state is smaller (``Encoder(delta_floor=...)``). A short thread (a few messages) was
#: otherwise rewritten whole at every step or two, each delta already outgrowing it: 6
#: keyframes in 10 checkpoints of a chat of 512-byte messages, 40 % of ``put``'s time
#: (``benchmarks/langgraph_threads.py``), and more bytes than deltas, each keyframe
#: storing every message again. A load reads at most this much more (a few deltas, tens
#: of microseconds each); a long thread's state outgrows it within a few steps.
DELTA_FLOOR = 16 * 1024
#: Takeovers of a line's lease tried when other savers keep moving it in between.
TAKEOVER_TRIES = 3
#: The newest checkpoint ids a line remembers as stored (a durable tool's call waits
#: for its task's, almost always the newest); an older one is looked up in the store.
STORED_KEPT = 32


#: What every header of a line has: no node, completed, no next step (:meth:`Lines.append`
#: copies it with the fields each checkpoint sets).
_BLANK = CheckpointHeader(
    thread_id="", run_id="", checkpoint_id="", parent_id=None, step=0, node=None,
    status=RunStatus.COMPLETED, next=None, created_at=datetime(1970, 1, 1, tzinfo=timezone.utc),
)  # fmt: skip
_new_header = evolver(
    CheckpointHeader, "thread_id", "run_id", "checkpoint_id", "parent_id", "step", "metadata",
    "created_at",
)  # fmt: skip


Announced = list[bool]
"""What :meth:`Lines.announce` gives: ``[True]`` until :meth:`Lines.landed` took it."""


def stored_id(lg_id: str, run_id: str) -> str:
    return f"{lg_id}@{run_id}"


def lg_id_of(checkpoint_id: str) -> str:
    return checkpoint_id.rpartition("@")[0]


@dataclass
class Line:
    """A (thread, namespace) run as this process writes it."""

    run_id: str
    thread_id: str
    ns: str
    token: int | None = None
    encoder: codec.Encoder | None = None
    versions: dict[str, Any] = field(default_factory=dict)
    """The channel versions of the encoder's last record: what the next delta compares."""
    origin: dict[str, str] = field(default_factory=dict)
    """A rebuilt or copied line's ``{REBUILD_OF or COPY_OF: run id}``, in its run's metadata."""
    stored: deque[str] = field(default_factory=lambda: deque(maxlen=STORED_KEPT))
    """LangGraph ids of the newest checkpoints this process stored or found stored (a
    durable tool's call waits for its task's checkpoint)."""
    seats: Seats = field(default_factory=Seats)
    """Pending writes waiting to be committed with the line's next checkpoint."""


@quick_init  # two a pending write (given, then encoded): plain stores, not object.__setattr__
@dataclass(frozen=True, slots=True)
class Write:
    task_id: str
    channel: str
    value: Any
    task_path: str
    index: int
    data: tuple[bytes, bytes] | None = None
    """Its journal entry's arguments and result, encoded (:meth:`Lines.encoded`)."""


class Lines:
    """The lines of a store, with their encoders and lease tokens."""

    def __init__(
        self,
        store: Store,
        storage: StorageConfig | None,
        conventions: codec.Conventions | None = None,
    ) -> None:
        self.store = store
        # Resolved once, as each line's encoder does: None read the environment again
        # at every seal and encode (six variables, a few microseconds each time).
        self.storage = codec.storage.resolve(storage)
        self._compress_from = _compress_from(self.storage)
        self.conventions = conventions or codec.Conventions()
        """How values are encoded and decoded (:mod:`._types`: LangGraph's rules)."""
        self.lock = threading.RLock()
        self._appended = threading.Condition(self.lock)
        self._boarded = threading.Condition(self.lock)
        # Writes announced before they are encoded, on a lock of their own: a checkpoint
        # being encoded holds :attr:`lock`, and writes that waited for it to announce
        # themselves came too late to ride (a quarter of a chat10 run's).
        self._announcing = threading.Lock()
        self._announced: dict[tuple[str, str], int] = {}
        self._lines: OrderedDict[tuple[str, str], Line] = OrderedDict()
        """Least recently used first, at most :data:`MAX_LINES`."""
        self._early: dict[tuple[str, str, str], list[Write]] = {}

    # -- finding ------------------------------------------------------------------
    def runs(self, thread_id: str, *, unfinished: bool = False) -> list[RunInfo]:
        """The thread's LangGraph lines, newest first; with ``unfinished``, every run,
        those a killed rebuild or copy left and those a rebuild replaced too."""
        found = self.store.list_runs(thread_id=thread_id, limit=100_000)
        runs = [r for r in found if r.workflow == WORKFLOW]
        if unfinished:
            return runs
        finished = [r for r in runs if self._finished(r)]
        replaced = {r.metadata.get(REBUILD_OF) for r in finished}
        return [r for r in finished if r.run_id not in replaced]

    def _finished(self, run: RunInfo) -> bool:
        """A run written by a rebuild or a copy counts once its marker says all of it was."""
        if REBUILD_OF not in run.metadata and COPY_OF not in run.metadata:
            return True
        try:
            self.store.get_effect(run.run_id, FINISHED)
        except NotFoundError:
            return False
        return True

    def leftovers(self, thread_id: str, ns: str) -> list[str]:
        """Runs of the namespace no reader uses (readers use its newest whole run): a killed
        rebuild's or copy's, one a rebuild replaced but was killed before deleting, an
        older copy."""
        used = self.namespaces(thread_id).get(ns)
        return [
            r.run_id
            for r in self.runs(thread_id, unfinished=True)
            if r.metadata.get(NS_KEY) == ns and r.run_id != used
        ]

    def threads(self) -> list[str]:
        return [t.thread_id for t in self.store.list_threads(limit=1_000_000)]

    def find(self, thread_id: str, ns: str) -> Line | None:
        with self.lock:
            line = self._lines.get((thread_id, ns))
            if line is not None:
                self._lines.move_to_end((thread_id, ns))
                return line
            for run in self.runs(thread_id):
                if run.metadata.get(NS_KEY) == ns:
                    line = Line(run.run_id, thread_id, ns)
                    self._keep(line)
                    return line
            return None

    def seen(self, thread_id: str, ns: str) -> Mapping[str, codec.Seen]:
        """What the encoder of the namespace's line knows of its lists, or, before its
        first checkpoint (a subgraph's input comes as a write of every message, maybe
        before it), its caller's: only to speed a write's encoding up, so read without
        the lock or the store (dict reads)."""
        for key in ((thread_id, ns), (thread_id, parent_ns(ns))) if ns else ((thread_id, ns),):
            line = self._lines.get(key)
            if line is not None and line.encoder is not None:
                return line.encoder.seen
        return {}

    def _keep(self, line: Line) -> None:
        self._lines[(line.thread_id, line.ns)] = line
        self._lines.move_to_end((line.thread_id, line.ns))
        while len(self._lines) > MAX_LINES:
            self._lines.popitem(last=False)

    def forget(self, thread_id: str, ns: str | None = None) -> None:
        with self.lock:
            for key in [k for k in self._lines if k[0] == thread_id and ns in (None, k[1])]:
                del self._lines[key]

    def namespaces(self, thread_id: str) -> dict[str, str]:
        """ns -> run id of the thread's lines (the newest run of each namespace)."""
        out: dict[str, str] = {}
        for run in self.runs(thread_id):
            out.setdefault(str(run.metadata.get(NS_KEY, "")), run.run_id)
        return out

    # -- writing ------------------------------------------------------------------
    def append(
        self,
        thread_id: str,
        ns: str,
        state: dict[str, Any],
        *,
        fresh: bool = False,
        origin: dict[str, str] | None = None,
    ) -> Line:
        """Store ``state`` (a LangGraph checkpoint as savegame state) as the newest record
        of the thread's line in ``ns``, a new line (run) when there is none or ``fresh``
        (then ``origin`` names the run it rebuilds or copies)."""
        with self.lock:
            line = None if fresh else self.find(thread_id, ns)
            fresh = line is None
            if line is None:
                line = Line(new_id(), thread_id, ns, origin=dict(origin or {}))
            if line.encoder is None:
                line.encoder = codec.Encoder(self.storage, delta_floor=DELTA_FLOOR, by_value=True)
                line.versions = {}
                if fresh and origin is None and ns:  # a subgraph's: taught its caller's
                    line.encoder.learn(self.seen(thread_id, parent_ns(ns)))
            checkpoint = state[CHECKPOINT]
            versions = dict(checkpoint.get("channel_versions", {}))
            changed = {CHECKPOINT, METADATA, PARENT}
            for name in versions.keys() | line.versions.keys():
                if versions.get(name, _ABSENT) != line.versions.get(name, _ABSENT):
                    changed.add(CHANNEL + name)
            metadata = state[METADATA]
            step = metadata.get("step") if isinstance(metadata, Mapping) else None
            parent = state[PARENT]
            # The blank header copied with this checkpoint's fields: CheckpointHeader(...)'s
            # keywords reach __init__ through a dict, twice the copy's instructions.
            header = _new_header(
                _BLANK,
                thread_id=thread_id,
                run_id=line.run_id,
                checkpoint_id=stored_id(checkpoint["id"], line.run_id),
                parent_id=None if parent is None else stored_id(parent, line.run_id),
                step=max(step, 0) if isinstance(step, int) else 0,
                metadata=_header_metadata(metadata),
                created_at=utcnow(),
            )
            with codec.using_conventions(self.conventions):
                encoded = line.encoder.encode(header, state, None if fresh else changed)
            record = encoded.record
            try:
                blobs = line.encoder.to_upload(self.store, encoded)
                if fresh:
                    self._create(line, record, blobs)
                    self._keep(line)
                else:
                    # A rebuild (origin given) holds the lock across its appends: waiting
                    # for writes would let it go in the middle.
                    self._put_with_riders(line, record, blobs, board=origin is None)
            except BaseException:
                # The encoder has moved on to a record the store may not have: a delta on
                # it would leave every later checkpoint of the line unreadable. The next
                # put starts again from a keyframe, whichever way this one went.
                line.encoder, line.versions = None, {}
                raise
            line.encoder.committed(self.store, record)
            line.versions = versions
            line.stored.append(checkpoint["id"])
            self._appended.notify_all()
            early = self._early.pop((thread_id, ns, checkpoint["id"]), [])
            if early:
                self.put_writes(line, checkpoint["id"], early)
            return line

    def early(self, thread_id: str, ns: str, lg_id: str, writes: list[Write]) -> Line | None:
        """The line to write ``writes`` to now, or None: held until their namespace's
        first checkpoint, which they came before. With ``durability="async"`` LangGraph
        runs a put and the next put_writes in parallel threads: a subgraph's first writes
        can win."""
        with self.lock:
            line = self.find(thread_id, ns)
            if line is None:
                self._early.setdefault((thread_id, ns, lg_id), []).extend(writes)
            return line

    def _create(self, line: Line, record: Any, blobs: dict[str, bytes]) -> None:
        now = utcnow()
        info = RunInfo(
            run_id=line.run_id,
            thread_id=line.thread_id,
            workflow=WORKFLOW,
            workflow_ref=None,
            status=RunStatus.COMPLETED,
            step=record.header.step,
            head_checkpoint_id=record.checkpoint_id,
            created_at=now,
            updated_at=now,
            metadata={NS_KEY: line.ns, **line.origin},
        )
        # evolve, not replace: once per thread, a third of a 3-checkpoint thread's puts.
        info = evolve(info, checksum=codec.run_checksum(info, self.storage))
        lease = self.store.create_run(info, record, owner=OWNER, ttl=TTL, blobs=blobs)
        line.token = lease.token

    def _token(self, line: Line, *, again: bool = False) -> int:
        # Under the lock: two threads of this saver (a durable tool's call and LangGraph's
        # background put_writes) taking the lease at once read the same token, and the
        # second's takeover of it is refused (LeaseHeldError) once the first moved it.
        with self.lock:
            if line.token is None or again:
                for _ in range(TAKEOVER_TRIES - 1):
                    try:
                        line.token = self._take_over(line.run_id)
                        break
                    except LeaseHeldError:
                        continue  # another process moved it between the read and the takeover
                else:
                    line.token = self._take_over(line.run_id)
            return line.token

    def _take_over(self, run_id: str) -> int:
        run = self.store.get_run(run_id)
        held = run.lease.token if run.lease is not None else None
        return self.store.acquire_lease(run_id, OWNER, TTL, takeover_token=held).token

    def token(self, line: Line) -> int:
        """The line's fencing token, taken over from whoever holds it: a person answering
        an interrupt writes into a line a live graph may use (its saver takes it back)."""
        return self._token(line)

    def _put_with_riders(
        self, line: Line, record: Any, blobs: dict[str, bytes], *, board: bool
    ) -> None:
        """Put ``record`` with the writes waiting for it, in one transaction (call under
        :attr:`lock`); their callers return once it committed. ``board``: first wait a
        little for writes announced (:meth:`announce`; the wait lets go of the lock)."""
        key = (line.thread_id, line.ns)
        if board and self._announced.get(key):
            self._boarded.wait_for(lambda: not self._announced.get(key), _rides.BOARDING_WAIT)
        riders = line.seats.take()
        try:
            self._put(line, record, blobs, [e for ride in riders for e in ride.entries])
        except BaseException:
            _rides.arrive(riders, written=False)
            raise
        _rides.arrive(riders, written=True)

    def _put(
        self,
        line: Line,
        record: Any,
        blobs: dict[str, bytes],
        effects: Sequence[EffectRecord] = (),
    ) -> None:
        try:
            self.store.put_checkpoint(
                record, lease_token=self._token(line), blobs=blobs, effects=effects
            )
        except LeaseLostError:
            # Another saver (process) took the lease over: take it back, once.
            token = self._token(line, again=True)
            self.store.put_checkpoint(record, lease_token=token, blobs=blobs, effects=effects)

    def encoded(self, lg_id: str, write: Write) -> Write:
        """``write`` with its journal entry's values encoded: a value savegame refuses is
        refused here (naming its path), before any write of the task is recorded."""
        return self.encoded_all(lg_id, [write])[0]

    def encoded_all(
        self, lg_id: str, writes: Sequence[Write], seen: Mapping[str, codec.Seen] | None = None
    ) -> list[Write]:
        """:meth:`encoded` of each write, under one setting of the conventions. ``seen``:
        what an encoder knows of the channels' lists (:meth:`seen`); a list written to a
        channel then reuses it (a subgraph's node returns every message of the thread,
        most of them the line's own)."""
        if all(w.data is not None for w in writes):
            return list(writes)  # encoded by the saver already (put_writes' own call)
        seen = seen or {}
        with codec.using_conventions(self.conventions):
            return [
                w
                if w.data is not None
                else _with_data(w, _encoded(lg_id, w, self._compress_from, _seen_by(w, seen)))
                for w in writes
            ]

    def put_write(self, line: Line, lg_id: str, write: Write) -> None:
        """Journal one pending write (a rebuild copies them one by one)."""
        self.put_writes(line, lg_id, [write])

    def put_writes(
        self,
        line: Line,
        lg_id: str,
        writes: Sequence[Write],
        *,
        announced: Announced | None = None,
    ) -> None:
        """Journal one task's pending writes, durable when this returns: insert-if-absent;
        a reserved channel (index < 0) overwrites.

        One fenced write (one commit, as SqliteSaver's ``put_writes``), encoded, sealed and
        written without holding :attr:`lock`; when ``announced`` (LangGraph's own calls,
        :meth:`announce`) first offered to the line's next checkpoint's transaction
        (:mod:`._rides`)."""
        # One entry per index: LangGraph may hand a reserved channel twice in one call (a
        # node asking again writes its resume values anew), and the last one stands, as in
        # its own savers; two of one request id in one batch would settle a stale read.
        writes = list({w.index: w for w in writes}.values())
        # A reserved channel's write may replace a stored one: it goes on its own.
        if announced is not None and all(w.index >= 0 for w in writes):
            plain, sealed, seat = self._board(line, lg_id, writes, announced)
            if seat is not None and self._ride(line, seat):
                return
        else:
            if announced is not None:  # they will not board: no checkpoint waits for them
                self.landed(line.thread_id, line.ns, announced)
            plain, sealed = self._journaled(line, lg_id, writes)
        self._write(line, writes, plain, sealed)

    def _board(
        self, line: Line, lg_id: str, writes: Sequence[Write], announced: Announced
    ) -> tuple[list[EffectRecord], list[EffectRecord], Ride | None]:
        """The writes as journal entries, and their seat on the line's next checkpoint, or
        None when they may not wait: their channels, or a checkpoint newer than theirs is
        stored (LangGraph put the one after theirs first; the next is a step away). Until
        they board, a checkpoint being put waits for them (they are announced)."""
        plain, sealed = self._journaled(line, lg_id, writes)  # on failure, the caller lands
        with self.lock:
            # Landed in the same step as boarding, or a checkpoint could go between.
            self.landed(line.thread_id, line.ns, announced)
            if line.stored and line.stored[-1] != lg_id:
                return plain, sealed, None
            return plain, sealed, line.seats.board(sealed, frozenset(w.channel for w in writes))

    def announce(self, thread_id: str, ns: str) -> Announced:
        """Writes of the line are on their way (before they are encoded): a checkpoint
        put meanwhile waits for them to board. Hand the token to :meth:`landed`."""
        key = (thread_id, ns)
        with self._announcing:
            self._announced[key] = self._announced.get(key, 0) + 1
        return [True]

    def landed(self, thread_id: str, ns: str, token: Announced) -> None:
        """The announced writes boarded, or will not: once per token (later calls pass)."""
        with self.lock:
            if not token[0]:
                return
            token[0] = False
            key = (thread_id, ns)
            with self._announcing:
                left = self._announced[key] - 1
                if left:
                    self._announced[key] = left
                else:
                    del self._announced[key]
            self._boarded.notify_all()

    def _journaled(
        self, line: Line, lg_id: str, writes: Sequence[Write]
    ) -> tuple[list[EffectRecord], list[EffectRecord]]:
        """The writes as journal entries, plain and sealed."""
        plain = [
            write_record(line.run_id, lg_id, w, self.storage)
            for w in self.encoded_all(lg_id, writes)
        ]
        return plain, [codec.seal_entry(entry, self.storage) for entry in plain]

    def _ride(self, line: Line, seat: Ride) -> bool:
        """Whether the writes of ``seat`` were committed with the line's next checkpoint."""
        seat.done.wait(_rides.RIDE_WAIT)
        with self.lock:
            if not seat.taken:
                line.seats.leave(seat)
                return False
        seat.done.wait()
        return seat.written

    def _write(
        self,
        line: Line,
        writes: Sequence[Write],
        plain: list[EffectRecord],
        sealed: list[EffectRecord],
    ) -> None:
        stored = self._fenced(
            line, lambda token: self.store.record_intents(sealed, lease_token=token)
        )
        for write, entry, new, now in zip(writes, plain, sealed, stored, strict=True):
            if write.index >= 0 or now.checksum == new.checksum:
                continue
            # Re-sealed from the stored entry, which keeps its sealed arguments: sealed
            # again from plaintext they would be new ciphertext the store never gets,
            # and the new check (over them) would not hold for the row.
            codec.verify_entry(now, self.storage)
            done = codec.seal_entry(replace(now, result=entry.result), self.storage)

            def settle(token: int, done: EffectRecord = done, now: EffectRecord = now) -> Any:
                return self.store.record_result(
                    line.run_id,
                    done.request_id,
                    status=EffectStatus.DONE,
                    result=done.result,
                    checksum=done.checksum,
                    lease_token=token,
                    expect_checksum=now.checksum,
                )

            self._fenced(line, settle)

    def _fenced(self, line: Line, write: Callable[[int], _T]) -> _T:
        """``write(token)`` under the line's lease, taken back once when another saver (a
        process) moved it; the store call itself runs outside :attr:`lock`."""
        with self.lock:
            token = self._token(line)
        try:
            return write(token)
        except LeaseLostError:
            with self.lock:
                # Another thread of this saver may have taken it back meanwhile: use theirs.
                token = self._token(line, again=line.token == token)
            return write(token)

    def finish(self, line: Line) -> None:
        """Mark a rebuilt or copied line whole: from now on readers use it."""
        marker = EffectRecord(
            run_id=line.run_id,
            request_id=FINISHED,
            kind=EffectKind.READ,
            name="langgraph.finished",
            step=0,
            node="",
            call_index=0,
            status=EffectStatus.DONE,
            arguments=codec.encode_value(line.origin, FINISHED),
            result=codec.encode_value(None, FINISHED),
            metadata={"langgraph": "finished"},
            completed_at=utcnow(),
        )
        sealed = codec.seal_entry(marker, self.storage)
        self.store.record_intent(sealed, lease_token=self._token(line))

    # -- durable tools ----------------------------------------------------------------
    def wait_stored(self, thread_id: str, ns: str, lg_id: str, timeout: float = 60.0) -> Line:
        """The line once checkpoint ``lg_id`` is stored in it: with ``durability="async"``
        a task may call a tool while LangGraph still writes the checkpoint it runs from."""
        deadline = time.monotonic() + timeout
        with self._appended:
            while True:
                line = self.find(thread_id, ns)
                if line is not None and (
                    lg_id in line.stored or self.has(stored_id(lg_id, line.run_id))
                ):
                    if lg_id not in line.stored:
                        line.stored.append(lg_id)
                    return line
                left = deadline - time.monotonic()
                if left <= 0:
                    raise ConfigurationError(
                        f"thread {thread_id!r}, namespace {ns!r}: checkpoint {lg_id} was not "
                        f"stored within {timeout:g}s, so a durable tool's call has nothing to "
                        "hang on (is the graph run with a checkpointer other than this one?)"
                    )
                self._appended.wait(min(left, 0.5))

    def has(self, checkpoint_id: str) -> bool:
        try:
            self.store.get_checkpoint(checkpoint_id)
        except NotFoundError:
            return False
        return True

    def journal(self, line: Line, request_id: str, *, fresh_lease: bool = False) -> Journal:
        """A journal holding one call's entries (its own, its attempts'), written under the
        line's lease."""
        entries = self._entries(line.run_id, request_id)
        token = self._token(line, again=fresh_lease)
        return Journal(self.store, line.run_id, token, entries, storage=self.storage)

    def _entries(self, run_id: str, prefix: str) -> list[EffectRecord]:
        return self.store.list_effects(run_id, request_prefix=prefix, limit=ALL_EFFECTS)

    def copy_tool_calls(self, run_id: str, line: Line, lg_ids: set[str]) -> None:
        """Copy the durable tools' entries of checkpoints ``lg_ids`` of run ``run_id`` into
        ``line`` (a rebuilt or copied line): a node re-run from a kept checkpoint must find
        its calls, or it would make them again."""
        for entry in self._entries(run_id, TOOL_PREFIX):
            if entry.request_id.split(":")[1] not in lg_ids:
                continue
            opened = replace(codec.open_entry(entry, self.storage), run_id=line.run_id)
            sealed = codec.seal_entry(opened, self.storage)
            self.store.record_intent(sealed, lease_token=self._token(line))

    # -- reading ------------------------------------------------------------------
    def load(self, checkpoint_id: str, line: Line | None = None) -> dict[str, Any] | None:
        """The savegame state of a stored checkpoint, or None when it is not stored.
        ``line``: the line it is of, whose encoder learns the decoded lists (LangGraph
        goes on from them: ``Encoder.loaded``)."""
        try:
            record = self.store.get_checkpoint(checkpoint_id)
        except NotFoundError:
            return None
        with codec.using_conventions(self.conventions):
            state = codec.load_state(self.store, record, self.storage).state
            # Not waiting for a put of the line (durability="async"): it only speeds the
            # next one up, and the put moves the encoder past this checkpoint anyway.
            if line is not None and line.encoder is not None and self.lock.acquire(blocking=False):
                try:
                    line.encoder.loaded(checkpoint_id, state)
                finally:
                    self.lock.release()
        return state

    def writes(self, run_id: str, lg_id: str | None = None) -> dict[str, list[Write]]:
        """The run's pending writes (of one checkpoint, or all) by LangGraph checkpoint id,
        each list in LangGraph's order."""
        out: dict[str, list[Write]] = {}
        # The request id names the checkpoint: one checkpoint's writes are an index range.
        prefix = None if lg_id is None else f"{lg_id}|"
        for entry in self.store.list_effects(
            run_id, kinds=[EffectKind.READ], request_prefix=prefix, limit=ALL_EFFECTS
        ):
            if dict(entry.metadata).get("langgraph") != "write":
                continue
            opened = codec.open_entry(entry, self.storage)
            with codec.using_conventions(self.conventions):
                task_id, task_path, lg_id = codec.decode_value(opened.arguments)
                value = codec.decode_value(opened.result)
            out.setdefault(lg_id, []).append(
                Write(task_id, entry.name, value, task_path, entry.call_index)
            )
        for found in out.values():
            found.sort(key=lambda w: (w.task_path, w.task_id, w.index))
        return out


def parent_ns(ns: str) -> str:
    """The namespace of the graph that called the subgraph of ``ns`` (LangGraph's
    ``node:task`` levels joined by ``|``): ``""`` for a subgraph of the root graph."""
    return ns.rpartition(NS_SEP)[0]


def write_record(
    run_id: str, lg_id: str, write: Write, storage: StorageConfig | None
) -> EffectRecord:
    """The journal entry of one pending write, plain (the caller seals it)."""
    arguments, result = write.data or _encoded(lg_id, write, _compress_from(storage))
    return EffectRecord(
        run_id=run_id,
        request_id=f"{lg_id}|{write.task_id}|{write.index}",
        kind=EffectKind.READ,
        name=write.channel,
        step=0,
        node=write.task_path,
        call_index=write.index,
        status=EffectStatus.DONE,
        arguments=arguments,
        result=result,
        metadata=WRITE_MARK,
        completed_at=utcnow(),
    )


def _with_data(write: Write, data: tuple[bytes, bytes]) -> Write:
    # Built directly: dataclasses.replace() costs several times more (a write or two a
    # LangGraph task, every step).
    return Write(write.task_id, write.channel, write.value, write.task_path, write.index, data)


def _seen_by(
    write: Write, seen: Mapping[str, codec.Seen]
) -> codec.Seen | dict[str, codec.Seen] | None:
    """What ``seen`` knows of the lists ``write`` holds: its channel's, or, for a dict of
    channels (a subgraph's input, ``__start__``), each channel's by its key."""
    own = seen.get(CHANNEL + write.channel)
    if own is not None or type(write.value) is not dict or not seen:
        return own
    return {
        key: known
        for key, item in write.value.items()
        if type(key) is str
        and type(item) is list
        and (known := seen.get(CHANNEL + key)) is not None
    }


def _encoded(
    lg_id: str,
    write: Write,
    compress_from: int,
    seen: codec.Seen | Mapping[str, codec.Seen] | None = None,
) -> tuple[bytes, bytes]:
    """A pending write's entry arguments and result; refused with the write's path.
    ``seen``: what the line's encoder knows of the channel's list, or of a dict's lists
    by key (:func:`_seen_by`)."""
    path = f"writes[{write.task_id}][{write.index}]({write.channel})"
    identity = [write.task_id, write.task_path, lg_id]
    try:
        # Three plain strings are their own tree: written as encode_value writes them,
        # without its walk (two of a write's four microseconds of Python).
        if type(write.task_id) is str and type(write.task_path) is str and type(lg_id) is str:
            arguments = orjson.dumps(identity)
        else:
            arguments = codec.encode_value(identity, path)
    except orjson.JSONEncodeError:  # a lone surrogate: refused as encode_value refuses it
        arguments = codec.encode_value(identity, path)
    result = codec.encode_value(write.value, path, compress_from=compress_from, seen=seen)
    return arguments, result


_ABSENT = object()
_T = TypeVar("_T")
#: LangGraph metadata copied into the header, where the store filters on it
#: (``delete_for_runs``) and ``savegame history`` shows it: scalars LangGraph writes.
HEADER_KEYS = ("source", "step", "run_id")


def _header_metadata(metadata: Any) -> dict[str, Any]:
    if not isinstance(metadata, Mapping):
        return {}
    return {
        key: metadata[key]
        for key in HEADER_KEYS
        if type(metadata.get(key)) in (str, int) and not str(metadata[key]).startswith("$sg:")
    }


def _compress_from(storage: StorageConfig | None) -> int:
    """A pending write of this many bytes is stored compressed (0: never, as configured):
    a message appended to a channel is about all a step's journal holds."""
    return min(codec.storage.resolve(storage).compress_threshold, WRITE_COMPRESS_FROM)
