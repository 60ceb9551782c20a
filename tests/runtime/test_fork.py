"""Fork: a new run from any checkpoint, edited or not, replayed against the journal."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from savegame import RunStatus, Store, run
from savegame.client import fork, history, list_effects, plan_fork
from savegame.effects import EXECUTED, REPLAY_KEY, REUSED
from savegame.errors import ConfigurationError, StepError
from savegame.stores.base import ALL_EFFECTS
from tests.crash import fork_workload
from tests.crash.fork_workload import lines, wf


@pytest.fixture(autouse=True)
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SAVEGAME_LEDGER", str(tmp_path / "ledger.txt"))
    yield


def _origin(store: Store, **given: Any) -> tuple[str, list[Any]]:
    """A finished ten-step run and its checkpoints, oldest first (step 0 .. 10)."""
    res = run(wf, given, store=store)
    return res.run_id, list(reversed(history(res.run_id, store=store)))


def _rows(store: Store, run_id: str) -> tuple[Any, ...]:
    """Every stored row of a run, as stored: what a fork must leave as it was."""
    records = [store.get_checkpoint(h.checkpoint_id) for h in store.list_checkpoints(run_id)]
    return (
        store.get_run(run_id),
        [(r.header, r.payload, r.checksum) for r in records],
        store.list_effects(run_id, limit=ALL_EFFECTS),
    )


def test_a_replayed_fork_of_a_run_with_writes_calls_nothing(store: Store) -> None:
    run_id, cps = _origin(store)
    calls_before = lines()
    assert len(calls_before) == 30  # ten reads, ten writes, ten model calls
    before = _rows(store, run_id)

    forked = fork(cps[0].checkpoint_id, store=store, workflow=wf)

    assert lines() == calls_before  # not one tool execution nor model call more
    assert forked.result is not None and forked.result.status is RunStatus.COMPLETED
    origin_end = store.latest_checkpoint(run_id)
    assert forked.result.state == fork_workload_state(store, run_id)
    assert forked.result.usage == origin_end.header.usage
    assert len(forked.reused) == 30 and forked.executed == () and forked.diverged_at is None
    assert _rows(store, run_id) == before  # the origin, byte for byte
    marks = {e.metadata.get(REPLAY_KEY) for e in list_effects(forked.run_id, store=store)}
    assert marks == {REUSED}


def fork_workload_state(store: Store, run_id: str) -> dict[str, Any]:
    from savegame.client import get_checkpoint

    return get_checkpoint(run_id, store=store).state


def test_fork_at_every_step_of_a_ten_step_run(store: Store) -> None:
    run_id, cps = _origin(store)
    assert [c.step for c in cps] == list(range(11))
    final = fork_workload_state(store, run_id)
    calls = lines()
    for cp in cps:
        forked = fork(cp.checkpoint_id, store=store, workflow=wf)
        assert forked.result is not None
        assert forked.result.status is RunStatus.COMPLETED
        assert forked.result.state == final
        assert len(forked.reused) == 3 * (10 - cp.step)
        mine = store.list_checkpoints(forked.run_id)
        first = mine[-1]
        assert first.parent_id == cp.checkpoint_id and first.step == cp.step
        assert first.metadata["fork"]["run"] == run_id
        # Each later checkpoint of the fork follows the one before it.
        assert [h.parent_id for h in mine[:-1]] == [h.checkpoint_id for h in mine[1:]]
        info = store.get_run(forked.run_id)
        assert info.thread_id == store.get_run(run_id).thread_id
        assert info.metadata["fork"]["checkpoint"] == cp.checkpoint_id
    assert lines() == calls


def test_a_fork_with_an_edit_executes_exactly_the_calls_after_the_divergence(
    store: Store,
) -> None:
    _, cps = _origin(store)
    before = len(lines())
    # From step 6 on, the amounts double: the read of step 7 is the same call, the
    # write is not.
    forked = fork(
        cps[6].checkpoint_id, update={"factor": 2}, reason="price was wrong", by="ana",
        store=store, workflow=wf,
    )  # fmt: skip
    new = lines()[before:]
    assert [line.split()[0] for line in new] == ["send", "llm"] + ["quote", "send", "llm"] * 3
    assert [c.name for c in forked.reused] == ["fork_quote"]
    assert forked.diverged_at is not None
    assert (forked.diverged_at.step, forked.diverged_at.call_index) == (7, 1)
    assert len(forked.executed) == 11
    assert forked.result is not None
    assert forked.result.state["total"] == sum(10 * i for i in range(1, 7)) + sum(
        20 * i for i in range(7, 11)
    )
    first = store.list_checkpoints(forked.run_id)[-1]
    assert first.metadata["source"] == "update"
    assert first.metadata["by"] == "ana" and first.metadata["reason"] == "price was wrong"
    assert first.metadata["fork"]["edited"] == ["factor"]
    entries = list_effects(forked.run_id, store=store)
    assert [e.metadata[REPLAY_KEY] for e in entries if e.step == 7] == [
        REUSED, EXECUTED, EXECUTED,
    ]  # fmt: skip


def test_a_fork_in_redo_mode_executes_everything(store: Store) -> None:
    _, cps = _origin(store)
    before = len(lines())
    forked = fork(cps[8].checkpoint_id, mode="redo", store=store, workflow=wf)
    assert len(lines()) - before == 6
    assert forked.reused == () and len(forked.executed) == 6


def test_a_fork_of_a_failed_run_fixes_it_and_the_failure_stays(store: Store) -> None:
    with pytest.raises(StepError):
        run(wf, {"fail_at": 4}, store=store)
    failed = store.list_runs(status=RunStatus.FAILED)[0]
    head = store.latest_checkpoint(failed.run_id)
    assert head.header.status is RunStatus.FAILED and head.header.next == "work"
    before = _rows(store, failed.run_id)
    calls = len(lines())

    forked = fork(head.checkpoint_id, set={"fail_at": None}, store=store, workflow=wf)

    assert forked.result is not None and forked.result.status is RunStatus.COMPLETED
    assert forked.result.state["i"] == 10
    # Step 4's calls happened before it raised: they come back from the journal.
    assert [c.step for c in forked.reused] == [4, 4, 4]
    assert len(lines()) - calls == 18
    assert _rows(store, failed.run_id) == before
    assert store.get_run(failed.run_id).status is RunStatus.FAILED


def test_a_fork_of_a_completed_run_without_running_it(store: Store) -> None:
    _, cps = _origin(store)
    forked = fork(cps[5].checkpoint_id, run=False, store=store, workflow=wf)
    assert forked.result is None
    info = store.get_run(forked.run_id)
    assert info.status is RunStatus.RUNNING and store.list_effects(forked.run_id) == []
    from savegame import resume

    calls = len(lines())
    res = resume(forked.run_id, store=store, workflow=wf)
    assert res.status is RunStatus.COMPLETED and len(lines()) == calls


def test_a_fork_of_a_final_checkpoint_has_nothing_to_run(store: Store) -> None:
    run_id, cps = _origin(store)
    forked = fork(cps[-1].checkpoint_id, store=store, workflow=wf)
    assert forked.result is not None and forked.result.status is RunStatus.COMPLETED
    assert forked.result.state == fork_workload_state(store, run_id)


def test_plan_lists_the_writes_redo_would_repeat(store: Store) -> None:
    _, cps = _origin(store)
    plan = plan_fork(cps[7].checkpoint_id, store=store)
    assert [(c.step, c.name) for c in plan.writes] == [
        (8, "fork_send"),
        (9, "fork_send"),
        (10, "fork_send"),
    ]


def test_a_path_that_does_not_lead_into_the_state_is_refused(store: Store) -> None:
    _, cps = _origin(store)
    with pytest.raises(ConfigurationError, match="no index 9"):
        fork(cps[3].checkpoint_id, set={"sent[9]": "x"}, store=store, workflow=wf)
    with pytest.raises(ConfigurationError, match="mode"):
        fork(cps[3].checkpoint_id, mode="again", store=store, workflow=wf)  # type: ignore[arg-type]
    assert len(store.list_runs()) == 1


def test_a_fork_of_a_fork_replays_its_own_branch(store: Store) -> None:
    _, cps = _origin(store)
    first = fork(cps[2].checkpoint_id, update={"factor": 3}, store=store, workflow=wf)
    calls = len(lines())
    mid = store.list_checkpoints(first.run_id)[-1 - 4]  # its checkpoint at step 6
    assert mid.step == 6
    second = fork(mid.checkpoint_id, store=store, workflow=wf)
    assert len(lines()) == calls
    assert second.result is not None and first.result is not None
    assert second.result.state == first.result.state


def test_the_module_registers_its_tools_once() -> None:
    assert fork_workload.fork_send.name == "fork_send"
