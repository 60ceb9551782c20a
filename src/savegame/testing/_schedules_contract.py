"""The store contract for schedules: the record, the cursor, and firing exactly once.

Part of :class:`savegame.testing.contract.StoreContract`; subclass that, not this.
Every test skips on a store that does not claim ``Capabilities.schedules``. What it pins
is what a fleet of workers relies on: of several handles firing one occurrence at once
exactly one creates its run and moves the cursor, a stale or paused cursor fires
nothing, and a fired occurrence's run is queued for any worker to claim.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import cast

import pytest

from savegame.errors import ConfigurationError, ConflictError, NotFoundError
from savegame.ids import new_id
from savegame.model import CheckpointRecord, RunInfo, RunStatus, utcnow
from savegame.stores import Enqueue, Queue, QueueStore
from savegame.stores.base import Store
from savegame.stores.schedules import Missed, ScheduleRecord, ScheduleStore, schedules_of
from savegame.testing._contract_base import TTL, ContractBase
from savegame.testing.builders import OWNER, make_run
from savegame.testing.together import together

__all__ = ["SchedulesContract"]

HANDLES = 4
"""Handles racing to fire each occurrence."""
OCCURRENCES = 8
"""Occurrences of the race."""

T0 = datetime(2030, 1, 1, 9, 0, tzinfo=timezone.utc)


def make_schedule(name: str | None = None, *, next_at: datetime = T0) -> ScheduleRecord:
    """A schedule every minute, its cursor at ``next_at``."""
    now = utcnow()
    return ScheduleRecord(
        name=name or f"sched-{new_id()}", workflow="contract",
        workflow_ref="tests.workflows:contract", cron="* * * * *",
        input={"n": 1, "tags": ["a"]}, missed=Missed.LATEST, catchup_window=60.0,
        next_at=next_at, created_at=now, updated_at=now, metadata={"team": "ops"},
        checksum="c1:test",
    )  # fmt: skip


def occurrence_run(schedule: str, at: datetime) -> tuple[RunInfo, CheckpointRecord]:
    """The queued run of one occurrence, its id derived from (schedule, time)."""
    run_id = f"{schedule}:{at.strftime('%Y%m%dT%H%M%SZ')}"
    run, first = make_run(run_id=run_id, metadata={"schedule": schedule})
    first = replace(first, header=replace(first.header, status=RunStatus.QUEUED))
    return replace(run, status=RunStatus.QUEUED), first


class SchedulesContract(ContractBase):
    """put/get/list/delete/pause_schedule and fire_schedule."""

    @staticmethod
    def schedules(store: Store) -> ScheduleStore:
        """``store``'s schedules, or a skip. Not an autouse fixture: that would apply to
        every test of the suite that inherits this class, not only to these."""
        if not store.capabilities.schedules:
            pytest.skip(f"{type(store).__name__} does not claim schedules")
        return schedules_of(store)

    def test_a_schedule_round_trips_and_a_second_of_its_name_conflicts(self, store: Store) -> None:
        s = self.schedules(store)
        sched = make_schedule()
        s.put_schedule(sched)
        assert s.get_schedule(sched.name) == sched
        assert sched in s.list_schedules()
        with pytest.raises(ConflictError):
            s.put_schedule(replace(sched, cron="0 9 * * *"))
        assert s.get_schedule(sched.name).cron == "* * * * *"

    def test_replacing_a_schedule_keeps_what_it_did(self, store: Store) -> None:
        s = self.schedules(store)
        sched = make_schedule()
        s.put_schedule(sched)
        run = occurrence_run(sched.name, T0)
        s.fire_schedule(sched.name, expect_next=T0, next_at=T0 + timedelta(minutes=1), runs=[run])
        later = T0 + timedelta(hours=1)
        s.put_schedule(replace(sched, cron="0 * * * *", next_at=later, fired=0), replace=True)
        got = s.get_schedule(sched.name)
        assert (got.cron, got.next_at, got.fired, got.last_run_id) == (
            "0 * * * *", later, 1, run[0].run_id,
        )  # fmt: skip

    def test_unknown_schedules_are_not_found(self, store: Store) -> None:
        s = self.schedules(store)
        with pytest.raises(NotFoundError):
            s.get_schedule("no-such-" + new_id())
        with pytest.raises(NotFoundError):
            s.pause_schedule("no-such-" + new_id(), True)
        assert s.delete_schedule("no-such-" + new_id()) is False
        assert (
            s.fire_schedule("no-such-" + new_id(), expect_next=T0, next_at=T0 + timedelta(1))
            is None
        )

    def test_due_lists_only_unpaused_schedules_whose_cursor_has_come(self, store: Store) -> None:
        s = self.schedules(store)
        soon, later, paused = (make_schedule() for _ in range(3))
        s.put_schedule(soon)
        s.put_schedule(replace(later, next_at=T0 + timedelta(hours=1)))
        s.put_schedule(paused)
        s.pause_schedule(paused.name, True)
        due = {d.name for d in s.list_schedules(due=T0)}
        assert soon.name in due
        assert later.name not in due and paused.name not in due

    def test_firing_creates_queued_runs_and_moves_the_cursor(self, store: Store) -> None:
        s = self.schedules(store)
        sched = make_schedule()
        s.put_schedule(sched)
        runs = [occurrence_run(sched.name, T0 + timedelta(minutes=i)) for i in range(2)]
        after = T0 + timedelta(minutes=2)
        created = s.fire_schedule(sched.name, expect_next=T0, next_at=after, runs=runs)
        assert created == [r.run_id for r, _ in runs]
        got = s.get_schedule(sched.name)
        assert (got.next_at, got.fired, got.last_run_id) == (after, 2, runs[1][0].run_id)
        for run, first in runs:
            row = store.get_run(run.run_id)
            assert (row.status, row.lease, row.head_checkpoint_id) == (
                RunStatus.QUEUED, None, first.checkpoint_id,
            )  # fmt: skip
            assert store.latest_checkpoint(run.run_id) == first
        claimed = [store.claim_run(OWNER, TTL) for _ in runs]
        assert {c.run_id for c in claimed if c is not None} == {r.run_id for r, _ in runs}

    def test_a_schedule_keeps_its_queue_where_the_store_has_queues(self, store: Store) -> None:
        s = self.schedules(store)
        sched = replace(make_schedule(), queue="llm", priority=3)
        if not store.capabilities.queues:
            with pytest.raises(ConfigurationError, match="has no queues"):
                s.put_schedule(sched)
            assert sched.name not in {x.name for x in s.list_schedules()}
            return
        s.put_schedule(sched)
        assert s.get_schedule(sched.name) == sched
        s.put_schedule(replace(sched, queue="other", priority=0), replace=True)
        assert (s.get_schedule(sched.name).queue, s.get_schedule(sched.name).priority) == (
            "other", 0,
        )  # fmt: skip

    def test_firing_into_a_queue_puts_the_runs_in_it(self, store: Store) -> None:
        s = self.schedules(store)
        sched = make_schedule()
        s.put_schedule(sched)
        run = occurrence_run(sched.name, T0)
        one = T0 + timedelta(minutes=1)
        into = Enqueue("llm", 3)
        if not store.capabilities.queues:
            with pytest.raises(ConfigurationError, match="has no queues"):
                s.fire_schedule(sched.name, expect_next=T0, next_at=one, runs=[run], queue=into)
            with pytest.raises(NotFoundError):
                store.get_run(run[0].run_id)
            assert s.get_schedule(sched.name).next_at == T0
            return
        queues = cast(QueueStore, store)
        # Not declared: nothing created, the cursor where it was.
        with pytest.raises(NotFoundError, match="llm"):
            s.fire_schedule(sched.name, expect_next=T0, next_at=one, runs=[run], queue=into)
        with pytest.raises(NotFoundError):
            store.get_run(run[0].run_id)
        assert s.get_schedule(sched.name).next_at == T0
        queues.declare_queue(Queue("llm", concurrency=1))
        created = s.fire_schedule(sched.name, expect_next=T0, next_at=one, runs=[run], queue=into)
        assert created == [run[0].run_id]
        assert queues.run_queue(run[0].run_id) == into
        assert queues.list_queues()[0].queued == 1

    def test_a_stale_or_paused_cursor_fires_nothing(self, store: Store) -> None:
        s = self.schedules(store)
        sched = make_schedule()
        s.put_schedule(sched)
        stale = occurrence_run(sched.name, T0 - timedelta(minutes=1))
        assert s.fire_schedule(
            sched.name, expect_next=T0 - timedelta(minutes=1), next_at=T0, runs=[stale]
        ) is None  # fmt: skip
        s.pause_schedule(sched.name, True)
        now = occurrence_run(sched.name, T0)
        one = T0 + timedelta(minutes=1)
        assert s.fire_schedule(sched.name, expect_next=T0, next_at=one, runs=[now]) is None
        for run, _ in (stale, now):
            with pytest.raises(NotFoundError):
                store.get_run(run.run_id)
        resumed = s.pause_schedule(sched.name, False, next_at=T0 + timedelta(hours=1))
        assert (resumed.paused, resumed.next_at, resumed.fired) == (
            False, T0 + timedelta(hours=1), 0,
        )  # fmt: skip

    def test_an_occurrence_whose_run_exists_is_left_and_the_cursor_moves(
        self, store: Store
    ) -> None:
        s = self.schedules(store)
        sched = make_schedule()
        s.put_schedule(sched)
        run, first = occurrence_run(sched.name, T0)
        store.create_run(run, first, owner=None, ttl=TTL)
        again = occurrence_run(sched.name, T0)
        one = T0 + timedelta(minutes=1)
        assert s.fire_schedule(sched.name, expect_next=T0, next_at=one, runs=[again]) == []
        assert store.latest_checkpoint(run.run_id) == first
        assert s.get_schedule(sched.name).next_at == one

    def test_the_cursor_only_moves_forward(self, store: Store) -> None:
        s = self.schedules(store)
        sched = make_schedule()
        s.put_schedule(sched)
        with pytest.raises(ValueError):
            s.fire_schedule(sched.name, expect_next=T0, next_at=T0)
        assert s.get_schedule(sched.name).next_at == T0

    def test_a_deleted_schedule_is_gone_and_its_runs_stay(self, store: Store) -> None:
        s = self.schedules(store)
        sched = make_schedule()
        s.put_schedule(sched)
        run = occurrence_run(sched.name, T0)
        s.fire_schedule(sched.name, expect_next=T0, next_at=T0 + timedelta(minutes=1), runs=[run])
        assert s.delete_schedule(sched.name) is True
        assert sched.name not in {x.name for x in s.list_schedules()}
        assert store.get_run(run[0].run_id).status is RunStatus.QUEUED

    def test_handles_racing_to_fire_one_occurrence_fire_it_once(self, store: Store) -> None:
        s = self.schedules(store)
        sched = make_schedule()
        s.put_schedule(sched)
        with ExitStack() as stack:
            # Independent handles where the store is shared across processes, else the one.
            handles: list[ScheduleStore] = [
                schedules_of(stack.enter_context(self._second_handle(store)))
                if store.capabilities.multi_process
                else s
                for _ in range(HANDLES)
            ]
            cursor = T0
            for _ in range(OCCURRENCES):
                after = cursor + timedelta(minutes=1)
                # Each handle builds its own run of the occurrence (its own checkpoint id),
                # as each worker does.
                calls: list[Callable[[], list[str] | None]] = [
                    lambda h=h, at=cursor, nxt=after: h.fire_schedule(  # type: ignore[misc]
                        sched.name,
                        expect_next=at,
                        next_at=nxt,
                        runs=[occurrence_run(sched.name, at)],
                    )
                    for h in handles
                ]
                outcomes = together(calls)
                errors = [o for o in outcomes if isinstance(o, BaseException)]
                assert not errors, errors
                won = [o for o in outcomes if o is not None]
                assert len(won) == 1, outcomes
                assert won[0] == [occurrence_run(sched.name, cursor)[0].run_id]
                cursor = after
        got = s.get_schedule(sched.name)
        assert (got.next_at, got.fired) == (cursor, OCCURRENCES)
        mine = [r for r in store.list_runs(limit=1000) if r.run_id.startswith(sched.name + ":")]
        assert len(mine) == OCCURRENCES
