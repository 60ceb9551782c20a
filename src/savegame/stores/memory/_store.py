"""The in-process store's class: the run rows, leases, the journal and events; its bases
hold the state, the storage engine's methods and schedules."""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from savegame.errors import (
    ConfigurationError,
    ConflictError,
    LeaseLostError,
    NotFoundError,
)
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
    evolver,
    utcnow,
)
from savegame.redaction import redact_url
from savegame.stores import _common
from savegame.stores.base import (
    Capabilities,
    Delivery,
    PutResult,
    RunPosition,
    StoreStats,
    ThreadInfo,
)
from savegame.stores.memory._schedules import MemorySchedules
from savegame.stores.memory._state import Run
from savegame.stores.memory._storage import MemoryStorage

_CAPABILITIES = Capabilities(
    persistent=False, multi_process=False, waits=True, schedules=True, blocking=False
)

_named: dict[str, MemoryStore] = {}
_named_lock = threading.Lock()
_copy_info = evolver(RunInfo)  # every put moves its run's row on


class MemoryStore(MemorySchedules, MemoryStorage):
    """A thread-safe store held in dictionaries; gone when the process ends.

    The state and its lookups are :class:`~savegame.stores.memory._state.MemoryState`'s;
    the storage-engine methods (chains, blobs, pruning, rewrite, sizes) are
    :class:`~savegame.stores.memory._storage.MemoryStorage`'s.

    Args:
        name: the name of a shared store (``memory://NAME``); None for a private one.
    """

    def __init__(self, name: str | None = None) -> None:
        super().__init__()
        self._name = name

    @classmethod
    def from_url(cls, url: str) -> MemoryStore:
        """Open ``memory://`` (a fresh store) or ``memory://NAME`` (shared in the process).

        Raises:
            ConfigurationError: the URL is not a ``memory://`` URL.
        """
        if not url.startswith("memory://"):
            raise ConfigurationError(f"not a memory store URL: {redact_url(url)!r}")
        name = url[len("memory://") :]
        if "/" in name or "?" in name:
            raise ConfigurationError(
                f"bad memory store URL {redact_url(url)!r}: expected memory:// or memory://NAME"
            )
        if not name:
            return cls()
        with _named_lock:
            store = _named.get(name)
            if store is None:
                store = _named[name] = cls(name)
            return store

    @property
    def url(self) -> str:
        return f"memory://{self._name or ''}"

    @property
    def capabilities(self) -> Capabilities:
        return _CAPABILITIES

    # -- runs -------------------------------------------------------------------
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
        _common.check_first(run.run_id, run.thread_id, first.run_id, first.header.thread_id)
        ttl = _common.check_ttl(ttl)
        first = _common.detached_record(first)
        new_blobs = _common.check_blobs(blobs)
        info = replace(
            run,
            status=first.header.status,
            step=first.header.step,
            head_checkpoint_id=first.checkpoint_id,
            lease=None,
            metadata=_common.detach(run.metadata, "run.metadata"),
        )
        _common.to_micros(info.created_at)  # refuse naive datetimes like the SQL stores do
        _common.to_micros(info.updated_at)
        with self._lock:
            if run.run_id in self._runs:
                raise ConflictError(f"run {run.run_id} exists already")
            if first.checkpoint_id in self._checkpoints:
                raise ConflictError(f"checkpoint {first.checkpoint_id} exists already")
            if sole:
                self._check_sole(first)
            self._check_blobs(first, new_blobs)
            now = time.time()
            expires = None if owner is None else now + ttl
            self._runs[run.run_id] = Run(info, [first.checkpoint_id], owner, 1, expires)
            self._checkpoints[first.checkpoint_id] = first
            self._store_blobs(new_blobs)
            # Unowned: a lease nobody holds, expired from the start.
            return Lease(run.run_id, owner or "", 1, now if expires is None else expires)

    def _check_sole(self, first: CheckpointRecord) -> None:
        mine = [r for r in self._runs.values() if r.info.thread_id == first.header.thread_id]
        unfinished = [r.info for r in mine if not r.info.status.finished]
        busy = max(unfinished, key=lambda info: (info.created_at, info.run_id), default=None)
        newest = max((r.checkpoint_ids[-1] for r in mine if r.checkpoint_ids), default=None)
        _common.check_sole(
            first, busy=None if busy is None else (busy.run_id, busy.status.value), newest=newest
        )

    def get_run(self, run_id: str) -> RunInfo:
        with self._lock:
            return self._run(run_id).snapshot()

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
        wanted = None if status is None else RunStatus(status).value
        with self._lock:
            rows = [
                r.snapshot()
                for r in self._runs.values()
                if _common.run_wanted(
                    r.info,
                    thread_id=thread_id,
                    status=wanted,
                    workflow=workflow,
                    search=search,
                    before=before,
                )
            ]
        rows.sort(key=lambda r: (r.created_at, r.run_id), reverse=True)
        return rows[:limit]

    def list_threads(self, *, limit: int = 100) -> list[ThreadInfo]:
        with self._lock:
            infos = [r.info for r in self._runs.values()]
        by_thread: dict[str, list[RunInfo]] = {}
        for info in infos:
            by_thread.setdefault(info.thread_id, []).append(info)
        threads = [
            ThreadInfo(
                thread_id=tid,
                runs=len(runs),
                latest_run_id=max(runs, key=lambda r: (r.created_at, r.run_id)).run_id,
                updated_at=max(_common.to_micros(r.updated_at) for r in runs) / 1e6,
            )
            for tid, runs in by_thread.items()
        ]
        threads.sort(key=lambda t: (t.updated_at, t.thread_id), reverse=True)
        return threads[:limit]

    # -- checkpoints --------------------------------------------------------------
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
        record = _common.detached_record(record)
        header = record.header
        run_id, checkpoint_id = header.run_id, header.checkpoint_id
        # Most puts carry no journal entries, blobs or events: no copies to make of them.
        journal = _common.check_effects(run_id, effects) if effects else ()
        new_blobs = _common.check_blobs(blobs) if blobs else {}
        until, topics, need = _common.check_waiting(run_id, header.status, waiting)
        others = [_common.check_event(e) for e in events] if events else ()
        with self._lock:
            run = self._run(run_id)
            if run.lease_token != lease_token:
                raise LeaseLostError(run_id, lease_token)
            if checkpoint_id in self._checkpoints:
                raise ConflictError(f"checkpoint {checkpoint_id} exists already")
            if header.blobs:  # a record naming no blob has none to look for
                self._check_blobs(record, new_blobs)
            # Every check is behind us: from here on nothing raises, so the
            # checkpoint, its blobs and its effects land together or not at all.
            if new_blobs:
                self._store_blobs(new_blobs)
            for effect in journal:
                run.journal(effect)
            self._checkpoints[checkpoint_id] = record
            bisect.insort(run.checkpoint_ids, checkpoint_id)
            run.info = _copy_info(
                run.info,
                status=header.status,
                step=header.step,
                head_checkpoint_id=checkpoint_id,
                error=error,
                updated_at=utcnow(),
                wake_at=None if until is None else _common.from_micros(until),
            )
            run.wait_topics, run.wait_need = topics, need
            run.wake_if_ready()
            for event in others:
                target = self._runs.get(event.run_id)
                if target is not None:  # a parent pruned meanwhile: nobody to tell
                    target.journal(event)
                    target.wake_if_ready()
            return PutResult(run.info.cancel_requested)

    def get_checkpoint(self, checkpoint_id: str) -> CheckpointRecord:
        with self._lock:
            record = self._checkpoints.get(checkpoint_id)
        if record is None:
            raise NotFoundError("checkpoint", checkpoint_id)
        return _common.detached_record(record)

    def latest_checkpoint(self, run_id: str) -> CheckpointRecord:
        with self._lock:
            head = self._run(run_id).info.head_checkpoint_id
            if head is None:  # unreachable: create_run always sets a head
                raise NotFoundError("checkpoint", f"head of run {run_id}")
            return self.get_checkpoint(head)

    def thread_head(self, thread_id: str) -> CheckpointRecord | None:
        with self._lock:
            ids = [
                r.checkpoint_ids[-1]
                for r in self._runs.values()
                if r.info.thread_id == thread_id and r.checkpoint_ids
            ]
            return self.get_checkpoint(max(ids)) if ids else None

    def list_checkpoints(
        self,
        run_id: str,
        *,
        limit: int | None = None,
        before: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> list[CheckpointHeader]:
        """A run's history, newest first; see :meth:`savegame.stores.base.Store.list_checkpoints`."""
        wanted = _common.check_filter(metadata)
        with self._lock:
            ids = self._run(run_id).checkpoint_ids
            end = len(ids) if before is None else bisect.bisect_left(ids, before)
            out: list[CheckpointHeader] = []
            for cid in reversed(ids[:end]):
                if limit is not None and len(out) >= limit:
                    break
                header = self._checkpoints[cid].header
                if _common.matches(header.metadata, wanted):
                    out.append(replace(header, metadata=dict(header.metadata)))
            return out

    # -- leases ---------------------------------------------------------------------
    def claim_run(
        self,
        owner: str,
        ttl: float,
        *,
        workflows: Sequence[str] | None = None,
        versions: Sequence[str] | None = None,
    ) -> Lease | None:
        ttl = _common.check_ttl(ttl)
        wanted = _common.check_workflows(workflows)
        codes = _common.check_workflows(versions, "versions")
        with self._lock:
            now = time.time()
            free = [
                run
                for run in self._runs.values()
                if (wanted is None or run.info.workflow in wanted)
                and (codes is None or run.info.version in codes)
                # Expired exactly when acquire_lease would take it over.
                and (run.lease_owner is None or (run.lease_expires_at or 0.0) <= now)
            ]
            clock = _common.from_micros(round(now * 1e6))
            woken = [
                r
                for r in free
                if r.info.status is RunStatus.WAITING
                and r.info.wake_at is not None
                and r.info.wake_at <= clock
            ]
            runnable = [r for r in free if r.info.status.value in _common.CLAIMABLE]
            if woken:
                run = min(woken, key=lambda r: (r.info.wake_at or clock, r.info.run_id))
            elif runnable:
                run = min(runnable, key=lambda r: (r.info.created_at, r.info.run_id))
            else:
                return None
            run.lease_owner = owner
            run.lease_token += 1
            run.lease_expires_at = now + ttl
            return Lease(run.info.run_id, owner, run.lease_token, run.lease_expires_at)

    def acquire_lease(
        self, run_id: str, owner: str, ttl: float, *, takeover_token: int | None = None
    ) -> Lease:
        ttl = _common.check_ttl(ttl)
        with self._lock:
            run = self._run(run_id)
            now = time.time()
            _common.check_lease_free(
                run_id, run.lease_owner, run.lease_token, run.lease_expires_at, now, takeover_token
            )
            run.lease_owner = owner
            run.lease_token += 1
            run.lease_expires_at = now + ttl
            return Lease(run_id, owner, run.lease_token, run.lease_expires_at)

    def renew_lease(self, run_id: str, token: int, ttl: float) -> Lease:
        ttl = _common.check_ttl(ttl)
        with self._lock:
            run = self._run(run_id)
            if run.lease_owner is None or run.lease_token != token:
                raise LeaseLostError(run_id, token)
            run.lease_expires_at = time.time() + ttl
            return Lease(run_id, run.lease_owner, token, run.lease_expires_at)

    def release_lease(self, run_id: str, token: int) -> None:
        with self._lock:
            run = self._run(run_id)
            if run.lease_token == token:
                # The token stays: the next acquisition must still get a larger one.
                run.lease_owner = None
                run.lease_expires_at = None

    # -- journal --------------------------------------------------------------------------
    def record_intent(self, effect: EffectRecord, *, lease_token: int) -> EffectRecord:
        return self.record_intents([effect], lease_token=lease_token)[0]

    def record_intents(
        self, effects: Sequence[EffectRecord], *, lease_token: int
    ) -> list[EffectRecord]:
        entries = _common.check_intents(effects)
        if not entries:
            return []
        with self._lock:
            run = self._run(entries[0].run_id)
            if run.lease_token != lease_token:
                raise LeaseLostError(entries[0].run_id, lease_token)
            return [_common.detached_effect(run.journal(entry)) for entry in entries]

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
        with self._lock:
            run = self._run(run_id)
            if lease_token is not None and run.lease_token != lease_token:
                raise LeaseLostError(run_id, lease_token)
            current = run.effects.get(request_id)
            if current is None:
                raise NotFoundError("effect", f"{run_id}/{request_id}")
            settled = _common.settled(
                current,
                status=status,
                result=result,
                error=error,
                metadata=metadata,
                checksum=checksum,
                expect=expect,
                expect_checksum=expect_checksum,
            )
            run.effects[request_id] = settled
            return _common.detached_effect(settled)

    def get_effect(self, run_id: str, request_id: str) -> EffectRecord:
        with self._lock:
            run = self._runs.get(run_id)
            effect = None if run is None else run.effects.get(request_id)
        if effect is None:
            raise NotFoundError("effect", f"{run_id}/{request_id}")
        return _common.detached_effect(effect)

    def list_effects(
        self,
        run_id: str | None = None,
        *,
        kinds: Sequence[EffectKind] | None = None,
        statuses: Sequence[EffectStatus] | None = None,
        request_prefix: str | None = None,
        limit: int = 10_000,
    ) -> list[EffectRecord]:
        """Journal entries oldest first; see :meth:`savegame.stores.base.Store.list_effects`."""
        wanted_kinds = None if kinds is None else {EffectKind(k) for k in kinds}
        wanted_statuses = None if statuses is None else {EffectStatus(s) for s in statuses}
        bounds = None if request_prefix is None else _common.prefix_range(request_prefix)
        with self._lock:
            if run_id is None:
                runs = list(self._runs.values())
            else:
                runs = [self._runs[run_id]] if run_id in self._runs else []
            if request_prefix is not None and bounds is None:
                runs = []
            found = [
                effect
                for run in runs
                for effect in (run.effects.values() if bounds is None else run.prefixed(bounds))
                if (wanted_kinds is None or effect.kind in wanted_kinds)
                and (wanted_statuses is None or effect.status in wanted_statuses)
            ]
        found.sort(key=_common.effect_order)
        return [_common.detached_effect(e) for e in found[: max(limit, 0)]]

    def deliver_event(self, event: EffectRecord) -> Delivery:
        event = _common.check_event(event)
        with self._lock:
            run = self._run(event.run_id)
            stored = run.journal(event)
            run.wake_if_ready()
            return Delivery(_common.detached_effect(stored), stored is event)

    def request_cancel(self, run_id: str) -> None:
        with self._lock:
            run = self._run(run_id)
            run.info = replace(run.info, cancel_requested=True)

    # -- housekeeping -------------------------------------------------------------------
    def delete_thread(self, thread_id: str) -> int:
        with self._lock:
            doomed = [r for r in self._runs.values() if r.info.thread_id == thread_id]
            return sum(self._drop_run(run) for run in doomed)

    def stats(self) -> StoreStats:
        with self._lock:
            return StoreStats(
                runs=len(self._runs),
                checkpoints=len(self._checkpoints),
                payload_bytes=sum(len(r.payload) for r in self._checkpoints.values()),
                file_bytes=None,
                blobs=len(self._blobs),
                blob_bytes=sum(len(b) for b in self._blobs.values()),
                effects=sum(len(r.effects) for r in self._runs.values()),
            )

    def close(self) -> None:
        """Nothing to release; a named store keeps its data for the next opener."""

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
