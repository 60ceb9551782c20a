"""The store contract for group commit: ``BatchStore.put_checkpoints``.

Part of :class:`savegame.testing.contract.StoreContract`; subclass that, not this.
Tests skip on a store without ``Capabilities.group_commit``. Several runs'
checkpoints go in one transaction; each is checked as ``put_checkpoint`` checks it,
and one refused leaves nothing of itself while the others are written.
"""

from __future__ import annotations

from typing import cast

import pytest

from savegame.errors import ConflictError, LeaseLostError, MissingBlobsError, NotFoundError
from savegame.model import CheckpointRecord, Lease, RunInfo, RunStatus
from savegame.stores.base import BatchStore, Put, PutResult, Store
from savegame.testing._contract_base import ContractBase
from savegame.testing.builders import OTHER_OWNER, make_effect, next_record

__all__ = ["BatchContract"]


class BatchContract(ContractBase):
    """put_checkpoints: many runs' checkpoints, one transaction, refusals one by one."""

    def batching(self, store: Store) -> BatchStore:
        if not store.capabilities.group_commit:
            pytest.skip(f"{type(store).__name__} does not claim group_commit")
        assert isinstance(store, BatchStore)
        return store

    def runs(self, store: Store, n: int) -> list[tuple[RunInfo, CheckpointRecord, Lease]]:
        return [self.start(store) for _ in range(n)]

    def test_a_batch_writes_every_run_s_checkpoint(self, store: Store) -> None:
        batch = self.batching(store)
        started = self.runs(store, 5)
        nexts = [next_record(first) for _, first, _ in started]
        got = batch.put_checkpoints(
            [Put(rec, lease.token) for rec, (_, _, lease) in zip(nexts, started, strict=True)]
        )
        assert [type(x) for x in got] == [PutResult] * 5
        for rec, (run, _, _) in zip(nexts, started, strict=True):
            assert store.get_run(run.run_id).head_checkpoint_id == rec.checkpoint_id
            assert store.get_checkpoint(rec.checkpoint_id) == rec

    def test_journal_entries_and_blobs_land_with_their_checkpoint(self, store: Store) -> None:
        batch = self.batching(store)
        (run, first, lease), (_other, other_first, other_lease) = self.runs(store, 2)
        effect = make_effect(run.run_id, "req-1")
        rec = next_record(first)
        got = batch.put_checkpoints(
            [
                Put(rec, lease.token, effects=[effect]),
                Put(next_record(other_first), other_lease.token),
            ]
        )
        assert all(isinstance(x, PutResult) for x in got)
        assert store.get_effect(run.run_id, "req-1") == effect

    def test_a_stale_lease_fails_its_put_alone(self, store: Store) -> None:
        batch = self.batching(store)
        (run, first, lease), (ok, ok_first, ok_lease) = self.runs(store, 2)
        store.acquire_lease(run.run_id, OTHER_OWNER, 30.0, takeover_token=lease.token)
        stale, fine = next_record(first), next_record(ok_first)
        got = batch.put_checkpoints([Put(stale, lease.token), Put(fine, ok_lease.token)])
        assert isinstance(got[0], LeaseLostError)
        assert isinstance(got[1], PutResult)
        assert store.get_run(run.run_id).head_checkpoint_id == first.checkpoint_id
        with pytest.raises(NotFoundError):
            store.get_checkpoint(stale.checkpoint_id)
        assert store.get_run(ok.run_id).head_checkpoint_id == fine.checkpoint_id

    def test_a_refused_put_leaves_none_of_its_parts(self, store: Store) -> None:
        # The head moved and the entry was journaled before the checkpoint's insert
        # was refused (its id taken): the savepoint takes all of it back.
        batch = self.batching(store)
        (run, first, lease), (_ok, ok_first, ok_lease) = self.runs(store, 2)
        taken = next_record(first)
        store.put_checkpoint(taken, lease_token=lease.token)
        again = next_record(taken, checkpoint_id=taken.checkpoint_id)
        effect = make_effect(run.run_id, "req-2")
        fine = next_record(ok_first)
        got = batch.put_checkpoints(
            [Put(again, lease.token, effects=[effect]), Put(fine, ok_lease.token)]
        )
        assert isinstance(got[0], ConflictError)
        assert isinstance(got[1], PutResult)
        assert store.get_run(run.run_id).head_checkpoint_id == taken.checkpoint_id
        assert store.get_run(run.run_id).step == taken.header.step
        with pytest.raises(NotFoundError):
            store.get_effect(run.run_id, "req-2")

    def test_a_missing_blob_and_bad_arguments_fail_their_put_alone(self, store: Store) -> None:
        batch = self.batching(store)
        (run, first, lease), (ok, ok_first, ok_lease), (bad, bad_first, bad_lease) = self.runs(
            store, 3
        )
        missing = next_record(first, blobs=("0" * 64,))
        fine = next_record(ok_first)
        # An entry of another run given with this run's checkpoint: put_checkpoint's ValueError.
        wrong = make_effect(run.run_id, "req-3")
        got = batch.put_checkpoints(
            [
                Put(missing, lease.token),
                Put(fine, ok_lease.token),
                Put(next_record(bad_first), bad_lease.token, effects=[wrong]),
            ]
        )
        assert isinstance(got[0], (MissingBlobsError, ConflictError))
        assert isinstance(got[1], PutResult)
        assert isinstance(got[2], ValueError)
        assert store.get_run(ok.run_id).head_checkpoint_id == fine.checkpoint_id
        assert store.get_run(bad.run_id).head_checkpoint_id == bad_first.checkpoint_id

    def test_a_batch_reports_each_run_s_cancel_flag(self, store: Store) -> None:
        batch = self.batching(store)
        (run, first, lease), (_other, other_first, other_lease) = self.runs(store, 2)
        store.request_cancel(run.run_id)
        got = batch.put_checkpoints(
            [Put(next_record(first), lease.token), Put(next_record(other_first), other_lease.token)]
        )
        assert [cast(PutResult, x).cancel_requested for x in got] == [True, False]

    def test_two_puts_of_one_run_in_a_batch_go_in_order(self, store: Store) -> None:
        batch = self.batching(store)
        ((run, first, lease),) = self.runs(store, 1)
        one = next_record(first)
        two = next_record(one, status=RunStatus.COMPLETED)
        got = batch.put_checkpoints([Put(one, lease.token), Put(two, lease.token)])
        assert all(isinstance(x, PutResult) for x in got)
        info = store.get_run(run.run_id)
        assert (info.head_checkpoint_id, info.status) == (two.checkpoint_id, RunStatus.COMPLETED)

    def test_an_empty_batch_writes_nothing(self, store: Store) -> None:
        assert self.batching(store).put_checkpoints([]) == []
