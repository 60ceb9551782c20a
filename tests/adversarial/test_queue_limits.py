"""Attacks on queues: any sequence of claims, releases, expiries and re-declared limits
never has more runs of a queue leased than its limits allow, and a claim is refused only
when the queue is full or empty; hostile names, priorities and keys are refused clearly."""

from __future__ import annotations

import tempfile
import time
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from savegame.errors import ConfigurationError
from savegame.model import Lease, RunStatus
from savegame.stores import Enqueue, Queue, SqliteStore
from savegame.testing.builders import make_run

OWNERS = ("a:1:1", "b:2:1", "c:3:1")
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("claim"), st.sampled_from(OWNERS)),
        st.tuples(st.just("release"), st.integers(0, 20)),
        st.tuples(st.just("declare"), st.integers(1, 4)),
    ),
    max_size=30,
)


def _queued(store: SqliteStore, queue: str, priority: int = 0) -> str:
    run, first = make_run()
    first = replace(first, header=replace(first.header, status=RunStatus.QUEUED))
    store.create_run(run, first, owner=None, ttl=30, queue=Enqueue(queue, priority))
    return run.run_id


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=OPS, runs=st.integers(0, 8), per_worker=st.one_of(st.none(), st.integers(1, 3)))
def test_no_sequence_of_claims_passes_a_queue_s_limits(
    ops: list[tuple[str, object]], runs: int, per_worker: int | None
) -> None:
    with tempfile.TemporaryDirectory() as folder, SqliteStore(Path(folder) / "q.db") as store:
        concurrency = 2
        store.declare_queue(Queue("q", concurrency=concurrency, worker_concurrency=per_worker))
        waiting = {_queued(store, "q", priority=i % 3) for i in range(runs)}
        held: list[Lease] = []
        for op, arg in ops:
            if op == "declare":
                concurrency = int(arg)  # type: ignore[call-overload]
                store.declare_queue(
                    Queue("q", concurrency=concurrency, worker_concurrency=per_worker)
                )
                continue
            if op == "release":
                if held:
                    lease = held.pop(int(arg) % len(held))  # type: ignore[call-overload]
                    store.release_lease(lease.run_id, lease.token)
                    waiting.add(lease.run_id)  # its worker stopped: runnable again
                continue
            owner = str(arg)
            mine = sum(1 for h in held if h.owner == owner)
            room = len(held) < concurrency and (per_worker is None or mine < per_worker)
            got = store.claim_run(owner, 30, queues=["q"])
            if room and waiting:
                assert got is not None and got.run_id in waiting
                waiting.discard(got.run_id)
                held.append(got)
            else:
                assert got is None
            (stats,) = store.list_queues()
            assert stats.running == len(held) and stats.queued == len(waiting)


def test_an_expired_lease_frees_its_place_and_is_no_new_start(tmp_path: Path) -> None:
    with SqliteStore(tmp_path / "q.db") as store:
        store.declare_queue(Queue("q", concurrency=1, limit=1, period=3600))
        only = _queued(store, "q")
        assert store.claim_run(OWNERS[0], 0.05) is not None
        time.sleep(0.1)  # that worker died: its lease ran out
        again = store.claim_run(OWNERS[1], 30)
        assert again is not None and again.run_id == only  # taken over, not a second start
        assert store.list_queues()[0].started == 1


@pytest.mark.parametrize(
    ("enqueue", "match"),
    [
        (Enqueue(""), "queue name"),
        (Enqueue("x" * 201), "queue name"),
        (Enqueue(3), "queue name"),  # type: ignore[arg-type]
        (Enqueue("q", priority=True), "priority"),
        (Enqueue("q", priority=2**40), "priority out of range"),
        (Enqueue("q", priority=1.5), "priority"),  # type: ignore[arg-type]
        (Enqueue("q", dedup_key=""), "dedup key"),
    ],
)
def test_hostile_enqueues_are_refused_before_anything_is_written(
    tmp_path: Path, enqueue: Enqueue, match: str
) -> None:
    with SqliteStore(tmp_path / "q.db") as store:
        store.declare_queue(Queue("q"))
        run, first = make_run()
        with pytest.raises(ConfigurationError, match=match):
            store.create_run(run, first, owner=None, ttl=30, queue=enqueue)
        assert store.list_runs() == []


@pytest.mark.parametrize(
    "queue",
    [
        Queue("q", concurrency=True),  # type: ignore[arg-type]
        Queue("q", limit=-1),
        Queue("q", limit=3, period=float("nan")),
        Queue("q", period=0),
        Queue("", concurrency=1),
    ],
)
def test_hostile_limits_are_refused(tmp_path: Path, queue: Queue) -> None:
    with SqliteStore(tmp_path / "q.db") as store:
        with pytest.raises(ConfigurationError):
            store.declare_queue(queue)
        assert store.list_queues() == []


def test_a_worker_given_one_string_for_queues_is_told(tmp_path: Path) -> None:
    from savegame import Worker

    with pytest.raises(ConfigurationError, match="list of queue names"):
        Worker(f"sqlite:///{tmp_path / 'q.db'}", queues="emails")  # type: ignore[arg-type]
    with SqliteStore(tmp_path / "q.db") as store, pytest.raises(ConfigurationError):
        store.claim_run(OWNERS[0], 30, queues="emails")
