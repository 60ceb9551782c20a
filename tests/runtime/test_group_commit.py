"""Group commit: runs reaching a boundary together share one transaction (runtime/_commit.py).

The batches are made deterministic by holding the first write (a lone run writes at
once) until the others have queued behind it, so they must go in one transaction.
"""

from __future__ import annotations

import asyncio
import gc
import sqlite3
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
        self.refused: list[str] = []
        self._held = threading.Event()

    def put_checkpoint(self, record: Any, **kwargs: Any) -> PutResult:
        if not self._held.is_set():
            self._held.set()
            group = _commit.group_of(cast(Store, self))
            assert group is not None
            for _ in range(12_000):  # up to a minute: a loaded machine starts threads late
                if group.waiting() >= self.queued:
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
        self.refused += [type(got).__name__ for got in done if isinstance(got, Exception)]
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


class CountingLoop(asyncio.SelectorEventLoop):
    """Counts the io thread hops of the event loop's committer: each ends in one
    ``call_soon_threadsafe`` of ``LoopCommit._written``."""

    hops = 0

    def call_soon_threadsafe(self, callback: Any, *args: Any, context: Any = None) -> Any:
        if getattr(callback, "__name__", "") == "_written":
            CountingLoop.hops += 1
        return super().call_soon_threadsafe(callback, *args, context=context)


def run_on_counting_loop(coro: Any) -> Any:
    CountingLoop.hops = 0
    with asyncio.Runner(loop_factory=CountingLoop) as runner:
        return runner.run(coro)


def test_an_event_loops_runs_pay_one_thread_hop_a_batch(tmp_path: Path) -> None:
    # 32 arun()s: the first write is held until the other 31 queue on the loop, so
    # they go to the io thread together, in one hop and one transaction.
    store = Held(tmp_path / "hops.db", queued=31)

    async def all_runs() -> list[Any]:
        return await asyncio.gather(
            *(savegame.arun(counter, {}, run_id=f"h{i}", store=store) for i in range(32))
        )

    try:
        results = run_on_counting_loop(all_runs())
        assert 31 in store.batches, store.batches
        checkpoints = sum(len(store.list_checkpoints(r.run_id)) for r in results)
        assert checkpoints == 32 * (STEPS + 1)
        # A thread hop per checkpoint before; now one per batch (the first run's
        # checkpoint alone, then what queued behind it).
        assert CountingLoop.hops == len(store.batches) < checkpoints // 4, (
            CountingLoop.hops,
            store.batches,
        )
        assert all(r.state == {"n": STEPS, "log": list(range(1, STEPS + 1))} for r in results)
    finally:
        store.close()


def test_a_lone_arun_writes_plainly_one_hop_a_checkpoint(tmp_path: Path) -> None:
    store = Held(tmp_path / "lone-async.db", queued=0)
    try:
        result = run_on_counting_loop(savegame.arun(counter, {}, store=store))
        assert set(store.batches) == {1}  # the plain put, no savepoint
        assert CountingLoop.hops == len(store.batches) == STEPS  # the first one made the run
        assert result.state["n"] == STEPS
    finally:
        store.close()


def test_a_failed_loop_batch_fails_each_run_in_it_and_each_resumes(held: Held) -> None:
    held.queued = 7
    held.fail_next_batch = OSError("disk I/O error")

    async def all_runs() -> list[Any]:
        return await asyncio.gather(
            *(savegame.arun(counter, {}, run_id=f"f{i}", store=held) for i in range(8)),
            return_exceptions=True,
        )

    results = asyncio.run(all_runs())
    failed = [f"f{i}" for i, got in enumerate(results) if isinstance(got, BaseException)]
    assert len(failed) == 7, results  # the held run's own write went alone, the batch failed
    for i, got in enumerate(results):
        if isinstance(got, BaseException):
            assert isinstance(got, CheckpointWriteError)
            assert got.run_id == f"f{i}"
            assert "disk I/O error" in str(got.__cause__ or got)
    # None of the failed batch was written: each run goes on from its last durable checkpoint.
    for run_id in failed:
        assert savegame.client.get_run(run_id, store=held).step == 0
        done = savegame.resume(run_id, store=held)
        assert done.state == {"n": STEPS, "log": list(range(1, STEPS + 1))}


def test_a_lost_lease_in_a_loop_batch_fails_only_its_run(tmp_path: Path) -> None:
    store = Held(tmp_path / "lease-async.db", queued=3)
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

    async def all_runs() -> list[Any]:
        return await asyncio.gather(
            *(savegame.arun(counter, {}, run_id=f"l{i}", store=store) for i in range(4)),
            return_exceptions=True,
        )

    try:
        results = dict(zip([f"l{i}" for i in range(4)], asyncio.run(all_runs()), strict=True))
        assert stolen
        outcome = {run_id: type(got).__name__ for run_id, got in results.items()}
        assert outcome[stolen[0]] == "LeaseLostError", outcome
        others = [r for r in results if r != stolen[0]]
        assert all(results[r].status is RunStatus.COMPLETED for r in others), outcome
    finally:
        store.close()


def test_a_run_cancelled_in_a_loop_batch_strands_no_one(tmp_path: Path) -> None:
    # The run whose write leads is cancelled while the io thread writes: the runs
    # queued behind it still get their batch, and every run finishes or resumes.
    store = Held(tmp_path / "cancel.db", queued=5)

    async def all_runs() -> list[Any]:
        tasks = [
            asyncio.ensure_future(savegame.arun(counter, {}, run_id=f"c{i}", store=store))
            for i in range(6)
        ]
        while store.batches == [] and not any(t.done() for t in tasks):
            await asyncio.sleep(0)  # until the first write is held in the io thread
            if _commit.group_of(store) is not None and _commit.group_of(store).waiting() >= 5:  # type: ignore[union-attr]
                break
        tasks[0].cancel()
        return await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 60)

    try:
        results = asyncio.run(all_runs())
        assert isinstance(results[0], asyncio.CancelledError), results
        for got in results[1:]:
            assert not isinstance(got, BaseException), results
            assert got.state == {"n": STEPS, "log": list(range(1, STEPS + 1))}
        assert max(store.batches) == 5, store.batches
        # The cancelled run's first checkpoint was written all the same; it resumes.
        done = savegame.resume("c0", store=store)
        assert done.state == {"n": STEPS, "log": list(range(1, STEPS + 1))}
    finally:
        store.close()


def test_blobs_pruned_behind_a_loop_batchs_back_are_sent_again(tmp_path: Path) -> None:
    # This process believes a large value's blob stored; a prune elsewhere removed it.
    # The run's put in a loop batch is refused (MissingBlobsError), asked again and
    # re-sent alone; the others in the batch are written, and every run completes.
    store = Held(tmp_path / "blobs.db", queued=0)
    doc = "".join(f"line {i} of a long shared document\n" for i in range(3000))
    with_doc = Workflow("group-doc")

    @with_doc.step(entry=True)
    def put_doc(state: dict[str, Any], ctx: object) -> tuple[dict[str, Any], str]:
        return {"doc": doc}, END

    try:
        savegame.run(with_doc, {}, run_id="first", store=store)
        store.hold(3)
        with sqlite3.connect(tmp_path / "blobs.db") as db:
            db.execute("DELETE FROM checkpoint_blobs")
            db.execute("DELETE FROM blobs")

        async def all_runs() -> list[Any]:
            # A run without the value leads (held); the three with it queue behind it.
            lead = asyncio.ensure_future(savegame.arun(counter, {}, run_id="lead", store=store))
            while not store._held.is_set():
                await asyncio.sleep(0.001)
            docs = (savegame.arun(with_doc, {}, run_id=f"b{i}", store=store) for i in range(3))
            done = await asyncio.gather(lead, *docs)
            return done[1:]

        results = asyncio.run(all_runs())
        assert all(r.state == {"doc": doc} for r in results)
        assert 3 in store.batches, store.batches
        assert "MissingBlobsError" in store.refused, store.refused
        for r in results:
            assert savegame.client.get_checkpoint(r.run_id, store=store).state == {"doc": doc}
    finally:
        store.close()


def test_a_loop_whose_io_threads_are_gone_fails_its_saves_and_recovers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # At interpreter exit the io pool refuses work: the save fails with that error
    # rather than wait for ever, and the loop's committer is not left believing a hop
    # is out (the next save, once threads are back, goes through).
    import concurrent.futures

    store = savegame.open_store(f"sqlite:///{tmp_path / 'gone.db'}")
    gone = concurrent.futures.ThreadPoolExecutor(1)
    gone.shutdown()

    async def both() -> tuple[BaseException | None, Any]:
        monkeypatch.setattr(_commit, "io_pool", lambda: gone)
        try:
            await savegame.arun(counter, {}, run_id="gone", store=store)
        except CheckpointWriteError as exc:
            failed: BaseException | None = exc
        else:
            failed = None
        monkeypatch.undo()
        return failed, await savegame.arun(counter, {}, run_id="back", store=store)

    try:
        failed, back = asyncio.run(both())
        assert failed is not None and "shutdown" in str(failed.__cause__), failed
        assert back.state["n"] == STEPS
        assert savegame.resume("gone", store=store).state["n"] == STEPS
    finally:
        store.close()
