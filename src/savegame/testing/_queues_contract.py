"""The store contract for queues with limits (``Capabilities.queues``).

Part of :class:`savegame.testing.contract.StoreContract`; subclass that, not this.
Every test skips on a store that does not claim ``Capabilities.queues``. What it pins is
what ``submit(queue=...)`` and the fleet rely on: a run goes in a declared queue only,
a dedup key names one unfinished run, claims take the highest priority first, and no
claimers, however many and on however many handles, start more runs of a queue than
its concurrency (global and per owner) or its rate limit allow.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import cast

import pytest

from savegame.errors import ConfigurationError, NotFoundError
from savegame.model import VERSION_KEY, Lease, RunInfo, RunStatus
from savegame.stores import DuplicateRunError, Enqueue, Queue, QueueStore
from savegame.stores.base import Store
from savegame.testing._contract_base import TTL, ContractBase
from savegame.testing.builders import OTHER_OWNER, OWNER, make_run, next_record

__all__ = ["QueuesContract"]

CLAIMERS = 8
"""Threads racing in the concurrency tests."""


class QueuesContract(ContractBase):
    """declare_queue, list_queues, create_run(queue=...), claim_run(queues=...), run_queue."""

    def queues(self, store: Store) -> QueueStore:
        if not store.capabilities.queues:
            pytest.skip(f"{type(store).__name__} does not claim queues")
        return cast(QueueStore, store)

    def put(
        self,
        store: QueueStore,
        queue: str,
        *,
        priority: int = 0,
        key: str | None = None,
        version: str | None = None,
    ) -> RunInfo:
        run, first = make_run(metadata={} if version is None else {VERSION_KEY: version})
        first = replace(first, header=replace(first.header, status=RunStatus.QUEUED))
        store.create_run(run, first, owner=None, ttl=TTL, queue=Enqueue(queue, priority, key))
        return run

    def test_a_run_goes_only_in_a_declared_queue(self, store: Store) -> None:
        s = self.queues(store)
        run, first = make_run()
        with pytest.raises(NotFoundError, match="emails"):
            s.create_run(run, first, owner=None, ttl=TTL, queue=Enqueue("emails"))
        with pytest.raises(NotFoundError):
            s.get_run(run.run_id)  # nothing was created
        with pytest.raises(ConfigurationError, match="concurrency"):
            s.declare_queue(Queue("emails", concurrency=0))
        s.declare_queue(Queue("emails", concurrency=2, limit=10, period=60))
        s.declare_queue(Queue("emails", concurrency=3))  # declared again: replaced
        assert [q.queue for q in s.list_queues()] == [Queue("emails", concurrency=3)]

    def test_run_queue_says_where_a_run_was_put(self, store: Store) -> None:
        s = self.queues(store)
        s.declare_queue(Queue("llm", concurrency=1))
        queued = self.put(s, "llm", priority=4, key="job-9")
        plain, plain_first = make_run()
        s.create_run(plain, plain_first, owner=None, ttl=TTL)
        assert s.run_queue(queued.run_id) == Enqueue("llm", 4, "job-9")
        assert s.run_queue(plain.run_id) is None
        with pytest.raises(NotFoundError):
            s.run_queue("no-such-run")

    def test_list_queues_counts_queued_running_started(self, store: Store) -> None:
        s = self.queues(store)
        s.declare_queue(Queue("b"))
        s.declare_queue(Queue("a", limit=5, period=3600))
        for _ in range(3):
            self.put(s, "a")
        lease = s.claim_run(OWNER, TTL, queues=["a"])
        assert lease is not None
        a, b = s.list_queues()
        assert (a.queue.name, a.queued, a.running, a.started, a.unfinished) == ("a", 2, 1, 1, 3)
        assert (b.queue.name, b.queued, b.running, b.unfinished) == ("b", 0, 0, 0)
        s.release_lease(lease.run_id, lease.token)
        assert s.list_queues()[0].running == 0

    def test_a_dedup_key_names_one_unfinished_run_of_its_queue(self, store: Store) -> None:
        s = self.queues(store)
        s.declare_queue(Queue("emails"))
        s.declare_queue(Queue("other"))
        first = self.put(s, "emails", key="order-7")
        with pytest.raises(DuplicateRunError) as info:
            self.put(s, "emails", key="order-7")
        assert info.value.run_id == first.run_id
        self.put(s, "other", key="order-7")  # another queue: another key space
        # Once the run is finished the key is free again.
        lease = s.acquire_lease(first.run_id, OWNER, TTL)
        done = next_record(s.latest_checkpoint(first.run_id), status=RunStatus.COMPLETED)
        s.put_checkpoint(done, lease_token=lease.token)
        again = self.put(s, "emails", key="order-7")
        assert again.run_id != first.run_id

    def test_racing_submits_with_one_key_create_one_run(self, store: Store) -> None:
        s = self.queues(store)
        s.declare_queue(Queue("emails"))
        with self._second_handle(store) as other:
            handles = [s, cast(QueueStore, other)]
            created, dupes, errors = [], [], []
            barrier = threading.Barrier(CLAIMERS)

            def submitter(i: int) -> None:
                try:
                    barrier.wait()
                    created.append(self.put(handles[i % 2], "emails", key="k").run_id)
                except DuplicateRunError as exc:
                    dupes.append(exc.run_id)
                except BaseException as exc:
                    errors.append(exc)

            self._all(submitter)
        assert errors == [] and len(created) == 1
        assert dupes == created * (CLAIMERS - 1)

    def test_claims_take_the_highest_priority_first(self, store: Store) -> None:
        s = self.queues(store)
        s.declare_queue(Queue("q"))
        low = self.put(s, "q")
        high = self.put(s, "q", priority=10)
        mid = self.put(s, "q", priority=5)
        order = [self._claim(s, OWNER).run_id for _ in range(3)]
        assert order == [high.run_id, mid.run_id, low.run_id]

    def test_a_claim_with_queues_takes_only_those(self, store: Store) -> None:
        s = self.queues(store)
        s.declare_queue(Queue("a"))
        s.declare_queue(Queue("b"))
        in_b = self.put(s, "b")
        plain, plain_first = make_run()
        s.create_run(plain, plain_first, owner=None, ttl=TTL)
        assert s.claim_run(OWNER, TTL, queues=["a"]) is None
        got = s.claim_run(OWNER, TTL, queues=["a", "b"])
        assert got is not None and got.run_id == in_b.run_id
        assert s.claim_run(OWNER, TTL, queues=["a", "b"]) is None  # a run of no queue is not theirs
        got = s.claim_run(OWNER, TTL)
        assert got is not None and got.run_id == plain.run_id

    def test_a_claim_in_queues_follows_the_version_filter(self, store: Store) -> None:
        s = self.queues(store)
        s.declare_queue(Queue("q", concurrency=1))
        old = self.put(s, "q", priority=9, version="v1")
        new = self.put(s, "q", version="v2")
        # The v1 run goes first by priority, but not to a worker of v2 only.
        got = s.claim_run(OWNER, TTL, queues=["q"], versions=["v2"])
        assert got is not None and got.run_id == new.run_id
        assert s.claim_run(OTHER_OWNER, TTL, versions=["v1"]) is None  # the queue is full
        s.release_lease(new.run_id, got.token)
        got = s.claim_run(OTHER_OWNER, TTL, versions=["v1", "v2"])
        assert got is not None and got.run_id == old.run_id

    def test_a_claim_never_exceeds_a_queue_s_concurrency(self, store: Store) -> None:
        s = self.queues(store)
        s.declare_queue(Queue("q", concurrency=2))
        for _ in range(4):
            self.put(s, "q")
        first, second = self._claim(s, OWNER), self._claim(s, OTHER_OWNER)
        assert s.claim_run(OWNER, TTL) is None  # two run: the queue is full, for anyone
        assert s.claim_run("third:1:1", TTL, queues=["q"]) is None
        s.release_lease(first.run_id, first.token)  # its worker stops: room for one
        assert self._claim(s, OWNER).run_id != second.run_id
        assert s.claim_run(OWNER, TTL) is None

    def test_an_expired_lease_does_not_count_as_running(self, store: Store) -> None:
        s = self.queues(store)
        s.declare_queue(Queue("q", concurrency=1))
        first, second = self.put(s, "q"), self.put(s, "q")
        dead = s.claim_run(OWNER, 0.05)
        assert dead is not None
        time.sleep(0.1)
        # The dead worker's run is claimable again, and takes the one place.
        got = self._claim(s, OTHER_OWNER)
        assert got.run_id in (first.run_id, second.run_id)
        assert s.claim_run(OWNER, TTL) is None

    def test_worker_concurrency_is_per_owner(self, store: Store) -> None:
        s = self.queues(store)
        s.declare_queue(Queue("q", worker_concurrency=1))
        for _ in range(3):
            self.put(s, "q")
        self._claim(s, OWNER)
        assert s.claim_run(OWNER, TTL) is None
        self._claim(s, OTHER_OWNER)
        assert s.claim_run(OTHER_OWNER, TTL) is None

    def test_a_rate_limit_counts_starts_in_its_window(self, store: Store) -> None:
        s = self.queues(store)
        s.declare_queue(Queue("q", limit=2, period=3600))
        for _ in range(3):
            self.put(s, "q")
        first = self._claim(s, OWNER)
        s.release_lease(first.run_id, first.token)
        # Claimed again (its worker stopped): no new start.
        again = self._claim(s, OWNER)
        assert again.run_id == first.run_id
        self._claim(s, OWNER)
        assert s.claim_run(OWNER, TTL) is None  # two starts this hour
        s.declare_queue(Queue("q", limit=2, period=1e-6))  # the window moved past them
        self._claim(s, OWNER)

    def test_a_run_taken_over_is_no_new_start_for_the_rate_limit(self, store: Store) -> None:
        s = self.queues(store)
        s.declare_queue(Queue("q", limit=1, period=3600))
        only, _ = self.put(s, "q"), self.put(s, "q")
        assert s.claim_run(OWNER, 0.05) is not None
        time.sleep(0.1)  # its worker died: the lease ran out
        again = self._claim(s, OTHER_OWNER)
        assert again.run_id == only.run_id  # taken over, though the hour's one start is used
        assert s.claim_run(OTHER_OWNER, TTL) is None  # the other run would be a new start
        assert s.list_queues()[0].started == 1

    def test_a_full_queue_leaves_room_for_runs_of_other_queues(self, store: Store) -> None:
        s = self.queues(store)
        s.declare_queue(Queue("full", concurrency=1))
        s.declare_queue(Queue("free"))
        self.put(s, "full", priority=9)
        self.put(s, "full", priority=9)
        free = self.put(s, "free")
        self._claim(s, OWNER)
        assert self._claim(s, OWNER).run_id == free.run_id

    def test_racing_claimers_on_two_handles_keep_a_queue_s_concurrency(self, store: Store) -> None:
        s = self.queues(store)
        s.declare_queue(Queue("q", concurrency=3))
        for _ in range(3 * CLAIMERS):
            self.put(s, "q")
        with self._second_handle(store) as other:
            handles: Sequence[QueueStore] = [s, cast(QueueStore, other)]
            taken: list[Lease] = []
            errors: list[BaseException] = []
            barrier = threading.Barrier(CLAIMERS)

            def claimer(i: int) -> None:
                try:
                    barrier.wait()
                    for _ in range(6):
                        lease = handles[i % 2].claim_run(f"host:{i}:1", TTL, queues=["q"])
                        if lease is not None:
                            taken.append(lease)
                except BaseException as exc:
                    errors.append(exc)

            self._all(claimer)
        assert errors == []
        assert len(taken) == 3 and len({t.run_id for t in taken}) == 3

    def _claim(self, store: QueueStore, owner: str) -> Lease:
        lease = store.claim_run(owner, TTL)
        assert lease is not None
        return lease

    @staticmethod
    def _all(target: Callable[[int], None]) -> None:
        threads = [threading.Thread(target=target, args=(i,)) for i in range(CLAIMERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
