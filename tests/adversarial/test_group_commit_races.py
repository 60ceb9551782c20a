"""Attacks on GroupCommit: many threads racing through one committer on a real SQLite
file, refusals and failed batches among them, and a store that breaks the batch
contract. Whatever happens, no waiter may hang: every thread is joined with a
generous timeout and the test fails if one is still alive.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from savegame.errors import LeaseLostError
from savegame.model import CheckpointRecord, Lease
from savegame.runtime._commit import GroupCommit
from savegame.stores import SqliteStore
from savegame.stores.base import Put, PutResult
from savegame.testing.builders import OTHER_OWNER, OWNER, make_run, next_record

JOIN_S = 60.0


def _start(store: SqliteStore) -> tuple[CheckpointRecord, Lease]:
    run, first = make_run()
    return first, store.create_run(run, first, owner=OWNER, ttl=60.0)


def _race(n: int, body: Callable[[int], None]) -> list[BaseException]:
    """``body(i)`` on n threads at once; the exceptions they raised. Fails on a hang."""
    errors: list[BaseException] = []
    gate = threading.Barrier(n)

    def go(i: int) -> None:
        try:
            gate.wait()
            body(i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=go, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_S)
    assert not any(t.is_alive() for t in threads), "a waiter hung in GroupCommit"
    return errors


def test_many_threads_race_through_one_committer(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'race.db'}"
    group = GroupCommit(max_batch=7)  # batches cut short: leaders hand over often
    setup = SqliteStore.from_url(url)
    started = [_start(setup) for _ in range(16)]
    setup.close()
    heads: list[CheckpointRecord | None] = [None] * 16

    def body(i: int) -> None:
        store = SqliteStore.from_url(url)  # each run its own handle, as in the runtime
        try:
            head, lease = started[i]
            for _ in range(25):
                rec = next_record(head)
                assert isinstance(group.put(store, Put(rec, lease.token)), PutResult)
                head = rec
            heads[i] = head
        finally:
            store.close()

    assert _race(16, body) == []
    check = SqliteStore.from_url(url)
    try:
        for (first, _), head in zip(started, heads, strict=True):
            assert head is not None
            assert check.get_run(first.run_id).head_checkpoint_id == head.checkpoint_id
            assert check.get_run(first.run_id).step == 25
    finally:
        check.close()


def test_a_refused_put_raises_in_its_own_thread_alone(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'refused.db'}"
    group = GroupCommit()
    setup = SqliteStore.from_url(url)
    started = [_start(setup) for _ in range(12)]
    # Every third run was taken over by another worker: its puts are fenced.
    for first, lease in started[::3]:
        setup.acquire_lease(first.run_id, OTHER_OWNER, 60.0, takeover_token=lease.token)
    setup.close()
    refused: list[int] = []

    def body(i: int) -> None:
        store = SqliteStore.from_url(url)
        try:
            head, lease = started[i]
            for _ in range(10):
                rec = next_record(head)
                try:
                    group.put(store, Put(rec, lease.token))
                except LeaseLostError:
                    refused.append(i)
                    continue
                head = rec
        finally:
            store.close()

    assert _race(12, body) == []
    assert sorted(set(refused)) == list(range(0, 12, 3))
    assert len(refused) == 4 * 10


def test_a_batch_through_a_closed_handle_fails_its_waiters_and_the_next_one_goes_on(
    tmp_path: Path,
) -> None:
    # One run's handle is closed under it: a batch it leads fails whole (each waiter in
    # it hears the error). Every outcome must match the store, and nobody may hang.
    url = f"sqlite:///{tmp_path / 'closed.db'}"
    group = GroupCommit()
    setup = SqliteStore.from_url(url)
    started = [_start(setup) for _ in range(10)]
    setup.close()
    outcomes: dict[str, bool] = {}
    lock = threading.Lock()

    def body(i: int) -> None:
        store = SqliteStore.from_url(url)
        if i == 0:
            store.close()
        try:
            head, lease = started[i]
            for _ in range(10):
                rec = next_record(head)
                try:
                    group.put(store, Put(rec, lease.token))
                    ok = True
                except Exception:
                    ok = False
                with lock:
                    outcomes[rec.checkpoint_id] = ok
                if ok:
                    head = rec
        finally:
            store.close()

    assert _race(10, body) == []
    check = SqliteStore.from_url(url)
    try:
        for cid, ok in outcomes.items():
            try:
                check.get_checkpoint(cid)
                stored = True
            except Exception:
                stored = False
            assert stored == ok, cid
        # The committer still works for a live handle.
        first, lease = started[1]
        head = check.get_checkpoint(check.get_run(first.run_id).head_checkpoint_id)
        assert isinstance(group.put(check, Put(next_record(head), lease.token)), PutResult)
    finally:
        check.close()


class _BrokenBatches:
    """A third-party store that breaks the batch contract: its put_checkpoints answers
    for fewer puts than it was given, or raises a BaseException. Everything else is a
    real SQLite store's."""

    def __init__(self, inner: SqliteStore, how: str) -> None:
        self._inner = inner
        self._how = how

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def put_checkpoints(self, puts: Sequence[Put]) -> list[PutResult | Exception]:
        if self._how == "raise":
            raise SystemExit("the store's thread was told to exit")
        return self._inner.put_checkpoints(puts)[:-1]


@pytest.mark.parametrize("how", ["short", "raise"])
def test_a_store_breaking_the_batch_contract_hangs_no_waiter(tmp_path: Path, how: str) -> None:
    url = f"sqlite:///{tmp_path / 'broken.db'}"
    group = GroupCommit()
    setup = SqliteStore.from_url(url)
    started = [_start(setup) for _ in range(8)]
    setup.close()
    failed: list[int] = []

    def body(i: int) -> None:
        store = _BrokenBatches(SqliteStore.from_url(url), how)
        try:
            head, lease = started[i]
            for _ in range(10):
                rec = next_record(head)
                try:
                    group.put(store, Put(rec, lease.token))  # type: ignore[arg-type]
                    head = rec
                except BaseException:
                    failed.append(i)
                    head = store.get_checkpoint(store.get_run(rec.run_id).head_checkpoint_id)
        finally:
            store.close()

    assert _race(8, body) == []
    # After all that, the committer is not stuck "writing": a lone put goes through.
    store = SqliteStore.from_url(url)
    try:
        first, lease = started[0]
        head = store.get_checkpoint(store.get_run(first.run_id).head_checkpoint_id)
        assert isinstance(group.put(store, Put(next_record(head), lease.token)), PutResult)
    finally:
        store.close()


def test_event_loops_and_threads_race_through_one_committer(tmp_path: Path) -> None:
    # Four threads each run an event loop of 8 arun()s, four more run sync runs, all on
    # one SQLite file: the loops' batches (LoopCommit) and the threads' puts meet in
    # one GroupCommit. Every run ends as a run alone would, each checkpoint once.
    import asyncio

    import savegame
    from savegame import END, Workflow

    wf = Workflow("race-loops")

    @wf.step(entry=True)
    async def tick(state: dict[str, Any], ctx: object) -> tuple[dict[str, Any], str]:
        n = state.get("n", 0) + 1
        return {"n": n, "log": [*state.get("log", []), n]}, ("tick" if n < 10 else END)

    url = f"sqlite:///{tmp_path / 'loops.db'}"
    shared = savegame.open_store(url)
    finished: list[Any] = []

    def body(i: int) -> None:
        if i < 4:

            async def runs() -> list[Any]:
                return await asyncio.gather(
                    *(savegame.arun(wf, {}, run_id=f"L{i}-{k}", store=shared) for k in range(8))
                )

            finished.extend(asyncio.run(runs()))
        else:
            own = savegame.open_store(url)  # a worker slot's own handle
            try:
                finished.append(savegame.run(wf, {}, run_id=f"T{i}", store=own))
            finally:
                own.close()

    try:
        assert _race(8, body) == []
        assert len(finished) == 4 * 8 + 4
        for result in finished:
            assert result.state == {"n": 10, "log": list(range(1, 11))}
            steps = [h.step for h in savegame.client.history(result.run_id, store=shared)]
            assert sorted(steps) == list(range(11))
    finally:
        shared.close()
