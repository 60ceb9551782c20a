"""The calls :class:`~savegame.stores.objects.ObjectStorageStore` passes to the store it wraps.

Runs, leases, the journal, histories, sizes and stats never touch a body, so
they go to the wrapped store unchanged; the wrapper's own module keeps only the
calls that move bodies to or from the bucket.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from savegame.model import (
    CheckpointHeader,
    EffectKind,
    EffectRecord,
    EffectStatus,
    Lease,
    RunInfo,
    RunStatus,
)
from savegame.stores.base import Delivery, RunPosition, RunSize, Store, StoreStats, ThreadInfo


class Delegated:
    """The Store methods that are the wrapped store's, unchanged."""

    _inner: Store

    def get_run(self, run_id: str) -> RunInfo:
        return self._inner.get_run(run_id)

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
        return self._inner.list_runs(
            thread_id=thread_id, status=status, limit=limit, workflow=workflow,
            search=search, before=before,
        )  # fmt: skip

    def list_threads(self, *, limit: int = 100) -> list[ThreadInfo]:
        return self._inner.list_threads(limit=limit)

    def list_checkpoints(
        self,
        run_id: str,
        *,
        limit: int | None = None,
        before: str | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> list[CheckpointHeader]:
        return self._inner.list_checkpoints(run_id, limit=limit, before=before, metadata=metadata)

    def deliver_event(self, event: EffectRecord) -> Delivery:
        return self._inner.deliver_event(event)

    def claim_run(
        self,
        owner: str,
        ttl: float,
        *,
        workflows: Sequence[str] | None = None,
        versions: Sequence[str] | None = None,
    ) -> Lease | None:
        return self._inner.claim_run(owner, ttl, workflows=workflows, versions=versions)

    def acquire_lease(
        self, run_id: str, owner: str, ttl: float, *, takeover_token: int | None = None
    ) -> Lease:
        return self._inner.acquire_lease(run_id, owner, ttl, takeover_token=takeover_token)

    def renew_lease(self, run_id: str, token: int, ttl: float) -> Lease:
        return self._inner.renew_lease(run_id, token, ttl)

    def release_lease(self, run_id: str, token: int) -> None:
        self._inner.release_lease(run_id, token)

    def record_intent(self, effect: EffectRecord, *, lease_token: int) -> EffectRecord:
        return self._inner.record_intent(effect, lease_token=lease_token)

    def record_intents(
        self, effects: Sequence[EffectRecord], *, lease_token: int
    ) -> list[EffectRecord]:
        return self._inner.record_intents(effects, lease_token=lease_token)

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
        return self._inner.record_result(
            run_id,
            request_id,
            status=status,
            result=result,
            error=error,
            metadata=metadata,
            checksum=checksum,
            lease_token=lease_token,
            expect=expect,
            expect_checksum=expect_checksum,
        )

    def get_effect(self, run_id: str, request_id: str) -> EffectRecord:
        return self._inner.get_effect(run_id, request_id)

    def list_effects(
        self,
        run_id: str | None = None,
        *,
        kinds: Sequence[EffectKind] | None = None,
        statuses: Sequence[EffectStatus] | None = None,
        request_prefix: str | None = None,
        limit: int = 10_000,
    ) -> list[EffectRecord]:
        return self._inner.list_effects(
            run_id, kinds=kinds, statuses=statuses, request_prefix=request_prefix, limit=limit
        )

    def request_cancel(self, run_id: str) -> None:
        self._inner.request_cancel(run_id)

    def missing_blobs(self, digests: Sequence[str]) -> set[str]:
        return self._inner.missing_blobs(digests)

    def run_sizes(self, *, thread_id: str | None = None, limit: int = 1000) -> list[RunSize]:
        return self._inner.run_sizes(thread_id=thread_id, limit=limit)

    def stats(self) -> StoreStats:
        return self._inner.stats()
