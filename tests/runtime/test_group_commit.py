"""Group commit: runs reaching a boundary together share one transaction (runtime/_commit.py).

The batches are made deterministic by holding the first write (a lone run writes at
once) until the others have queued behind it, so they must go in one transaction.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import pytest

import savegame
from savegame import END, RunStatus, Workflow
from savegame.errors import CheckpointWriteError
from savegame.runtime import _commit
from savegame.stores.base import Put, PutResult, Store
from savegame.stores.redis import RedisStore
from savegame.stores.sqlite import SqliteStore
from tests import services

STEPS = 6

counter = Workflow("group-counter")


@counter.step(entry=True)
def tick(state: dict[str, Any], ctx: object) -> tuple[dict[str, Any], str]:
    n = state.get("n", 0) + 1
    return {"n": n, "log": [*state.get("log", []), n]}, ("tick" if n < STEPS else END)


class Holding:
    """A real store whose first plain write waits until ``queued`` writes wait behind
    it; it records the size of every batch and can fail the next one."""

    def hold(self, queued: int) -> None:
        self.queued = queued
        self.batches: list[int] = []
        self.fail_next_batch: BaseException | None = None
        self._held = threading.Event()

    def put_checkpoint(self, record: Any, **kwargs: Any) -> PutResult:
        if not self._held.is_set():
            self._held.set()
            group = _commit.group_of(cast(Store, self))
            assert group is not None
            for _ in range(12_000):  # up to a minute: a loaded machine starts threads late
                with group._lock:
                    if len(group._queue) >= self.queued:
                        break
                threading.Event().wait(0.005)
        self.batches.append(1)
        written: PutResult = super().put_checkpoint(record, **kwargs)  # type: ignore[misc]
        return written

    def put_checkpoints(self, puts: Sequence[Put]) -> list[PutResult | Exception]:
        self.batches.append(len(puts))
        if self.fail_next_batch is not None:
            failure, self.fail_next_batch = self.fail_next_batch, None
            raise failure
        done: list[PutResult | Exception] = super().put_checkpoints(puts)  # type: ignore[misc]
        return done


class Held(Holding, SqliteStore):
    def __init__(self, path: Path, queued: int) -> None:
        super().__init__(path)
        self.hold(queued)


class HeldRedis(Holding, RedisStore):
    pass


@pytest.fixture
def held(tmp_path: Path) -> Iterator[Held]:
    store = Held(tmp_path / "group.db", queued=3)
    yield store
    store.close()


def start_runs(store: Any, n: int) -> tuple[list[threading.Thread], dict[str, Any]]:
    results: dict[str, Any] = {}

    def one(i: int) -> None:
        try:
            results[f"r{i}"] = savegame.run(counter, {}, run_id=f"r{i}", store=store)
        except BaseException as exc:  # kept for the assertions
            results[f"r{i}"] = exc

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    return threads, results


def test_runs_at_a_boundary_together_share_one_transaction(held: Held) -> None:
    threads, results = start_runs(held, 4)
    for t in threads:
        t.join(60)
    assert max(held.batches) >= 3, held.batches
    for i in range(4):
        result = results[f"r{i}"]
        assert result.status is RunStatus.COMPLETED, result
        assert result.state == {"n": STEPS, "log": list(range(1, STEPS + 1))}
        # Every checkpoint of every run is there, each parented on the one before.
        headers = [c for c in savegame.client.history(f"r{i}", store=held)]
        assert [h.step for h in reversed(headers)] == list(range(STEPS + 1))


def test_a_failed_batch_fails_each_run_in_it_and_each_resumes(held: Held) -> None:
    held.fail_next_batch = OSError("disk I/O error")
    threads, results = start_runs(held, 4)
    for t in threads:
        t.join(60)
    failed = [run_id for run_id, got in results.items() if isinstance(got, BaseException)]
    assert len(failed) >= 3, results
    for run_id in failed:
        assert isinstance(results[run_id], CheckpointWriteError)
        assert "disk I/O error" in str(results[run_id].__cause__ or results[run_id])
    # None of the failed batch was written: each run goes on from its last durable checkpoint.
    for run_id in failed:
        done = savegame.resume(run_id, store=held)
        assert done.state == {"n": STEPS, "log": list(range(1, STEPS + 1))}


def test_a_lost_lease_in_a_batch_fails_only_its_run(tmp_path: Path) -> None:
    # Two runs are queued behind a held write; one's lease is taken before the batch.
    store = Held(tmp_path / "lease.db", queued=2)
    stolen: list[str] = []
    original = store.put_checkpoints

    def steal_then_batch(puts: Sequence[Put]) -> list[PutResult | Exception]:
        if not stolen:
            victim = puts[0].record.run_id
            lease = store.get_run(victim).lease
            assert lease is not None
            store.acquire_lease(victim, "thief:1:1", 60.0, takeover_token=lease.token)
            stolen.append(victim)
        return original(puts)

    store.put_checkpoints = steal_then_batch  # type: ignore[method-assign]
    try:
        threads, results = start_runs(store, 3)
        for t in threads:
            t.join(60)
        assert stolen
        outcome = {run_id: type(got).__name__ for run_id, got in results.items()}
        assert outcome[stolen[0]] == "LeaseLostError", outcome
        others = [r for r in results if r != stolen[0]]
        assert all(results[r].status is RunStatus.COMPLETED for r in others), outcome
    finally:
        store.close()


def test_a_lone_run_writes_without_a_batch(tmp_path: Path) -> None:
    store = Held(tmp_path / "lone.db", queued=0)
    try:
        savegame.run(counter, {}, store=store)
        assert set(store.batches) == {1}
    finally:
        store.close()


def test_stores_without_group_commit_have_no_committer(tmp_path: Path) -> None:
    with services.scratch_store("memory", tmp_path) as memory:
        assert _commit.committer(memory) is None
        assert _commit.group_of(memory) is None


def test_async_runs_at_a_boundary_share_transactions(tmp_path: Path) -> None:
    # 32 arun()s in one event loop: their writes wait in the io threads together.
    store = Held(tmp_path / "async.db", queued=8)

    async def all_runs() -> list[Any]:
        return await asyncio.gather(
            *(savegame.arun(counter, {}, run_id=f"a{i}", store=store) for i in range(32))
        )

    try:
        results = asyncio.run(all_runs())
        assert max(store.batches) >= 8, store.batches
        assert all(r.state["n"] == STEPS for r in results)
    finally:
        store.close()


def test_async_runs_on_redis_share_one_multi_exec(tmp_path: Path) -> None:
    # Redis has no fsync to share, but a batch is one round trip (MULTI/EXEC).
    with services.BACKENDS["redis"](tmp_path) as url, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the test server keeps nothing on disk
        store = HeldRedis.from_url(url)
        store.hold(8)

        async def all_runs() -> list[Any]:
            return await asyncio.gather(
                *(savegame.arun(counter, {}, run_id=f"a{i}", store=store) for i in range(32))
            )

        try:
            results = asyncio.run(all_runs())
            assert max(store.batches) >= 8, store.batches
            assert all(r.state["n"] == STEPS and r.state["log"] == list(range(1, STEPS + 1))
                       for r in results)  # fmt: skip
            for r in results:
                assert len(store.list_checkpoints(r.run_id)) == STEPS + 1
        finally:
            store.close()


def test_handles_of_one_url_share_a_committer_and_others_do_not(tmp_path: Path) -> None:
    # A worker's slots each open a handle: their writes still meet in one transaction.
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    one, two = savegame.open_store(url), savegame.open_store(url)
    other = savegame.open_store(f"sqlite:///{tmp_path / 'other.db'}")
    try:
        assert _commit.group_of(one) is _commit.group_of(two)
        assert _commit.group_of(one) is not _commit.group_of(other)
    finally:
        for store in (one, two, other):
            store.close()


def test_a_committer_is_kept_only_while_runs_write_through_it(tmp_path: Path) -> None:
    # A process that opens store after store (a file per tenant) keeps no idle ones.
    stores = [savegame.open_store(f"sqlite:///{tmp_path / f't{i}.db'}") for i in range(3)]
    try:
        for store in stores:
            assert savegame.run(counter, {}, store=store).state["n"] == STEPS
        gc.collect()
        assert {url for _, url in _commit._committers} & {s.url for s in stores} == set()
    finally:
        for store in stores:
            store.close()
