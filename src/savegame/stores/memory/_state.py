"""What the memory store holds: its dictionaries, its one lock, and the lookups every method uses.

The base of :class:`savegame.stores.memory.MemoryStore` and of its storage-engine
methods (:mod:`savegame.stores.memory._storage`); both work on this state under
the one lock, so every public method is one atomic step.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from savegame.errors import NotFoundError
from savegame.model import WOKEN, CheckpointRecord, EffectRecord, Lease, RunInfo, RunStatus
from savegame.stores import _common


@dataclass(slots=True)
class Run:
    """Mutable twin of RunInfo; only ever touched under the store lock."""

    info: RunInfo
    checkpoint_ids: list[str]
    """Sorted ascending; ids are time-sortable so this is creation order."""
    lease_owner: str | None
    lease_token: int
    lease_expires_at: float | None
    effects: dict[str, EffectRecord] = field(default_factory=dict)
    """The run's journal by request id; records are detached copies, never the caller's."""
    request_ids: list[str] = field(default_factory=list)
    """The journal's request ids, sorted: ``list_effects(request_prefix=...)`` bisects it."""
    wait_topics: list[str] = field(default_factory=list)
    """While waiting: the event topics it waits for (``Waiting.topics``)."""
    wait_need: int = 0
    """While waiting: how many of them wake it (``Waiting.need``)."""

    def wake_if_ready(self) -> None:
        """Wake the run (``wake_at`` WOKEN) if it waits and enough of its events are pending."""
        if self.info.status is not RunStatus.WAITING:
            return
        pending = {e.name for e in self.effects.values() if _common.is_pending_event(e)}
        if _common.ready(self.wait_topics, self.wait_need, pending):
            self.info = replace(self.info, wake_at=WOKEN)

    def lease(self) -> Lease | None:
        if self.lease_owner is None or self.lease_expires_at is None:
            return None
        return Lease(self.info.run_id, self.lease_owner, self.lease_token, self.lease_expires_at)

    def snapshot(self) -> RunInfo:
        return replace(self.info, lease=self.lease(), metadata=dict(self.info.metadata))

    def journal(self, effect: EffectRecord) -> EffectRecord:
        """Insert-if-absent under the store lock; return what the journal holds afterwards."""
        existing = self.effects.get(effect.request_id)
        if _common.keeps(existing):
            return existing
        if existing is None:
            bisect.insort(self.request_ids, effect.request_id)
        self.effects[effect.request_id] = effect
        return effect

    def prefixed(self, bounds: tuple[str, str | None]) -> list[EffectRecord]:
        """The entries whose request ids fall in ``bounds`` (see ``_common.prefix_range``)."""
        low, high = bounds
        start = bisect.bisect_left(self.request_ids, low)
        end = len(self.request_ids) if high is None else bisect.bisect_left(self.request_ids, high)
        return [self.effects[r] for r in self.request_ids[start:end]]


class MemoryState:
    """The runs, checkpoints and blobs of one memory store, guarded by one lock."""

    def __init__(self) -> None:
        # One lock for everything: each public method is one atomic step, which
        # is what the contract asks of create_run and put_checkpoint.
        self._lock = threading.RLock()
        self._runs: dict[str, Run] = {}
        self._checkpoints: dict[str, CheckpointRecord] = {}
        self._blobs: dict[str, bytes] = {}
        """Content-addressed bytes by digest; never changed after insert except by rewrite."""

    def _run(self, run_id: str) -> Run:
        run = self._runs.get(run_id)
        if run is None:
            raise NotFoundError("run", run_id)
        return run

    def _checkpoint(self, checkpoint_id: str) -> CheckpointRecord:
        record = self._checkpoints.get(checkpoint_id)
        if record is None:
            raise NotFoundError("checkpoint", checkpoint_id)
        return record

    def _effect(self, effect: EffectRecord) -> EffectRecord:
        run = self._runs.get(effect.run_id)
        current = None if run is None else run.effects.get(effect.request_id)
        if current is None:
            raise NotFoundError("effect", f"{effect.run_id}/{effect.request_id}")
        return current

    def _check_blobs(self, record: CheckpointRecord, given: Mapping[str, bytes]) -> None:
        """Raises ConflictError when the record names a blob neither given nor stored."""
        missing = [d for d in _common.blobs_to_check(record.header, given) if d not in self._blobs]
        if missing:
            raise _common.missing_blob_error(record.checkpoint_id, missing)

    def _store_blobs(self, blobs: Mapping[str, bytes]) -> None:
        for digest, data in blobs.items():
            self._blobs.setdefault(digest, data)  # insert-if-absent: content never changes

    def _drop_run(self, run: Run) -> int:
        """Remove a run with its checkpoints and journal; return how many checkpoints went."""
        for cid in run.checkpoint_ids:
            del self._checkpoints[cid]
        del self._runs[run.info.run_id]
        return len(run.checkpoint_ids)
