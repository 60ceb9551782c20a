"""The store contract for waiting runs: wake times, events, and claims of woken runs.

Part of :class:`savegame.testing.contract.StoreContract`; subclass that, not this.
Every test skips on a store that does not claim ``Capabilities.waits``. What it pins
is what ``ctx.sleep``, ``ctx.wait_for`` and child runs rely on: a run checkpointed
waiting is claimable only once woken (its time has come, or enough of the events it
waits for are pending), an event sent twice under one request id is kept once, an
event that arrives before or while the run goes to sleep still wakes it, and a
child's end reaches its parent in the child's own checkpoint transaction.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from datetime import timedelta
from functools import partial

import pytest

from savegame.errors import NotFoundError
from savegame.ids import new_id
from savegame.model import (
    VERSION_KEY,
    WOKEN,
    CheckpointRecord,
    EffectKind,
    EffectRecord,
    EffectStatus,
    Lease,
    RunInfo,
    RunStatus,
    Waiting,
    utcnow,
)
from savegame.stores.base import Store
from savegame.testing._contract_base import TTL, ContractBase
from savegame.testing.builders import OTHER_OWNER, OWNER, make_effect, make_run, next_record
from savegame.testing.together import together

__all__ = ["WaitsContract"]

RACES = 20
"""Rounds of the race between a run going to sleep and an event for it."""


def event(run_id: str, topic: str, key: str | None = None, value: bytes = b"1") -> EffectRecord:
    """A pending event entry for ``run_id`` (as ``savegame send`` journals one)."""
    return make_effect(
        run_id, f"event:{topic}:{key or new_id()}", kind=EffectKind.EVENT, name=topic,
        step=0, node="(event)", arguments=value,
    )  # fmt: skip


class WaitsContract(ContractBase):
    """put_checkpoint(waiting=..., events=...), deliver_event, and claim_run of woken runs."""

    @pytest.fixture(autouse=True)
    def _claims_waits(self, store: Store) -> None:
        if not store.capabilities.waits:
            pytest.skip(f"{type(store).__name__} does not claim waits")

    def sleep(
        self,
        store: Store,
        waiting: Waiting,
        started: tuple[RunInfo, CheckpointRecord, Lease] | None = None,
    ) -> tuple[RunInfo, CheckpointRecord, Lease]:
        """A run checkpointed waiting, its lease released (as the runner leaves it)."""
        run, first, lease = started or self.start(store)
        record = next_record(first, status=RunStatus.WAITING)
        store.put_checkpoint(record, lease_token=lease.token, waiting=waiting)
        store.release_lease(run.run_id, lease.token)
        return run, record, lease

    # -- wake times -----------------------------------------------------------------------
    def test_a_run_waiting_until_later_is_not_claimed_before(self, store: Store) -> None:
        until = utcnow() + timedelta(hours=1)
        run, _, _ = self.sleep(store, Waiting(until=until))
        got = store.get_run(run.run_id)
        assert (got.status, got.wake_at, got.lease) == (RunStatus.WAITING, until, None)
        assert [r.run_id for r in store.list_runs(status=RunStatus.WAITING)] == [run.run_id]
        assert store.claim_run(OWNER, TTL) is None

    def test_a_run_whose_time_has_come_is_claimed(self, store: Store) -> None:
        run, record, lease = self.sleep(store, Waiting(until=utcnow() - timedelta(seconds=1)))
        claimed = store.claim_run(OTHER_OWNER, TTL)
        assert claimed is not None and claimed.run_id == run.run_id
        assert claimed.token == lease.token + 1
        assert store.claim_run(OWNER, TTL) is None  # its lease lives now
        # The claimer goes on: a running record clears the wake time.
        store.put_checkpoint(next_record(record), lease_token=claimed.token)
        got = store.get_run(run.run_id)
        assert (got.status, got.wake_at) == (RunStatus.RUNNING, None)

    def test_woken_runs_go_before_queued_ones_soonest_first(self, store: Store) -> None:
        run, first = make_run()
        store.create_run(run, first, owner=None, ttl=TTL)  # queued, older than both
        now = utcnow()
        later, _, _ = self.sleep(store, Waiting(until=now - timedelta(seconds=1)))
        sooner, _, _ = self.sleep(store, Waiting(until=now - timedelta(seconds=5)))
        order = [store.claim_run(OWNER, TTL) for _ in range(3)]
        assert [c.run_id if c else None for c in order] == [
            sooner.run_id, later.run_id, run.run_id,
        ]  # fmt: skip

    def test_claims_of_woken_runs_follow_the_workflow_filter(self, store: Store) -> None:
        run, _, _ = self.sleep(store, Waiting(until=utcnow() - timedelta(seconds=1)))
        assert store.claim_run(OWNER, TTL, workflows=["other"]) is None
        claimed = store.claim_run(OWNER, TTL, workflows=[run.workflow])
        assert claimed is not None and claimed.run_id == run.run_id

    def test_claims_of_woken_runs_follow_the_version_filter(self, store: Store) -> None:
        run, first = make_run(metadata={VERSION_KEY: "v1"})
        started = (run, first, store.create_run(run, first, owner=OWNER, ttl=TTL))
        self.sleep(store, Waiting(until=utcnow() - timedelta(seconds=1)), started)
        assert store.claim_run(OWNER, TTL, versions=["v2"]) is None
        claimed = store.claim_run(OWNER, TTL, versions=["v2", "v1"])
        assert claimed is not None and claimed.run_id == run.run_id

    def test_a_waiting_record_and_its_status_must_agree(self, store: Store) -> None:
        _, first, lease = self.start(store)
        with pytest.raises(ValueError):
            store.put_checkpoint(next_record(first, status=RunStatus.WAITING), lease_token=1)
        with pytest.raises(ValueError):
            store.put_checkpoint(next_record(first), lease_token=lease.token, waiting=Waiting())
        with pytest.raises(ValueError):  # 2 of 1 topic can never be
            store.put_checkpoint(
                next_record(first, status=RunStatus.WAITING),
                lease_token=lease.token,
                waiting=Waiting(topics=("a",), need=2),
            )
        assert store.latest_checkpoint(first.run_id) == first

    # -- events ---------------------------------------------------------------------------
    def test_an_event_wakes_a_run_waiting_for_its_topic(self, store: Store) -> None:
        run, _, _ = self.sleep(store, Waiting(topics=("webhook",), need=1))
        assert store.get_run(run.run_id).wake_at is None
        assert store.claim_run(OWNER, TTL) is None
        other = store.deliver_event(event(run.run_id, "another topic"))
        assert other.delivered and store.claim_run(OWNER, TTL) is None
        sent = event(run.run_id, "webhook")
        delivery = store.deliver_event(sent)
        assert delivery.delivered and delivery.entry == sent
        assert store.get_effect(run.run_id, sent.request_id) == sent
        assert store.get_run(run.run_id).wake_at == WOKEN
        claimed = store.claim_run(OWNER, TTL)
        assert claimed is not None and claimed.run_id == run.run_id

    def test_an_event_sent_before_the_wait_wakes_the_run_as_it_sleeps(self, store: Store) -> None:
        started = self.start(store)
        store.deliver_event(event(started[0].run_id, "webhook"))
        run, _, _ = self.sleep(
            store, Waiting(until=utcnow() + timedelta(days=2), topics=("webhook",), need=1), started
        )
        assert store.get_run(run.run_id).wake_at == WOKEN
        assert store.claim_run(OWNER, TTL) is not None

    def test_a_second_delivery_of_one_request_id_is_dropped(self, store: Store) -> None:
        run, _, _ = self.start(store)
        first = event(run.run_id, "webhook", key="k1", value=b'"first"')
        again = event(run.run_id, "webhook", key="k1", value=b'"second"')
        assert store.deliver_event(first).delivered
        repeat = store.deliver_event(again)
        assert (repeat.delivered, repeat.entry) == (False, first)
        assert store.list_effects(run.run_id, kinds=[EffectKind.EVENT]) == [first]

    def test_a_run_waiting_for_all_of_its_topics_wakes_with_the_last(self, store: Store) -> None:
        run, _, _ = self.sleep(store, Waiting(topics=("a", "b", "c"), need=3))
        store.deliver_event(event(run.run_id, "a"))
        store.deliver_event(event(run.run_id, "a"))  # twice one topic is still one topic
        store.deliver_event(event(run.run_id, "b"))
        assert store.get_run(run.run_id).wake_at is None
        store.deliver_event(event(run.run_id, "c"))
        assert store.get_run(run.run_id).wake_at == WOKEN

    def test_a_taken_event_no_longer_wakes(self, store: Store) -> None:
        started = self.start(store)
        run, _, lease = started
        sent = event(run.run_id, "webhook")
        store.deliver_event(sent)
        # The run takes it (settles it done, fenced), then waits for the topic again.
        store.record_result(
            run.run_id, sent.request_id, status=EffectStatus.DONE, checksum="taken",
            metadata={"taken_by": "w1"}, lease_token=lease.token,
        )  # fmt: skip
        self.sleep(store, Waiting(topics=("webhook",), need=1), started)
        assert store.get_run(run.run_id).wake_at is None
        store.deliver_event(event(run.run_id, "webhook"))
        assert store.get_run(run.run_id).wake_at == WOKEN

    def test_events_wake_no_run_that_is_not_waiting(self, store: Store) -> None:
        run, first, lease = self.start(store)
        store.deliver_event(event(run.run_id, "webhook"))
        assert store.get_run(run.run_id).wake_at is None
        store.put_checkpoint(next_record(first), lease_token=lease.token)
        assert store.get_run(run.run_id).wake_at is None

    def test_delivery_refuses_what_is_not_a_pending_event(self, store: Store) -> None:
        run, _, _ = self.start(store)
        with pytest.raises(NotFoundError):
            store.deliver_event(event("no-such-run-" + new_id(), "webhook"))
        with pytest.raises(ValueError):
            store.deliver_event(make_effect(run.run_id))  # a write, not an event
        taken = make_effect(run.run_id, kind=EffectKind.EVENT, status=EffectStatus.DONE)
        with pytest.raises(ValueError):
            store.deliver_event(taken)
        assert store.list_effects(run.run_id) == []

    def test_events_with_a_checkpoint_reach_other_runs_in_its_transaction(
        self, store: Store
    ) -> None:
        parent, _, _ = self.sleep(store, Waiting(topics=("child",), need=1))
        child, first, lease = self.start(store)
        end = event(parent.run_id, "child", key="end")
        gone = event("pruned-parent-" + new_id(), "child", key="end")
        done = next_record(first, status=RunStatus.COMPLETED)
        store.put_checkpoint(done, lease_token=lease.token, events=[end, gone])
        assert store.get_effect(parent.run_id, end.request_id) == end
        assert store.get_run(parent.run_id).wake_at == WOKEN
        assert store.latest_checkpoint(child.run_id) == done
        with pytest.raises(ValueError):
            store.put_checkpoint(
                next_record(done), lease_token=lease.token, events=[make_effect(parent.run_id)]
            )

    def test_an_event_racing_the_run_going_to_sleep_always_wakes_it(self, store: Store) -> None:
        # Two handles where the store is shared across processes, else the one.
        two = self._second_handle(store) if store.capabilities.multi_process else nullcontext(store)
        with two as other:
            for _ in range(RACES):
                run, first, lease = self.start(store)
                record = next_record(first, status=RunStatus.WAITING)
                sleep = partial(
                    store.put_checkpoint,
                    record,
                    lease_token=lease.token,
                    waiting=Waiting(topics=("webhook",), need=1),
                )
                send = partial(other.deliver_event, event(run.run_id, "webhook"))
                calls: list[Callable[[], object]] = [sleep, send]
                outcomes = together(calls)
                assert not any(isinstance(o, BaseException) for o in outcomes), outcomes
                assert store.get_run(run.run_id).wake_at == WOKEN

    def test_a_woken_run_with_a_live_lease_is_not_claimed(self, store: Store) -> None:
        run, first, lease = self.start(store)
        store.put_checkpoint(
            next_record(first, status=RunStatus.WAITING),
            lease_token=lease.token,
            waiting=Waiting(until=utcnow() - timedelta(seconds=1)),
        )
        # The runner that wants to block holds its lease while it waits.
        assert store.claim_run(OTHER_OWNER, TTL) is None
        store.release_lease(run.run_id, lease.token)
        assert store.claim_run(OTHER_OWNER, TTL) is not None
