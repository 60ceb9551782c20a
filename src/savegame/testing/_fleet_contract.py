"""The store contract for a worker fleet: unowned runs, ``claim_run``, and blob references.

Part of :class:`savegame.testing.contract.StoreContract`; subclass that, not this.
What it pins is what ``savegame worker`` relies on: a submitted run waits
unowned until a claimer takes it, the oldest runnable run goes first, two
claimers (threads, or processes through two handles) never get the same run,
a run whose worker died becomes claimable again, and a record never commits
pointing at a blob the store does not hold.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from savegame.errors import ConflictError, LeaseLostError, NotFoundError
from savegame.ids import new_id
from savegame.model import (
    VERSION_KEY,
    CheckpointRecord,
    EffectStatus,
    Lease,
    RunInfo,
    RunStatus,
    utcnow,
)
from savegame.stores.base import Store
from savegame.testing._contract_base import TTL, ContractBase
from savegame.testing.builders import (
    OTHER_OWNER,
    OWNER,
    blob_digest,
    make_effect,
    make_run,
    next_record,
)

__all__ = ["FleetContract"]

X_DATA, Y_DATA = b"\x00blob x \xff" * 8, b"blob y"
X, Y = blob_digest(X_DATA), blob_digest(Y_DATA)
CLAIMERS = 8
"""Threads racing in the concurrency tests."""


class FleetContract(ContractBase):
    """create_run(owner=None), claim_run, and put_checkpoint/create_run's blob-reference rule."""

    def submit(
        self,
        store: Store,
        *,
        workflow: str = "contract",
        status: RunStatus = RunStatus.QUEUED,
        created_at: datetime | None = None,
        run_id: str | None = None,
        digests: Sequence[str] = (),
        blobs: Mapping[str, bytes] | None = None,
        version: str | None = None,
    ) -> tuple[RunInfo, CheckpointRecord, Lease]:
        """Create a run unowned (as ``submit`` does for a fleet), its first record of ``status``
        (``version``: the code version it started under, in its metadata)."""
        meta = {} if version is None else {VERSION_KEY: version}
        run, first = make_run(workflow=workflow, run_id=run_id, metadata=meta)
        first = replace(first, header=replace(first.header, status=status, blobs=tuple(digests)))
        if created_at is not None:
            run = replace(run, created_at=created_at, updated_at=created_at)
        lease = store.create_run(run, first, owner=None, ttl=TTL, blobs=blobs)
        return run, first, lease

    # -- unowned runs -----------------------------------------------------------------
    def test_create_run_unowned_leaves_no_lease_and_token_one(self, store: Store) -> None:
        run, first, lease = self.submit(store)
        assert (lease.run_id, lease.owner, lease.token) == (run.run_id, "", 1)
        got = store.get_run(run.run_id)
        assert (got.lease, got.cancel_requested) == (None, False)
        assert (got.status, got.head_checkpoint_id) == (RunStatus.QUEUED, first.checkpoint_id)
        assert [r.run_id for r in store.list_runs(status=RunStatus.QUEUED)] == [run.run_id]
        assert store.latest_checkpoint(run.run_id) == first
        # Nobody holds it, so an acquirer takes it at once, with a larger token.
        taken = store.acquire_lease(run.run_id, OTHER_OWNER, TTL)
        assert (taken.owner, taken.token) == (OTHER_OWNER, 2)

    # -- claim_run ----------------------------------------------------------------------
    def test_claim_on_an_empty_store_is_none(self, store: Store) -> None:
        assert store.claim_run(OWNER, TTL) is None
        assert store.claim_run(OWNER, TTL, workflows=["contract"]) is None
        with pytest.raises(ValueError):
            store.claim_run(OWNER, -1.0)

    def test_submitted_runs_are_claimed_oldest_first(self, store: Store) -> None:
        base = utcnow() - timedelta(hours=1)
        # Submitted out of order: created_at decides, then the run id breaks a tie.
        late, _, _ = self.submit(store, created_at=base + timedelta(seconds=2))
        tie_b, _, _ = self.submit(store, created_at=base, run_id="tie-b-" + new_id())
        early, _, _ = self.submit(store, created_at=base - timedelta(microseconds=1))
        tie_a, _, _ = self.submit(store, created_at=base, run_id="tie-a-" + new_id())
        claimed: list[Lease] = []
        for _ in range(4):
            lease = store.claim_run(OWNER, TTL)
            assert lease is not None
            assert (lease.owner, lease.token) == (OWNER, 2)
            assert lease.expires_at > time.time() + TTL / 2
            assert store.get_run(lease.run_id).lease == lease
            claimed.append(lease)
        assert [c.run_id for c in claimed] == [r.run_id for r in (early, tie_a, tie_b, late)]
        assert store.claim_run(OTHER_OWNER, TTL) is None

    def test_a_claimed_run_is_not_claimed_again_while_its_lease_lives(self, store: Store) -> None:
        self.start(store)  # created owned, with a live lease: not runnable
        run, first, _ = self.submit(store)
        lease = store.claim_run(OWNER, TTL)
        assert lease is not None and lease.run_id == run.run_id
        assert store.claim_run(OTHER_OWNER, TTL) is None
        # The claim fences like any lease: the owner writes, the run stays claimed.
        second = next_record(first)
        store.put_checkpoint(second, lease_token=lease.token)
        renewed = store.renew_lease(run.run_id, lease.token, TTL)
        assert renewed.token == lease.token
        assert store.claim_run(OTHER_OWNER, TTL) is None
        assert store.get_run(run.run_id).status is RunStatus.RUNNING

    def test_an_expired_or_released_lease_makes_the_run_claimable_again(self, store: Store) -> None:
        run, first, _ = self.submit(store)
        dead = store.claim_run(OWNER, 0.0)  # a worker that dies at once
        assert dead is not None and dead.token == 2
        time.sleep(0.02)
        again = store.claim_run(OTHER_OWNER, TTL)
        assert again is not None and (again.run_id, again.token) == (run.run_id, 3)
        with pytest.raises(LeaseLostError):
            store.put_checkpoint(next_record(first), lease_token=dead.token)
        assert store.claim_run(OWNER, TTL) is None
        store.release_lease(run.run_id, again.token)  # a worker that stops cleanly
        third = store.claim_run(OWNER, TTL)
        assert third is not None and (third.run_id, third.token) == (run.run_id, 4)
        # A run its creator owned, whose lease lapsed, is runnable too: that worker died.
        owned, _, _ = self.start(store, ttl=0.0)
        time.sleep(0.02)
        taken = store.claim_run(OTHER_OWNER, TTL)
        assert taken is not None and (taken.run_id, taken.token) == (owned.run_id, 2)

    def test_runs_not_queued_or_running_are_never_claimed(self, store: Store) -> None:
        for status in RunStatus:
            if status not in (RunStatus.QUEUED, RunStatus.RUNNING):
                self.submit(store, status=status)
        assert store.claim_run(OWNER, TTL) is None
        # Status moves keep the claim in step: running -> interrupted -> running.
        run, first, _ = self.submit(store)
        lease = store.claim_run(OWNER, TTL)
        assert lease is not None
        paused = next_record(first, status=RunStatus.INTERRUPTED)
        store.put_checkpoint(paused, lease_token=lease.token)
        store.release_lease(run.run_id, lease.token)
        assert store.claim_run(OWNER, TTL) is None
        resumed = store.acquire_lease(run.run_id, OWNER, 0.0)
        store.put_checkpoint(next_record(paused), lease_token=resumed.token)
        time.sleep(0.02)
        retaken = store.claim_run(OTHER_OWNER, TTL)
        assert retaken is not None and (retaken.run_id, retaken.token) == (run.run_id, 4)
        done = next_record(store.latest_checkpoint(run.run_id), status=RunStatus.COMPLETED)
        store.put_checkpoint(done, lease_token=retaken.token)
        store.release_lease(run.run_id, retaken.token)
        assert store.claim_run(OWNER, TTL) is None

    def test_claim_only_takes_runs_of_the_named_workflows(self, store: Store) -> None:
        base = utcnow()
        beta, _, _ = self.submit(store, workflow="beta", created_at=base)
        alpha, _, _ = self.submit(store, workflow="alpha", created_at=base + timedelta(seconds=1))
        assert store.claim_run(OWNER, TTL, workflows=["gamma"]) is None
        assert store.claim_run(OWNER, TTL, workflows=[]) is None
        got = store.claim_run(OWNER, TTL, workflows=("gamma", "alpha"))
        assert got is not None and got.run_id == alpha.run_id
        assert store.claim_run(OWNER, TTL, workflows=["alpha"]) is None
        got = store.claim_run(OWNER, TTL)
        assert got is not None and got.run_id == beta.run_id

    def test_claim_only_takes_runs_of_the_named_versions(self, store: Store) -> None:
        base = utcnow()
        unversioned, _, _ = self.submit(store, created_at=base - timedelta(seconds=1))
        v1, _, _ = self.submit(store, version="v1", created_at=base)
        v2, _, _ = self.submit(store, version="2024-12-01", created_at=base + timedelta(seconds=1))
        assert store.get_run(v2.run_id).version == "2024-12-01"
        assert store.get_run(unversioned.run_id).version is None
        assert store.claim_run(OWNER, TTL, versions=["v3"]) is None
        assert store.claim_run(OWNER, TTL, versions=[]) is None
        # Both filters at once: a run must pass each.
        assert store.claim_run(OWNER, TTL, workflows=["other"], versions=["v1"]) is None
        got = store.claim_run(OWNER, TTL, versions=["2024-12-01"])
        assert got is not None and got.run_id == v2.run_id
        got = store.claim_run(OWNER, TTL, workflows=["contract"], versions=("v3", "v1"))
        assert got is not None and got.run_id == v1.run_id
        # A run without a version is no version's: only a claim without the filter takes it.
        assert store.claim_run(OWNER, TTL, versions=["v1", "2024-12-01"]) is None
        got = store.claim_run(OWNER, TTL)
        assert got is not None and got.run_id == unversioned.run_id
        with pytest.raises(ValueError, match="versions"):
            store.claim_run(OWNER, TTL, versions="v1")

    def test_a_versioned_run_lapsed_by_its_worker_goes_to_a_worker_of_its_version(
        self, store: Store
    ) -> None:
        run, _, _ = self.submit(store, version="v1")
        dead = store.claim_run(OWNER, 0.0, versions=["v1"])  # a v1 worker that dies at once
        assert dead is not None and dead.run_id == run.run_id
        time.sleep(0.02)
        assert store.claim_run(OTHER_OWNER, TTL, versions=["v2"]) is None
        again = store.claim_run(OTHER_OWNER, TTL, versions=["v2", "v1"])
        assert again is not None and (again.run_id, again.token) == (run.run_id, 3)

    def _race(self, stores: Sequence[Store], runs: int) -> None:
        """``CLAIMERS`` threads over ``stores`` claim until none is left; each run goes once."""
        submitted = {self.submit(stores[0])[0].run_id for _ in range(runs)}
        barrier = threading.Barrier(CLAIMERS)
        taken: list[Lease] = []
        errors: list[BaseException] = []

        def claimer(i: int) -> None:
            store = stores[i % len(stores)]
            try:
                barrier.wait()
                while (lease := store.claim_run(f"host:{i}:1", TTL)) is not None:
                    taken.append(lease)
            except BaseException as exc:  # reported below, not lost in the thread
                errors.append(exc)

        threads = [threading.Thread(target=claimer, args=(i,)) for i in range(CLAIMERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert errors == []
        assert sorted(lease.run_id for lease in taken) == sorted(submitted)
        assert {lease.token for lease in taken} == {2}
        for lease in taken:
            assert stores[0].get_run(lease.run_id).lease == lease

    def test_concurrent_claimers_never_take_one_run_twice(self, store: Store) -> None:
        self._race([store], 3 * CLAIMERS)

    def test_claimers_on_two_handles_never_take_one_run_twice(self, store: Store) -> None:
        if not store.capabilities.multi_process:
            pytest.skip(f"{type(store).__name__} does not claim multi_process")
        with self._second_handle(store) as other:
            self._race([store, other], 3 * CLAIMERS)

    # -- blob references ------------------------------------------------------------------
    def test_create_run_stores_the_blobs_it_brings(self, store: Store) -> None:
        run, first, _ = self.submit(store, digests=(X,), blobs={X: X_DATA, Y: Y_DATA})
        assert store.get_blobs([X, Y]) == {X: X_DATA, Y: Y_DATA}
        assert store.get_checkpoint(first.checkpoint_id).header.blobs == (X,)
        assert store.delete_unreferenced_blobs() == (1, len(Y_DATA))  # only X is referred to
        owned, owned_first = make_run()
        owned_first = replace(owned_first, header=replace(owned_first.header, blobs=(Y,)))
        store.create_run(owned, owned_first, owner=OWNER, ttl=TTL, blobs={Y: Y_DATA})
        assert store.get_blobs([X, Y]) == {X: X_DATA, Y: Y_DATA}
        assert store.get_run(run.run_id).lease is None

    def test_put_naming_an_unknown_blob_conflicts_and_writes_nothing(self, store: Store) -> None:
        run, first, lease = self.start(store)
        bad = next_record(first, status=RunStatus.INTERRUPTED, blobs=(X, Y))
        effect = make_effect(run.run_id, "read", status=EffectStatus.DONE, result=b"r")
        with pytest.raises(ConflictError) as info:
            store.put_checkpoint(
                bad, lease_token=lease.token, error="boom", effects=[effect], blobs={X: X_DATA}
            )
        assert Y in str(info.value) and X not in str(info.value)
        with pytest.raises(NotFoundError):
            store.get_checkpoint(bad.checkpoint_id)
        got = store.get_run(run.run_id)
        assert (got.head_checkpoint_id, got.status, got.step, got.error) == (
            first.checkpoint_id,
            RunStatus.RUNNING,
            0,
            None,
        )
        assert store.list_checkpoints(run.run_id) == [first.header]
        assert store.list_effects(run.run_id) == []
        assert store.missing_blobs([X, Y]) == {X, Y}
        assert (store.stats().checkpoints, store.stats().blobs) == (1, 0)
        store.put_checkpoint(bad, lease_token=lease.token, blobs={X: X_DATA, Y: Y_DATA})
        assert store.latest_checkpoint(run.run_id) == bad

    def test_create_run_naming_an_unknown_blob_conflicts_and_writes_nothing(
        self, store: Store
    ) -> None:
        run, first = make_run()
        first = replace(first, header=replace(first.header, blobs=(Y, X)))
        for owner in (OWNER, None):
            with pytest.raises(ConflictError) as info:
                store.create_run(run, first, owner=owner, ttl=TTL, blobs={Y: Y_DATA})
            assert X in str(info.value) and Y not in str(info.value)
        with pytest.raises(NotFoundError):
            store.get_run(run.run_id)
        with pytest.raises(NotFoundError):
            store.get_checkpoint(first.checkpoint_id)
        assert store.list_runs() == []
        assert store.missing_blobs([X, Y]) == {X, Y}
        assert (store.stats().runs, store.stats().checkpoints, store.stats().blobs) == (0, 0, 0)
        assert store.claim_run(OWNER, TTL) is None

    def test_a_blob_stored_earlier_may_be_named_without_its_bytes(self, store: Store) -> None:
        run, first, lease = self.start(store)
        c1 = next_record(first, blobs=(X,))
        store.put_checkpoint(c1, lease_token=lease.token, blobs={X: X_DATA})
        c2 = next_record(c1, blobs=(X, X))
        store.put_checkpoint(c2, lease_token=lease.token)
        fork, fork_first = make_run(run.thread_id)
        fork_first = replace(fork_first, header=replace(fork_first.header, blobs=(X,)))
        store.create_run(fork, fork_first, owner=None, ttl=TTL)
        assert store.get_checkpoint(fork_first.checkpoint_id).header.blobs == (X,)
        # Once collected, a blob must be sent again: the store checks, not the caller's memory.
        store.delete_runs([run.run_id, fork.run_id])
        assert store.delete_unreferenced_blobs() == (1, len(X_DATA))
        again, again_first = make_run()
        again_first = replace(again_first, header=replace(again_first.header, blobs=(X,)))
        with pytest.raises(ConflictError):
            store.create_run(again, again_first, owner=OWNER, ttl=TTL)
        store.create_run(again, again_first, owner=OWNER, ttl=TTL, blobs={X: X_DATA})
        assert store.get_blobs([X]) == {X: X_DATA}
