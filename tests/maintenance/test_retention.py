"""Retention: prune by age, count and finished-ness, never breaking the load of a kept checkpoint."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

import pytest

from savegame import RunStatus, StepContext, Store, Workflow, run, tool
from savegame.client import compensate
from savegame.errors import CompensationError, ConfigurationError, NotFoundError, StepError
from savegame.maintenance._retention import RetentionPolicy, deletion_order, plan, prune
from savegame.model import CheckpointHeader, CheckpointRecord, utcnow
from savegame.testing.builders import blob_digest, make_record, make_run, next_record

LONG_AGO = utcnow() - timedelta(days=30)


def build_run(
    store: Store,
    steps: int,
    *,
    status: RunStatus = RunStatus.RUNNING,
    keyframe_every: int = 4,
    blobs: dict[int, bytes] | None = None,
    old: bool = False,
) -> list[CheckpointRecord]:
    """A run of ``steps`` checkpoints after its input; every ``keyframe_every``-th is a keyframe."""
    run, first = make_run()
    if old:
        run = replace(run, created_at=LONG_AGO, updated_at=LONG_AGO)
        first = make_record(
            run.thread_id, run.run_id, checkpoint_id=first.checkpoint_id, created_at=LONG_AGO
        )
    lease = store.create_run(run, first, owner="t", ttl=30)
    records = [first]
    keyframe = first.checkpoint_id
    for i in range(1, steps + 1):
        last = i == steps
        base = None if i % keyframe_every == 0 else records[-1].checkpoint_id
        data = (blobs or {}).get(i)
        record = next_record(
            records[-1],
            status=status if last else RunStatus.RUNNING,
            base_id=base,
            blobs=(blob_digest(data),) if data else (),
        )
        if old:
            record = make_record(
                run.thread_id, run.run_id, checkpoint_id=record.checkpoint_id,
                parent_id=record.header.parent_id, step=i, status=record.header.status,
                next=record.header.next, base_id=base, blobs=record.header.blobs, created_at=LONG_AGO,
            )  # fmt: skip
        store.put_checkpoint(
            record, lease_token=lease.token, blobs={blob_digest(data): data} if data else None
        )
        records.append(record)
        if base is None:
            keyframe = record.checkpoint_id
    assert keyframe
    store.release_lease(run.run_id, lease.token)
    return records


def ids(store: Store, run_id: str) -> list[int]:
    return sorted(h.step for h in store.list_checkpoints(run_id))


def test_keep_last_keeps_the_bases_kept_checkpoints_need(store: Store) -> None:
    records = build_run(store, 10)  # keyframes at 4 and 8; 9 and 10 are deltas on 8
    run_id = records[0].run_id
    result = prune(RetentionPolicy(keep_last=2), store=store)
    # Keep 10 and 9 (newest two); 9 -> 8 (keyframe) must stay too.
    assert ids(store, run_id) == [8, 9, 10]
    assert result.kept_as_base == 1 and len(result.checkpoints) == 8
    for header in store.list_checkpoints(run_id):
        chain = store.get_chain(header.checkpoint_id)
        assert chain[-1].header.base_id is None  # every kept checkpoint still loads


def test_dry_run_changes_nothing(store: Store) -> None:
    records = build_run(store, 6)
    result = prune(RetentionPolicy(keep_last=1), store=store, dry_run=True)
    assert result.dry_run and result.checkpoints and result.checkpoint_bytes > 0
    assert ids(store, records[0].run_id) == list(range(7))


def test_finished_runs_go_whole_and_their_blobs_with_them(store: Store) -> None:
    shared, own = b"s" * 2000, b"o" * 3000
    old = build_run(store, 3, status=RunStatus.COMPLETED, blobs={1: own, 2: shared}, old=True)
    fresh = build_run(store, 3, status=RunStatus.COMPLETED, blobs={1: shared})
    result = prune(RetentionPolicy(finished_for=timedelta(days=7)), store=store)
    assert result.runs == [old[0].run_id]
    assert [r.run_id for r in store.list_runs()] == [fresh[0].run_id]
    assert result.blobs == 1 and result.blob_bytes == len(own)
    assert store.missing_blobs([blob_digest(shared), blob_digest(own)]) == {blob_digest(own)}


def test_runs_waiting_for_a_person_are_exempt_unless_forced(store: Store) -> None:
    waiting = build_run(store, 5, status=RunStatus.INTERRUPTED)
    run_id = waiting[0].run_id
    result = prune(RetentionPolicy(keep_last=1), store=store)
    assert result.exempt_runs == [run_id] and ids(store, run_id) == list(range(6))
    prune(RetentionPolicy(keep_last=1, include_waiting=True), store=store)
    assert ids(store, run_id) == [4, 5]  # the head and its keyframe


def test_ttl_and_expires_at(store: Store) -> None:
    records = build_run(store, 5, old=True, keyframe_every=1)  # all keyframes, all old
    run_id = records[0].run_id
    prune(RetentionPolicy(ttl=timedelta(days=1)), store=store)
    assert ids(store, run_id) == [5]  # the head always stays
    run, first = make_run()
    lease = store.create_run(run, first, owner="t", ttl=30)
    expiring = make_record(
        run.thread_id, run.run_id, parent_id=first.checkpoint_id, step=1,
        expires_at=utcnow() - timedelta(seconds=1),
    )  # fmt: skip
    store.put_checkpoint(expiring, lease_token=lease.token)
    store.put_checkpoint(next_record(expiring), lease_token=lease.token)
    prune(RetentionPolicy(), store=store)
    assert ids(store, run.run_id) == [0, 2]


def test_policy_is_checked() -> None:
    with pytest.raises(ConfigurationError, match="keep_last must be at least 1"):
        RetentionPolicy(keep_last=0)


@pytest.mark.parametrize(
    ("rules", "message"),
    [
        ({"ttl": timedelta(days=1_000_000)}, "ttl must be at most 36500 days, not 1000000 days"),
        ({"finished_for": timedelta.max}, "finished_for must be at most 36500 days"),
        ({"ttl": timedelta(seconds=-1)}, "ttl must not be negative"),
        ({"finished_for": 3600}, "finished_for must be a timedelta, not int"),
    ],
    ids=["ttl-too-long", "finished-for-max", "negative", "not-a-timedelta"],
)
def test_policy_refuses_ages_it_cannot_count_back(rules: dict[str, Any], message: str) -> None:
    # Before, these were accepted and the prune raised OverflowError or TypeError.
    with pytest.raises(ConfigurationError, match=message):
        RetentionPolicy(**rules)


def test_the_longest_age_still_prunes(store: Store) -> None:
    records = build_run(store, 3, status=RunStatus.COMPLETED, old=True)
    longest = RetentionPolicy.MAX_AGE
    assert prune(RetentionPolicy(ttl=longest, finished_for=longest), store=store).runs == []
    assert ids(store, records[0].run_id) == [0, 1, 2, 3]


def test_plan_reads_headers_only(store: Store) -> None:
    build_run(store, 4)
    assert plan(store, RetentionPolicy()).checkpoints == []


hotel_api_down: dict[str, bool] = {}


@tool(effect="write", idempotent=True, compensate="free_room")
def hold_room(hotel: str, *, request_id: str) -> dict[str, str]:
    return {"room": f"{hotel}-301"}


@tool(effect="write", idempotent=True)
def free_room(hotel: str, *, result: dict[str, str], request_id: str) -> str:
    if hotel_api_down.get("down"):
        raise RuntimeError("hotel API down")
    return "freed"


def stay() -> Workflow:
    wf = Workflow("stay")

    @wf.step(entry=True)
    def book(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        ctx.call(hold_room, "H1")
        raise RuntimeError("flight cancelled")

    return wf


def test_a_saga_that_still_owes_compensations_is_kept_whole(store: Store) -> None:
    with pytest.raises(StepError):
        run(stay(), run_id="owes", store=store)
    hotel_api_down["down"] = True
    try:
        with pytest.raises(CompensationError, match="hotel API down"):
            compensate("owes", store=store)
    finally:
        hotel_api_down.clear()
    assert store.get_run("owes").status is RunStatus.COMPENSATION_FAILED
    checkpoints, journal = store.list_checkpoints("owes"), store.list_effects("owes")
    later = utcnow() + timedelta(days=30)
    result = prune(
        RetentionPolicy(finished_for=timedelta(days=7), keep_last=1), store=store, now=later
    )
    assert result.runs == [] and result.checkpoints == [] and result.exempt_runs == ["owes"]
    assert store.list_checkpoints("owes") == checkpoints
    assert store.list_effects("owes") == journal
    # The cause fixed, the hold it made is released after all.
    assert compensate("owes", store=store).status is RunStatus.COMPENSATED
    # Forced, a run that still owes compensations goes like any finished run.
    with pytest.raises(StepError):
        run(stay(), run_id="forced", store=store)
    hotel_api_down["down"] = True
    try:
        with pytest.raises(CompensationError):
            compensate("forced", store=store)
    finally:
        hotel_api_down.clear()
    forced = RetentionPolicy(finished_for=timedelta(days=7), include_waiting=True)
    assert sorted(prune(forced, store=store, now=later).runs) == ["forced", "owes"]
    assert store.list_runs() == []


class ChainsCheckedAfterEachBatch:
    """A real store that, after each ``delete_checkpoints`` call, tries every remaining chain."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner
        self.broken: list[tuple[int, str]] = []
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def delete_checkpoints(self, checkpoint_ids: Sequence[str]) -> int:
        deleted = self._inner.delete_checkpoints(checkpoint_ids)
        self.calls += 1
        for info in self._inner.list_runs():
            for header in self._inner.list_checkpoints(info.run_id):
                try:
                    self._inner.get_chain(header.checkpoint_id)
                except NotFoundError:
                    self.broken.append((self.calls, header.checkpoint_id))
        return deleted


def test_a_prune_cut_between_any_two_batches_leaves_every_chain_whole(store: Store) -> None:
    # A takeover by a host whose clock is behind: ids no longer sort by time.
    fast = ["7ZA0", "7ZA1"]  # written first, by host A
    slow = ["1AB2", "1AB3", "1AB4", "1AB5"]  # then by host B
    info, _ = make_run()
    first = make_record(info.thread_id, info.run_id, checkpoint_id=fast[0], created_at=LONG_AGO)
    lease = store.create_run(info, first, owner="t", ttl=30)
    records = [first]
    for step, (cid, base) in enumerate(
        [(fast[1], fast[0]), (slow[0], fast[1]), (slow[1], slow[0]), (slow[2], None)], start=1
    ):
        record = make_record(
            info.thread_id, info.run_id, checkpoint_id=cid, parent_id=records[-1].checkpoint_id,
            step=step, base_id=base, created_at=LONG_AGO if base else None,
        )  # fmt: skip
        store.put_checkpoint(record, lease_token=lease.token)
        records.append(record)
    head = next_record(records[-1], checkpoint_id=slow[3], base_id=slow[2])
    store.put_checkpoint(head, lease_token=lease.token)
    policy = RetentionPolicy(ttl=timedelta(days=1))
    # The delta furthest from its keyframe goes first, the keyframe last.
    assert plan(store, policy).checkpoints == [slow[1], slow[0], fast[1], fast[0]]
    checked = ChainsCheckedAfterEachBatch(store)
    result = prune(policy, store=cast(Store, checked), batch_size=1)
    assert (checked.calls, checked.broken) == (4, [])
    assert len(result.checkpoints) == 4 and ids(store, info.run_id) == [4, 5]


def test_deletion_order_follows_bases_across_runs_and_survives_a_cycle() -> None:
    _, first = make_run()

    def header(cid: str, base: str | None) -> CheckpointHeader:
        return replace(first.header, checkpoint_id=cid, base_id=base)

    doomed = [
        header("a", None),
        header("b", "a"),
        header("c", "kept"),  # its base stays: nothing of this prune below it
        header("d", "b"),
        header("fork", "d"),  # in another run: bases are followed, not runs
        header("x", "y"),
        header("y", "x"),  # damage: a cycle, no chain of it loads
    ]
    # Each record after every record that uses it as a base; ties by id, for a stable plan.
    assert deletion_order(doomed) == ["fork", "d", "b", "x", "a", "c", "y"]


def test_a_fork_keeps_its_workspace_files_when_its_origin_run_goes(
    store: Store, tmp_path: Path
) -> None:
    """The origin run finished and went whole; its fork (not run yet) lists the files of
    the checkpoint it forked, so the blob collection keeps them: the fork restores its
    workspace, verifies, and resumes to its end."""
    from savegame.client import fork, get_checkpoint, history, restore_workspace, resume, verify
    from tests.runtime.test_fork_workspace import adding

    ws = tmp_path / "ws"
    ws.mkdir()
    wf = adding(ws)
    done = run(wf, {}, store=store)
    [at1] = [h for h in history(done.run_id, store=store) if h.step == 1]
    forked = fork(at1.checkpoint_id, store=store, workflow=wf, run=False)

    gone = prune(RetentionPolicy(finished_for=timedelta(0)), store=store)
    assert gone.runs == [done.run_id] and gone.blobs == 2  # f2.txt and f3.txt
    report = verify(store=store)
    assert report.ok and report.blobs == 1, report.damaged
    elsewhere = tmp_path / "elsewhere"
    restore_workspace(get_checkpoint(forked.checkpoint_id, store=store), elsewhere, store=store)
    assert {p.name: p.read_text() for p in elsewhere.iterdir()} == {"f1.txt": "file 1 " * 40}
    for p in ws.iterdir():
        p.unlink()
    ended = resume(forked.run_id, store=store, workflow=wf)
    assert ended.status is RunStatus.COMPLETED and ended.state["n"] == 3
    assert sorted(p.name for p in ws.iterdir()) == ["f1.txt", "f2.txt", "f3.txt"]
