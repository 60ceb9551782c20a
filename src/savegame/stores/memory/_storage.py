"""The storage-engine methods of the memory store: chains, blobs, pruning, rewrite, sizes.

A base of :class:`savegame.stores.memory.MemoryStore`, split from it by concept:
these are the methods that serve the codec and retention (the protocol's
"storage engine" section), over the state :class:`MemoryState` holds, under its
one lock, so every method is one atomic step like the rest of the store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from savegame.errors import NotFoundError
from savegame.model import CheckpointRecord, EffectRecord, RunInfo
from savegame.stores import _common
from savegame.stores.base import RunSize
from savegame.stores.memory._state import MemoryState


class MemoryStorage(MemoryState):
    """Chains, blobs, pruning, rewrite and sizes over the memory store's dictionaries."""

    def get_chain(self, checkpoint_id: str) -> list[CheckpointRecord]:
        chain: list[CheckpointRecord] = []
        current: str | None = checkpoint_id
        with self._lock:
            while current is not None:
                if len(chain) > _common.MAX_CHAIN:
                    raise _common.chain_too_long(checkpoint_id)
                record = self._checkpoints.get(current)
                if record is None:
                    raise NotFoundError("checkpoint", current)
                chain.append(record)
                current = record.header.base_id
        return [_common.detached_record(r) for r in chain]

    def get_blobs(self, digests: Sequence[str]) -> dict[str, bytes]:
        with self._lock:
            return {d: self._blobs[d] for d in _common.unique(digests) if d in self._blobs}

    def missing_blobs(self, digests: Sequence[str]) -> set[str]:
        with self._lock:
            return {d for d in digests if d not in self._blobs}

    def delete_checkpoints(self, checkpoint_ids: Sequence[str]) -> int:
        deleted = 0
        with self._lock:
            for cid in _common.unique(checkpoint_ids):
                record = self._checkpoints.pop(cid, None)
                if record is None:
                    continue
                run = self._runs.get(record.run_id)
                if run is not None:
                    run.checkpoint_ids.remove(cid)
                deleted += 1
        return deleted

    def delete_runs(self, run_ids: Sequence[str]) -> int:
        with self._lock:
            doomed = [self._runs[r] for r in _common.unique(run_ids) if r in self._runs]
            for run in doomed:
                self._drop_run(run)
        return len(doomed)

    def delete_unreferenced_blobs(self) -> tuple[int, int]:
        with self._lock:
            referenced = {d for r in self._checkpoints.values() for d in r.header.blobs}
            doomed = [d for d in self._blobs if d not in referenced]
            freed = sum(len(self._blobs.pop(d)) for d in doomed)
        return len(doomed), freed

    def rewrite(
        self,
        records: Sequence[CheckpointRecord] = (),
        effects: Sequence[EffectRecord] = (),
        blobs: Mapping[str, bytes] | None = None,
        runs: Sequence[RunInfo] = (),
    ) -> None:
        new_blobs = _common.check_blobs(blobs)
        with self._lock:
            # Everything is looked up and checked before anything changes: all or nothing.
            new_records = []
            for r in records:
                current = self._checkpoint(r.checkpoint_id).header
                new = _common.rewritten_record((current.run_id, current.thread_id), r)
                missing = [
                    d for d in _common.unique(new.header.blobs)
                    if d not in self._blobs and d not in new_blobs
                ]  # fmt: skip
                if missing:
                    raise _common.missing_blob_error(r.checkpoint_id, missing)
                new_records.append(new)
            new_effects = [_common.rewritten_effect(self._effect(e), e) for e in effects]
            new_runs = []
            for run in runs:
                held = self._runs.get(run.run_id)
                if held is None:
                    raise NotFoundError("run", run.run_id)
                new_runs.append((held, _common.rewritten_run(held.info, run)))
            for held, info in new_runs:
                held.info = info
            for record in new_records:
                self._checkpoints[record.checkpoint_id] = record
            for effect in new_effects:
                self._runs[effect.run_id].effects[effect.request_id] = effect
            self._blobs.update(new_blobs)

    def run_sizes(self, *, thread_id: str | None = None, limit: int = 1000) -> list[RunSize]:
        with self._lock:
            sizes = [
                RunSize(
                    run_id=run.info.run_id,
                    thread_id=run.info.thread_id,
                    status=run.info.status,
                    checkpoints=len(run.checkpoint_ids),
                    payload_bytes=sum(
                        len(self._checkpoints[c].payload) for c in run.checkpoint_ids
                    ),
                    effects=len(run.effects),
                    effect_bytes=sum(_common.effect_bytes(e) for e in run.effects.values()),
                )
                for run in self._runs.values()
                if thread_id is None or run.info.thread_id == thread_id
            ]
        sizes.sort(key=_common.size_order)
        return sizes[: max(limit, 0)]
