"""The store contract for one thread's runs: ``create_run(sole=True)``.

Part of :class:`savegame.testing.contract.StoreContract`; subclass that, not this.
A new run on a thread starts from the thread's newest checkpoint, and by default it is
refused while another run of the thread is unfinished (it could repeat that run's
effects). Looked at before the insert, two starts at the same moment could both pass;
``sole`` makes the store decide inside the insert's own transaction, so exactly one of
them gets its run.
"""

from __future__ import annotations

from functools import partial

import pytest

from savegame.errors import ConflictError, NotFoundError, ThreadBusyError
from savegame.model import CheckpointRecord, Lease, RunInfo, RunStatus
from savegame.stores.base import Store
from savegame.testing._contract_base import TTL, ContractBase
from savegame.testing.builders import OWNER, make_run, next_record
from savegame.testing.together import together

__all__ = ["ThreadsContract"]


class ThreadsContract(ContractBase):
    """create_run(sole=True): the thread's only unfinished run, from its newest checkpoint."""

    def finish(self, store: Store, first: CheckpointRecord, lease: Lease) -> CheckpointRecord:
        """Complete the run ``first`` started: its last checkpoint."""
        last = next_record(first, status=RunStatus.COMPLETED)
        store.put_checkpoint(last, lease_token=lease.token)
        return last

    def refused_nothing_written(self, store: Store, run: RunInfo, first: CheckpointRecord) -> None:
        with pytest.raises(NotFoundError):
            store.get_run(run.run_id)
        with pytest.raises(NotFoundError):
            store.get_checkpoint(first.checkpoint_id)

    def test_a_sole_run_on_a_new_thread_is_created(self, store: Store) -> None:
        run, first = make_run()
        lease = store.create_run(run, first, owner=OWNER, ttl=TTL, sole=True)
        assert store.get_run(run.run_id).lease == lease

    def test_a_sole_run_beside_an_unfinished_one_is_refused_naming_it(self, store: Store) -> None:
        busy, busy_first, _ = self.start(store)
        run, first = make_run(busy.thread_id, parent_id=busy_first.checkpoint_id)
        with pytest.raises(ThreadBusyError) as refused:
            store.create_run(run, first, owner=OWNER, ttl=TTL, sole=True)
        assert (refused.value.thread_id, refused.value.run_id) == (busy.thread_id, busy.run_id)
        assert refused.value.status == "running"
        self.refused_nothing_written(store, run, first)
        # Not asked to be sole (on_thread_busy="allow"), the same run is created.
        store.create_run(run, first, owner=OWNER, ttl=TTL)
        assert store.get_run(run.run_id).status is RunStatus.RUNNING

    def test_a_failed_run_keeps_its_thread_busy(self, store: Store) -> None:
        busy, busy_first, lease = self.start(store)
        failed = next_record(busy_first, status=RunStatus.FAILED)
        store.put_checkpoint(failed, lease_token=lease.token, error="boom")
        run, first = make_run(busy.thread_id, parent_id=failed.checkpoint_id)
        with pytest.raises(ThreadBusyError, match=busy.run_id):
            store.create_run(run, first, owner=OWNER, ttl=TTL, sole=True)

    def test_after_the_other_finished_a_sole_run_starts_from_the_newest(self, store: Store) -> None:
        done, done_first, lease = self.start(store)
        last = self.finish(store, done_first, lease)
        run, first = make_run(done.thread_id, parent_id=last.checkpoint_id)
        store.create_run(run, first, owner=OWNER, ttl=TTL, sole=True)
        assert store.thread_head(done.thread_id) == first

    def test_a_sole_run_from_a_checkpoint_no_longer_the_newest_conflicts(
        self, store: Store
    ) -> None:
        # Read the thread, then another run started and finished on it: the state this
        # run was set up from is stale, and the store says so instead of a ThreadBusyError.
        done, done_first, lease = self.start(store)
        last = self.finish(store, done_first, lease)
        run, first = make_run(done.thread_id, parent_id=done_first.checkpoint_id)
        with pytest.raises(ConflictError, match=last.checkpoint_id) as refused:
            store.create_run(run, first, owner=OWNER, ttl=TTL, sole=True)
        assert not isinstance(refused.value, ThreadBusyError)
        self.refused_nothing_written(store, run, first)

    def test_a_sole_run_whose_id_is_taken_conflicts_as_a_taken_id(self, store: Store) -> None:
        # The run itself is not in its own way: a second start of one run id finds it.
        run, first, _ = self.start(store)
        _, again = make_run(run.thread_id, run_id=run.run_id, parent_id=first.checkpoint_id)
        with pytest.raises(ConflictError) as refused:
            store.create_run(run, again, owner=OWNER, ttl=TTL, sole=True)
        assert not isinstance(refused.value, ThreadBusyError)

    def test_sole_runs_started_together_on_one_thread_create_one(self, store: Store) -> None:
        seed, seed_first, lease = self.start(store)
        last = self.finish(store, seed_first, lease)
        contenders = [make_run(seed.thread_id, parent_id=last.checkpoint_id) for _ in range(6)]
        others = [self.reopen(store) for _ in range(3)] if store.capabilities.multi_process else []
        handles = [store, *others]
        try:
            outcomes = together(
                [partial(handles[i % len(handles)].create_run, run, first, owner=OWNER,
                         ttl=TTL, sole=True)
                 for i, (run, first) in enumerate(contenders)]
            )  # fmt: skip
        finally:
            for other in others:
                other.close()
        won = [
            run for (run, _), o in zip(contenders, outcomes, strict=True) if isinstance(o, Lease)
        ]
        refused = [o for o in outcomes if isinstance(o, ThreadBusyError)]
        assert (len(won), len(refused)) == (1, 5), outcomes
        assert {o.run_id for o in refused} == {won[0].run_id}
        unfinished = store.list_runs(thread_id=seed.thread_id, status=RunStatus.RUNNING)
        assert [r.run_id for r in unfinished] == [won[0].run_id]
