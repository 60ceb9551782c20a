"""A property of the event loops' committers (runtime/_commit.py ``LoopCommit``): whatever
the interleaving of two loops' runs, the uploads that fail, the puts the store refuses
and the batches that fail whole, every save hears exactly its own outcome, each put
reaches the store at most once, and no run is left waiting.

The store is a stand-in that decides each put's fate by its name; the committer, the
io threads, the thread-level ``GroupCommit`` and the event loop are the real ones.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from savegame.runtime._commit import GroupCommit
from savegame.stores.base import Put, PutResult


class Refused(Exception):
    """The store's refusal of one put (a lost lease, say)."""


class BatchFailed(OSError):
    """A transaction that failed whole (the commit, the connection)."""


@dataclass
class Decisions:
    """What the stand-in store does: refuse the puts named, fail the batches whose
    number (in call order) is listed; and what it saw."""

    refuse: set[str]
    fail_batches: set[int]
    calls: int = 0
    written: list[str] = field(default_factory=list)
    answers: dict[int, str] = field(default_factory=dict)
    """id of each PutResult answered -> the put's name: a save must get its own back."""
    in_failed: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Store:
    """Just enough of a BatchStore for GroupCommit: put_checkpoint, put_checkpoints."""

    def __init__(self, decide: Decisions) -> None:
        self.decide = decide

    def _one(self, name: str) -> PutResult | Exception:
        if name in self.decide.refuse:
            return Refused(name)
        self.decide.written.append(name)
        answer = PutResult(cancel_requested=False)
        self.decide.answers[id(answer)] = name
        return answer

    def put_checkpoint(self, record: Any, **kwargs: Any) -> PutResult:
        time.sleep(0.001)
        with self.decide.lock:
            self.decide.calls += 1
            got = self._one(record)
        if isinstance(got, Exception):
            raise got
        return got

    def put_checkpoints(self, puts: Sequence[Put]) -> list[PutResult | Exception]:
        time.sleep(0.001)  # a transaction takes time: the other loop's batch queues behind
        with self.decide.lock:
            self.decide.calls += 1
            if self.decide.calls in self.decide.fail_batches:
                self.decide.in_failed |= {p.record for p in puts}
                raise BatchFailed(f"batch {self.decide.calls}")
            return [self._one(p.record) for p in puts]


@dataclass
class Save:
    """One save as ``LoopCommit`` takes it (the ``Job`` protocol)."""

    store: Any
    name: str
    upload_fails: bool
    finished: list[str]
    answers: dict[int, str]

    def prepare(self) -> Put:
        if self.upload_fails:
            raise ValueError(f"upload {self.name}")
        return Put(self.name, 1)  # type: ignore[arg-type]  # the stand-in reads the name

    def finish(self, outcome: PutResult | Exception, seconds: float) -> PutResult:
        if isinstance(outcome, Exception):
            raise outcome
        if self.answers.get(id(outcome)) != self.name:
            raise AssertionError(f"{self.name} was handed another put's answer")
        self.finished.append(self.name)
        return outcome


runs_strategy = st.lists(
    st.lists(
        st.tuples(st.booleans(), st.booleans(), st.integers(0, 3)),  # upload fails, refused, yields
        min_size=1,
        max_size=5,
    ),
    min_size=1,
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(
    runs=runs_strategy, fail_batches=st.sets(st.integers(1, 20), max_size=4), cut=st.integers(1, 8)
)
def test_every_save_hears_its_own_outcome_and_none_waits(
    runs: list[list[tuple[bool, bool, int]]], fail_batches: set[int], cut: int
) -> None:
    refuse = {
        f"r{i}s{k}" for i, saves in enumerate(runs) for k, (_, no, _) in enumerate(saves) if no
    }
    decide = Decisions(refuse, fail_batches)
    store = Store(decide)
    group = GroupCommit(max_batch=cut)  # short batches: the queue is cut and handed on
    finished: list[str] = []
    heard: dict[str, str] = {}

    async def run(i: int, saves: list[tuple[bool, bool, int]]) -> None:
        on_loop = group.on_loop(asyncio.get_running_loop())
        for k, (upload_fails, _, yields) in enumerate(saves):
            for _ in range(yields):
                await asyncio.sleep(0)  # the runs reach their boundaries in other orders
            name = f"r{i}s{k}"
            try:
                await on_loop.put(Save(store, name, upload_fails, finished, decide.answers))
            except ValueError:
                heard[name] = "upload"
            except Refused as exc:
                assert str(exc) == name  # its own refusal, not a neighbour's
                heard[name] = "refused"
            except BatchFailed:
                heard[name] = "batch"
            else:
                heard[name] = "written"

    async def runs_of(loop_no: int) -> None:
        mine = [run(i, s) for i, s in enumerate(runs) if i % 2 == loop_no]
        await asyncio.wait_for(asyncio.gather(*mine), 30)

    # Two event loops in two threads: their batches meet in the one GroupCommit, several
    # waiters to a transaction, each handed back its own slice of the outcomes.
    errors: list[BaseException] = []

    def loop_thread(loop_no: int) -> None:
        try:
            asyncio.run(runs_of(loop_no))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=loop_thread, args=(n,)) for n in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a run was left waiting"
    assert errors == []

    for i, saves in enumerate(runs):
        for k, (upload_fails, refused, _) in enumerate(saves):
            name = f"r{i}s{k}"
            if upload_fails:
                expected = "upload"  # never reaches the store
            elif name in decide.in_failed:
                expected = "batch"
            elif refused:
                expected = "refused"
            else:
                expected = "written"
            assert heard[name] == expected, (name, heard[name], expected)
    written = [n for n, how in heard.items() if how == "written"]
    # Each put reached the store once at most; the notice ran for exactly the written ones.
    assert sorted(decide.written) == sorted(set(decide.written)) == sorted(written)
    assert sorted(finished) == sorted(written)
    assert not any(n in decide.written for n in decide.in_failed)
