"""The store contract suite: one set of behaviour tests every backend must pass.

Subclass :class:`StoreContract` and provide a ``store`` fixture::

    class TestMyStore(StoreContract):
        @pytest.fixture
        def store(self) -> Iterator[Store]:
            store = MyStore(...)
            yield store
            store.close()

Tests of optional behaviour skip, with the reason, when the store's
:class:`~savegame.stores.base.Capabilities` do not claim it. The journal and
cancel-flag tests live in :mod:`savegame.testing._journal_contract` (listing one
part of a journal by request-id prefix in :mod:`savegame.testing._prefix_contract`), the
storage-engine tests (chains, blobs, pruning, rewrite, sizes) in
:mod:`savegame.testing._engine_contract`, the worker-fleet tests (unowned runs,
``claim_run``, blob references) in :mod:`savegame.testing._fleet_contract`, the
waiting-run tests (wake times, events) in :mod:`savegame.testing._waits_contract`, a
thread's sole run in :mod:`savegame.testing._threads_contract`; all
come with :class:`StoreContract` by inheritance. Tests that need a
second handle on the same data call :meth:`StoreContract.reopen`; override it
when ``open_store(store.url)`` cannot reach the data (a URL without secrets).
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from datetime import timedelta
from functools import partial

import pytest

from savegame.codec import decode
from savegame.errors import ConflictError, LeaseHeldError, LeaseLostError, NotFoundError
from savegame.ids import new_id
from savegame.model import CheckpointRecord, Lease, RunStatus, Usage, utcnow
from savegame.stores.base import RunPosition, Store
from savegame.testing._batch_contract import BatchContract
from savegame.testing._contract_base import TTL
from savegame.testing._engine_contract import EngineContract
from savegame.testing._fleet_contract import FleetContract
from savegame.testing._journal_contract import JournalContract
from savegame.testing._prefix_contract import PrefixContract
from savegame.testing._queues_contract import QueuesContract
from savegame.testing._schedules_contract import SchedulesContract
from savegame.testing._threads_contract import ThreadsContract
from savegame.testing._waits_contract import WaitsContract
from savegame.testing.builders import (
    OTHER_OWNER,
    OWNER,
    make_effect,
    make_record,
    make_run,
    next_record,
)
from savegame.testing.together import together

__all__ = ["StoreContract"]


class StoreContract(
    JournalContract,
    PrefixContract,
    EngineContract,
    FleetContract,
    WaitsContract,
    ThreadsContract,
    BatchContract,
    SchedulesContract,
    QueuesContract,
):
    """Behaviour every :class:`~savegame.stores.base.Store` must show (journal, engine, fleet,
    waiting-run, thread, group-commit, schedule and queue tests inherited)."""

    # -- create_run -----------------------------------------------------------
    def test_create_run_writes_run_first_checkpoint_and_lease(self, store: Store) -> None:
        run, first = make_run(metadata={"user": "ada"})
        lease = store.create_run(run, first, owner=OWNER, ttl=TTL)
        assert (lease.run_id, lease.owner, lease.token) == (run.run_id, OWNER, 1)
        assert lease.expires_at > time.time()
        got = store.get_run(run.run_id)
        assert got.head_checkpoint_id == first.checkpoint_id
        assert (got.status, got.step, got.error) == (RunStatus.RUNNING, 0, None)
        assert (got.workflow, got.workflow_ref, got.thread_id) == (
            run.workflow,
            run.workflow_ref,
            run.thread_id,
        )
        assert (got.created_at, got.metadata) == (run.created_at, {"user": "ada"})
        assert got.lease == lease
        assert store.latest_checkpoint(run.run_id) == first
        assert store.list_checkpoints(run.run_id) == [first.header]

    def test_create_run_with_existing_id_conflicts_and_writes_nothing(self, store: Store) -> None:
        run, _, _ = self.start(store)
        _, other_first = make_run(run.thread_id, run_id=run.run_id)
        with pytest.raises(ConflictError):
            store.create_run(run, other_first, owner=OTHER_OWNER, ttl=TTL)
        with pytest.raises(NotFoundError):
            store.get_checkpoint(other_first.checkpoint_id)
        held = store.get_run(run.run_id).lease
        assert held is not None and held.owner == OWNER
        assert store.stats().checkpoints == 1

    # -- reads ----------------------------------------------------------------
    def test_record_round_trip_is_exact(self, store: Store) -> None:
        run, first, lease = self.start(store)
        now = utcnow()
        record = make_record(
            run.thread_id,
            run.run_id,
            parent_id=first.checkpoint_id,
            step=7,
            node="plan",
            status=RunStatus.INTERRUPTED,
            next="approve",
            usage=Usage(
                input_tokens=1234, output_tokens=56, cost_usd=0.1 + 0.2, llm_calls=3, tool_calls=2
            ),
            metadata={"tag": "x", "n": 1.5, "nested": {"a": [1, 2, None]}, "ok": True},
            created_at=now.replace(microsecond=123457),
            expires_at=now + timedelta(days=30, microseconds=1),
            state_version=3,
            state={"plan": ["a", "b"], "bytes": b"\x00\xff", "n": 2**70},
        )
        store.put_checkpoint(record, lease_token=lease.token)
        got = store.get_checkpoint(record.checkpoint_id)
        assert got == record
        assert (got.payload, got.checksum) == (record.payload, record.checksum)
        assert decode(got).state == {"plan": ["a", "b"], "bytes": b"\x00\xff", "n": 2**70}
        assert store.latest_checkpoint(run.run_id) == record
        assert store.list_checkpoints(run.run_id, limit=1) == [record.header]

    def test_an_unknown_cost_round_trips_as_none(self, store: Store) -> None:
        # A run that called a model nobody prices has no total cost: None, never 0.0.
        run, first, lease = self.start(store)
        record = make_record(
            run.thread_id, run.run_id, parent_id=first.checkpoint_id, step=1,
            usage=Usage(input_tokens=10, cost_usd=None, llm_calls=1),
        )  # fmt: skip
        store.put_checkpoint(record, lease_token=lease.token)
        got = store.get_checkpoint(record.checkpoint_id)
        assert got == record and got.header.usage.cost_usd is None
        assert store.list_checkpoints(run.run_id, limit=1) == [record.header]

    def test_unknown_ids_raise_not_found(self, store: Store) -> None:
        run, first = make_run()
        for call in (
            lambda: store.get_run(run.run_id),
            lambda: store.get_checkpoint(first.checkpoint_id),
            lambda: store.latest_checkpoint(run.run_id),
            lambda: store.list_checkpoints(run.run_id),
            lambda: store.put_checkpoint(first, lease_token=1),
            lambda: store.acquire_lease(run.run_id, OWNER, TTL),
            lambda: store.renew_lease(run.run_id, 1, TTL),
            lambda: store.record_intent(make_effect(run.run_id), lease_token=1),
            lambda: store.get_effect(run.run_id, "no-such-request"),
            lambda: store.request_cancel(run.run_id),
        ):
            with pytest.raises(NotFoundError):
                call()
        assert store.thread_head(run.thread_id) is None
        assert store.delete_thread(run.thread_id) == 0
        assert store.list_effects(run.run_id) == []

    def test_thread_head_is_the_newest_checkpoint_of_any_run(self, store: Store) -> None:
        run1, first1, lease1 = self.start(store)
        run2, first2, _ = self.start(store, run1.thread_id)
        assert store.thread_head(run1.thread_id) == first2
        later = next_record(first1)
        store.put_checkpoint(later, lease_token=lease1.token)
        assert store.thread_head(run1.thread_id) == later
        assert store.latest_checkpoint(run2.run_id) == first2
        assert store.thread_head(new_id()) is None

    # -- put_checkpoint -----------------------------------------------------------
    def test_put_checkpoint_moves_head_status_step_and_error(self, store: Store) -> None:
        run, first, lease = self.start(store)
        before = store.get_run(run.run_id).updated_at
        failed = next_record(first, status=RunStatus.FAILED)
        store.put_checkpoint(failed, lease_token=lease.token, error="ValueError: boom")
        got = store.get_run(run.run_id)
        assert (got.head_checkpoint_id, got.status, got.step) == (
            failed.checkpoint_id,
            RunStatus.FAILED,
            1,
        )
        assert got.error == "ValueError: boom"
        assert got.updated_at >= before
        retried = next_record(failed)
        store.put_checkpoint(retried, lease_token=lease.token)
        got = store.get_run(run.run_id)
        assert (got.status, got.step, got.error) == (RunStatus.RUNNING, 2, None)

    def test_stale_token_is_rejected_and_nothing_is_written(self, store: Store) -> None:
        run, first, old = self.start(store, ttl=0.0)
        new = store.acquire_lease(run.run_id, OTHER_OWNER, TTL)
        stale = next_record(first)
        with pytest.raises(LeaseLostError) as info:
            store.put_checkpoint(stale, lease_token=old.token)
        assert (info.value.run_id, info.value.token) == (run.run_id, old.token)
        with pytest.raises(NotFoundError):
            store.get_checkpoint(stale.checkpoint_id)
        assert store.get_run(run.run_id).head_checkpoint_id == first.checkpoint_id
        assert store.stats().checkpoints == 1
        store.put_checkpoint(stale, lease_token=new.token)
        assert store.latest_checkpoint(run.run_id) == stale

    def test_duplicate_checkpoint_id_conflicts(self, store: Store) -> None:
        run, first, lease = self.start(store)
        second = next_record(first)
        store.put_checkpoint(second, lease_token=lease.token)
        with pytest.raises(ConflictError):
            store.put_checkpoint(second, lease_token=lease.token)
        impostor = next_record(second, checkpoint_id=second.checkpoint_id)
        with pytest.raises(ConflictError):
            store.put_checkpoint(impostor, lease_token=lease.token)
        assert store.get_checkpoint(second.checkpoint_id) == second
        assert store.get_run(run.run_id).step == 1
        assert store.stats().checkpoints == 2

    # -- history ----------------------------------------------------------------------
    def test_history_is_newest_first_and_pages_with_before(self, store: Store) -> None:
        run, first, lease = self.start(store)
        records = [first]
        for _ in range(5):
            records.append(next_record(records[-1]))
            store.put_checkpoint(records[-1], lease_token=lease.token)
        newest_first = [r.header for r in reversed(records)]
        assert store.list_checkpoints(run.run_id) == newest_first
        assert store.list_checkpoints(run.run_id, limit=2) == newest_first[:2]
        pages, before = [], None
        while page := store.list_checkpoints(run.run_id, limit=4, before=before):
            pages.append(page)
            before = page[-1].checkpoint_id
        assert [len(p) for p in pages] == [4, 2]
        assert [h for p in pages for h in p] == newest_first

    def test_history_filters_on_top_level_scalar_metadata(self, store: Store) -> None:
        """Filters compare JSON types apart: True never matches 1, None matches a present null."""
        run, first, lease = self.start(store)
        metas = [
            {"kind": "a", "n": 1},
            {"kind": "b", "n": 1.5},
            {"kind": "a", "flag": True, "x": None},
        ]
        previous, ids = first, []
        for meta in metas:
            previous = next_record(previous, metadata=meta)
            store.put_checkpoint(previous, lease_token=lease.token)
            ids.append(previous.checkpoint_id)

        def found(**wanted: object) -> list[str]:
            return [h.checkpoint_id for h in store.list_checkpoints(run.run_id, metadata=wanted)]

        assert found(kind="a") == [ids[2], ids[0]]
        assert found(kind="a", n=1) == [ids[0]]
        assert found(n=1.0) == [ids[0]]
        assert found(n=1.5) == [ids[1]]
        assert found(flag=True) == [ids[2]]
        assert found(n=True) == []
        assert found(kind=1) == []
        assert found(x=None) == [ids[2]]
        assert found(missing=None) == []
        assert found(kind="a", flag=False) == []
        assert [
            h.checkpoint_id
            for h in store.list_checkpoints(run.run_id, metadata={"kind": "a"}, limit=1)
        ] == [ids[2]]

    # -- leases -------------------------------------------------------------------------
    def test_acquire_on_a_live_lease_is_held(self, store: Store) -> None:
        run, _, lease = self.start(store)
        with pytest.raises(LeaseHeldError) as info:
            store.acquire_lease(run.run_id, OTHER_OWNER, TTL)
        assert (info.value.run_id, info.value.owner) == (run.run_id, OWNER)
        assert 0 < info.value.expires_in <= TTL
        assert store.get_run(run.run_id).lease == lease

    def test_acquire_after_expiry_takes_over_with_a_larger_token(self, store: Store) -> None:
        run, _, old = self.start(store, ttl=0.0)
        new = store.acquire_lease(run.run_id, OTHER_OWNER, TTL)
        assert (new.owner, new.token) == (OTHER_OWNER, old.token + 1)
        assert new.expires_at > time.time()
        assert store.get_run(run.run_id).lease == new

    def test_takeover_token_is_a_compare_and_swap(self, store: Store) -> None:
        run, _, lease = self.start(store)
        taken = store.acquire_lease(run.run_id, OTHER_OWNER, TTL, takeover_token=lease.token)
        assert taken.token == lease.token + 1
        # A second taker still holding the old token lost the race.
        with pytest.raises(LeaseHeldError):
            store.acquire_lease(run.run_id, OWNER, TTL, takeover_token=lease.token)
        with pytest.raises(LeaseHeldError):
            store.acquire_lease(run.run_id, OWNER, TTL, takeover_token=taken.token + 1)
        assert store.get_run(run.run_id).lease == taken

    def test_release_frees_the_run_and_keeps_tokens_growing(self, store: Store) -> None:
        run, _, lease = self.start(store)
        store.release_lease(run.run_id, lease.token)
        assert store.get_run(run.run_id).lease is None
        again = store.acquire_lease(run.run_id, OTHER_OWNER, TTL)
        assert again.token == lease.token + 1
        store.release_lease(run.run_id, lease.token)  # stale: a no-op
        assert store.get_run(run.run_id).lease == again
        store.release_lease(run.run_id, again.token)
        assert store.acquire_lease(run.run_id, OWNER, TTL).token == again.token + 1

    def test_renew_extends_a_current_lease_and_rejects_a_stale_one(self, store: Store) -> None:
        run, _, lease = self.start(store, ttl=0.0)
        renewed = store.renew_lease(run.run_id, lease.token, TTL)
        assert (renewed.token, renewed.owner) == (lease.token, OWNER)
        assert renewed.expires_at > lease.expires_at
        assert store.get_run(run.run_id).lease == renewed
        store.release_lease(run.run_id, lease.token)
        with pytest.raises(LeaseLostError):
            store.renew_lease(run.run_id, lease.token, TTL)
        newer = store.acquire_lease(run.run_id, OTHER_OWNER, TTL)
        with pytest.raises(LeaseLostError):
            store.renew_lease(run.run_id, lease.token, TTL)
        assert store.get_run(run.run_id).lease == newer

    # -- runs and threads ---------------------------------------------------------------
    def test_list_runs_filters_by_thread_and_status_newest_first(self, store: Store) -> None:
        thread_a, thread_b = new_id(), new_id()
        a1, a1_first, a1_lease = self.start(store, thread_a)
        a2, _, _ = self.start(store, thread_a)
        b1, _, _ = self.start(store, thread_b)
        store.put_checkpoint(
            next_record(a1_first, status=RunStatus.COMPLETED), lease_token=a1_lease.token
        )

        def ids(**filters: object) -> list[str]:
            return [r.run_id for r in store.list_runs(**filters)]  # type: ignore[arg-type]

        assert ids() == [b1.run_id, a2.run_id, a1.run_id]
        assert ids(limit=2) == [b1.run_id, a2.run_id]
        assert ids(thread_id=thread_a) == [a2.run_id, a1.run_id]
        assert ids(status=RunStatus.COMPLETED) == [a1.run_id]
        assert ids(thread_id=thread_a, status=RunStatus.RUNNING) == [a2.run_id]
        assert ids(thread_id=new_id()) == []

    def test_list_runs_pages_by_keyset_and_filters_by_workflow_and_text(self, store: Store) -> None:
        now = utcnow()
        made = []
        # Two runs share a created_at: the run id orders them, and a page boundary
        # between them neither repeats nor skips one.
        for n, (run_id, workflow, age) in enumerate(
            [("a_1%x", "alpha", 4), ("B-2", "beta", 3), ("c-3", "alpha", 2), ("C-4", "beta", 2)]
        ):
            run, first = make_run(f"thread-{n}", run_id=run_id, workflow=workflow)
            run = replace(run, created_at=now - timedelta(seconds=age))
            store.create_run(run, first, owner=OWNER, ttl=TTL)
            made.append(run)
        newest_first = ["c-3", "C-4", "B-2", "a_1%x"]

        def ids(**filters: object) -> list[str]:
            return [r.run_id for r in store.list_runs(**filters)]  # type: ignore[arg-type]

        assert ids() == newest_first
        pages, before = [], None
        while page := store.list_runs(limit=1, before=before):
            pages.append(page[0].run_id)
            before = RunPosition.of(page[0])
        assert pages == newest_first
        assert ids(before=RunPosition.of(made[2])) == ["C-4", "B-2", "a_1%x"]
        assert ids(workflow="alpha") == ["c-3", "a_1%x"]
        assert ids(workflow="alpha", before=RunPosition.of(made[2])) == ["a_1%x"]
        assert ids(search="c-") == ["c-3", "C-4"]  # any case
        assert ids(search="THREAD-1") == ["B-2"]  # the thread id too
        assert ids(search="_1%") == ["a_1%x"]  # LIKE's wildcards are plain text
        assert ids(search="%") == ["a_1%x"] and ids(search="1_") == []
        assert ids(search="-", workflow="beta", status=RunStatus.RUNNING) == ["C-4", "B-2"]

    def test_list_threads_most_recently_updated_first(self, store: Store) -> None:
        a1, a1_first, a1_lease = self.start(store)
        a2, _, _ = self.start(store, a1.thread_id)
        b1, _, _ = self.start(store)
        time.sleep(0.002)  # updated_at has microsecond resolution; keep the order unambiguous
        store.put_checkpoint(next_record(a1_first), lease_token=a1_lease.token)
        threads = store.list_threads()
        assert [(t.thread_id, t.runs, t.latest_run_id) for t in threads] == [
            (a1.thread_id, 2, a2.run_id),
            (b1.thread_id, 1, b1.run_id),
        ]
        assert threads[0].updated_at >= threads[1].updated_at
        assert abs(threads[0].updated_at - time.time()) < 60
        assert [t.thread_id for t in store.list_threads(limit=1)] == [a1.thread_id]

    def test_delete_thread_removes_its_runs_and_checkpoints_only(self, store: Store) -> None:
        a1, a1_first, a1_lease = self.start(store)
        self.start(store, a1.thread_id)
        b1, b1_first, _ = self.start(store)
        store.put_checkpoint(next_record(a1_first), lease_token=a1_lease.token)
        assert store.delete_thread(a1.thread_id) == 3
        assert store.list_runs(thread_id=a1.thread_id) == []
        assert store.thread_head(a1.thread_id) is None
        with pytest.raises(NotFoundError):
            store.get_checkpoint(a1_first.checkpoint_id)
        assert store.latest_checkpoint(b1.run_id) == b1_first
        assert store.stats().runs == 1

    def test_stats_count_runs_checkpoints_and_payload_bytes(self, store: Store) -> None:
        empty = store.stats()
        assert (empty.runs, empty.checkpoints, empty.payload_bytes) == (0, 0, 0)
        _, first, lease = self.start(store)
        second = next_record(first)
        store.put_checkpoint(second, lease_token=lease.token)
        stats = store.stats()
        assert (stats.runs, stats.checkpoints) == (1, 2)
        assert stats.payload_bytes == len(first.payload) + len(second.payload)
        assert stats.file_bytes is None or stats.file_bytes > 0

    # -- concurrency ----------------------------------------------------------------------
    def test_concurrent_puts_with_one_token_lose_nothing(self, store: Store) -> None:
        """Threads sharing a token (the runtime's writer and loop) never lose a write or tear the run row."""
        run, first, lease = self.start(store)
        threads, per_thread = 4, 10
        barrier = threading.Barrier(threads)
        written: list[CheckpointRecord] = []
        errors: list[BaseException] = []

        def writer(offset: int) -> None:
            mine = [
                make_record(
                    run.thread_id,
                    run.run_id,
                    parent_id=first.checkpoint_id,
                    step=1 + offset * per_thread + k,
                    metadata={"writer": offset},
                )
                for k in range(per_thread)
            ]
            written.extend(mine)
            barrier.wait()
            try:
                for record in mine:
                    store.put_checkpoint(record, lease_token=lease.token)
            except BaseException as exc:  # surfaced below: a thread's exception is otherwise lost
                errors.append(exc)

        workers = [threading.Thread(target=writer, args=(i,)) for i in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert errors == []
        history = store.list_checkpoints(run.run_id)
        expected = sorted([first.checkpoint_id] + [r.checkpoint_id for r in written], reverse=True)
        assert [h.checkpoint_id for h in history] == expected
        got = store.get_run(run.run_id)
        head = store.get_checkpoint(got.head_checkpoint_id or "")
        assert head.header.metadata["writer"] in range(threads)
        assert (got.step, got.status) == (head.header.step, head.header.status)
        last = next_record(head)
        store.put_checkpoint(last, lease_token=lease.token)
        assert last.checkpoint_id > expected[0]
        assert store.get_run(run.run_id).head_checkpoint_id == last.checkpoint_id
        assert store.latest_checkpoint(run.run_id) == last

    def test_concurrent_acquire_has_exactly_one_winner(self, store: Store) -> None:
        run, _, lease = self.start(store, ttl=0.0)
        contenders = 6
        outcomes = together(
            [partial(store.acquire_lease, run.run_id, f"host:{2000 + i}:1", TTL)
             for i in range(contenders)]
        )  # fmt: skip
        won = [o for o in outcomes if isinstance(o, Lease)]
        held = [o for o in outcomes if isinstance(o, LeaseHeldError)]
        assert (len(won), len(held)) == (1, contenders - 1), outcomes
        assert won[0].token == lease.token + 1
        assert store.get_run(run.run_id).lease == won[0]

    # -- optional capabilities ----------------------------------------------------------------
    def test_data_survives_reopening(self, store: Store) -> None:
        if not store.capabilities.persistent:
            pytest.skip(f"{type(store).__name__} does not claim persistent")
        run, first, lease = self.start(store)
        second = next_record(first)
        store.put_checkpoint(second, lease_token=lease.token)
        with self._second_handle(store) as other:
            assert other.get_run(run.run_id) == store.get_run(run.run_id)
            assert other.latest_checkpoint(run.run_id) == second

    def test_handles_share_leases_and_fencing(self, store: Store) -> None:
        if not store.capabilities.multi_process:
            pytest.skip(f"{type(store).__name__} does not claim multi_process")
        run, first, lease = self.start(store, ttl=0.0)
        with self._second_handle(store) as other:
            taken = other.acquire_lease(run.run_id, OTHER_OWNER, TTL)
            with pytest.raises(LeaseHeldError):
                store.acquire_lease(run.run_id, OWNER, TTL)
            with pytest.raises(LeaseLostError):
                store.put_checkpoint(next_record(first), lease_token=lease.token)
            second = next_record(first)
            other.put_checkpoint(second, lease_token=taken.token)
            assert store.latest_checkpoint(run.run_id) == second
