"""The storage-engine methods of the Redis store: chains, blobs, pruning, rewrite, sizes, stats.

A base of :class:`savegame.stores.redis.RedisStore`, split from it by concept:
the methods that serve the codec and retention (the protocol's "storage
engine" section). Those that name many ids run a script per :data:`BATCH`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import orjson

from savegame.errors import NotFoundError
from savegame.model import CheckpointRecord, EffectRecord, RunInfo, RunStatus
from savegame.stores import _common
from savegame.stores.base import RunSize, StoreStats
from savegame.stores.redis import _rows as rows
from savegame.stores.redis._client import BATCH, RedisClient


class RedisStorage(RedisClient):
    """Chains, blobs, pruning, rewrite, sizes and stats over the store's keys."""

    def get_chain(self, checkpoint_id: str) -> list[CheckpointRecord]:
        reply = self._call("get_chain", checkpoint_id, _common.MAX_CHAIN)
        if reply[0] == b"missing" or len(reply) == 1:  # 1: an empty id names nothing
            raise NotFoundError("checkpoint", reply[1].decode() if len(reply) > 1 else "")
        if reply[0] == b"cycle":
            raise _common.chain_too_long(checkpoint_id)
        values = reply[1:]
        return [rows.record(*values[i : i + 4]) for i in range(0, len(values), 4)]

    def get_blobs(self, digests: Sequence[str]) -> dict[str, bytes]:
        unique = _common.unique(digests)
        found = self._pipeline(unique, "get", "blob")
        return {d: data for d, data in zip(unique, found, strict=True) if data is not None}

    def missing_blobs(self, digests: Sequence[str]) -> set[str]:
        unique = _common.unique(digests)
        return {
            d
            for d, n in zip(unique, self._pipeline(unique, "exists", "blob"), strict=True)
            if not n
        }

    def delete_checkpoints(self, checkpoint_ids: Sequence[str]) -> int:
        return sum(self._batched("delete_checkpoints", checkpoint_ids))

    def delete_runs(self, run_ids: Sequence[str]) -> int:
        return sum(self._batched("delete_runs", run_ids))

    def delete_unreferenced_blobs(self) -> tuple[int, int]:
        # SSCAN returns every member present for the whole scan, deletions aside;
        # the script re-checks each digest's references atomically.
        digests = (d.decode() for d in self._client.sscan_iter(self._p + "blobs", count=BATCH))
        blobs = freed = 0
        for n, size in self._batched("delete_unreferenced_blobs", digests):
            blobs, freed = blobs + n, freed + size
        return blobs, freed

    def rewrite(
        self,
        records: Sequence[CheckpointRecord] = (),
        effects: Sequence[EffectRecord] = (),
        blobs: Mapping[str, bytes] | None = None,
        runs: Sequence[RunInfo] = (),
    ) -> None:
        """Replace records, journal entries, blobs and run rows in one script, or nothing.

        Raises:
            NotFoundError: a checkpoint, journal entry or run named is not stored.
            MissingBlobsError: a rewritten record names a blob neither given nor stored.
        """
        blob_args = [x for item in _common.check_blobs(blobs).items() for x in item]
        run_args: list[bytes | str] = []
        for run in runs:
            meta = _common.json_dumps(dict(run.metadata), "run.metadata")
            has_error = "0" if run.error is None else "1"
            run_args += [run.run_id, meta, has_error, run.error or "", run.checksum]
        while True:
            rec_args: list[bytes | str | int] = []
            pipe = self._client.pipeline(transaction=False)
            for r in records:
                pipe.hget(self._key("cp", r.checkpoint_id), "h")
            for r, head in zip(records, pipe.execute(), strict=True):
                if head is None:
                    raise NotFoundError("checkpoint", r.checkpoint_id)
                data = orjson.loads(head)
                new = _common.rewritten_record((data["run_id"], data["thread_id"]), r)
                cid, _, _, new_head, payload, checksum, size, base, digests = rows.checkpoint_args(
                    new
                )
                rec_args += [cid, payload, checksum, size, head, new_head, base, digests]
            fx_args: list[bytes | str] = []
            pipe = self._client.pipeline(transaction=False)
            for e in effects:
                pipe.hget(self._key("fx", e.run_id), e.request_id)
            for e, current in zip(effects, pipe.execute(), strict=True):
                if current is None:
                    raise NotFoundError("effect", f"{e.run_id}/{e.request_id}")
                stored = rows.effect(e.run_id, e.request_id, current)
                new_entry = rows.entry(_common.rewritten_effect(stored, e))
                fx_args += [e.run_id, e.request_id, current, new_entry]
            reply = self._call(
                "rewrite", len(records), *rec_args, len(effects), *fx_args,
                len(blob_args) // 2, *blob_args, len(runs), *run_args,
            )  # fmt: skip
            if reply[0] == b"missing":
                raise NotFoundError(reply[1].decode(), reply[2].decode())
            if reply[0] == b"missing_blob":
                raise _common.missing_blob_error(reply[1].decode(), [reply[2].decode()])
            if reply[0] == b"ok":
                return
            # "retry": a journal entry changed since it was read; read it again.

    def _sizes(self, run_ids: Sequence[str]) -> list[RunSize]:
        out: list[RunSize] = []
        for reply in self._batched("run_sizes", run_ids):
            for i in range(0, len(reply), 7):
                run_id, thread, status, n, payload, fx, fx_bytes = reply[i : i + 7]
                status = RunStatus(status.decode())
                out.append(
                    RunSize(run_id.decode(), thread.decode(), status, n, payload, fx, fx_bytes)
                )
        return out

    def run_sizes(self, *, thread_id: str | None = None, limit: int = 1000) -> list[RunSize]:
        index = self._p + "runs" if thread_id is None else self._key("truns", thread_id)
        sizes = self._sizes(self._ids(index))
        sizes.sort(key=_common.size_order)
        return sizes[: max(limit, 0)]

    def delete_thread(self, thread_id: str) -> int:
        return int(self._call("delete_thread", thread_id))

    def stats(self) -> StoreStats:
        sizes = self._sizes(self._ids(self._p + "runs"))
        digests = [d.decode() for d in self._client.sscan_iter(self._p + "blobs", count=BATCH)]
        blob_sizes = self._pipeline(digests, "strlen", "blob")
        return StoreStats(
            runs=len(sizes),
            checkpoints=sum(s.checkpoints for s in sizes),
            payload_bytes=sum(s.payload_bytes for s in sizes),
            file_bytes=None,
            blobs=len(digests),
            blob_bytes=sum(blob_sizes),
            effects=sum(s.effects for s in sizes),
        )

    def delete_all(self) -> int:
        """Delete every key under this store's prefix (tests, teardown); return how many went."""
        deleted = 0
        batch: list[bytes] = []
        for key in self._client.scan_iter(match=self._p + "*", count=BATCH):
            batch.append(key)
            if len(batch) == BATCH:
                deleted += int(self._client.unlink(*batch))
                batch = []
        if batch:
            deleted += int(self._client.unlink(*batch))
        return deleted
