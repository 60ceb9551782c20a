"""ctx.patched: new runs take a change, runs already past its point keep their old path,
and the answer, journaled once, holds across a pause, a SIGKILL and a fork."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from savegame import RunStatus, StepContext, Store, Workflow, resume, run
from savegame.client import approve, fork, history
from savegame.codec import decode_value
from savegame.errors import (
    ConfigurationError,
    InDoubtEffectError,
    NonDeterminismError,
    SavegameError,
)
from savegame.model import EffectKind
from savegame.stores import SqliteStore
from tests.effects import patch_flows
from tests.effects.patch_flows import (
    ASK_FIRST,
    charging,
    deprecated,
    gated,
    lines,
    new,
    old,
)

ORDER = {"order": "o-1"}


@pytest.fixture(autouse=True)
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("SAVEGAME_LEDGER", str(tmp_path / "ledger.txt"))
    monkeypatch.delenv("PATCH_KILL_AFTER_ASK", raising=False)
    yield


def _answers(store: Store, run_id: str) -> list[Any]:
    """What each marker recorded, decoded from the store's own entry."""
    entries = [e for e in store.list_effects(run_id) if e.kind is EffectKind.PATCH]
    return [decode_value(e.result) for e in entries if e.result is not None]


def test_a_fresh_run_takes_the_patch(store: Store) -> None:
    paused = run(new("before"), ORDER, store=store)
    assert paused.status is RunStatus.INTERRUPTED
    done = resume(paused.run_id, value="ok", store=store, workflow=new("before"))
    assert (done.status, done.state["took"]) == (RunStatus.COMPLETED, True)
    assert lines() == ["ask o-1", "pay o-1"]
    assert _answers(store, paused.run_id) == [True]
    [entry] = [e for e in store.list_effects(paused.run_id) if e.kind is EffectKind.PATCH]
    assert (entry.name, entry.metadata.get("decided")) == (ASK_FIRST, "fresh")
    # Named after the call it comes before, taking no position of its own.
    assert entry.request_id == f"{paused.run_id}:1:0:patch:{ASK_FIRST}"


def test_a_run_past_the_point_under_old_code_keeps_its_old_path(store: Store) -> None:
    paused = run(old(), ORDER, store=store)  # paid, then waits days for a person
    assert paused.status is RunStatus.INTERRUPTED
    # The deploy: v2 asks a manager before paying. This run paid already.
    done = resume(paused.run_id, value="ok", store=store, workflow=new("before"))
    assert (done.status, done.state["took"]) == (RunStatus.COMPLETED, False)
    assert lines() == ["pay o-1"]  # replayed, not paid again; no manager asked
    assert _answers(store, paused.run_id) == [False]
    [entry] = [e for e in store.list_effects(paused.run_id) if e.kind is EffectKind.PATCH]
    assert entry.metadata.get("decided") == "passed"


def test_a_run_whose_call_waits_for_approval_there_has_passed_the_point(store: Store) -> None:
    # v1 asked a person to approve the wire at position 0: nothing called yet, but the
    # decision the person gives is bound to that call at that position.
    paused = run(gated(False), ORDER, store=store)
    assert paused.status is RunStatus.INTERRUPTED
    decided = approve(paused.run_id, by="ana", store=store, workflow=gated(True))
    done = decided.result
    assert done is not None, decided.error
    assert (done.status, done.state["took"]) == (RunStatus.COMPLETED, False)
    assert lines() == ["wire o-1"]
    assert _answers(store, paused.run_id) == [False]


def test_a_run_not_yet_at_the_point_takes_the_patch(store: Store) -> None:
    paused = run(old(), ORDER, store=store)
    done = resume(paused.run_id, value="ok", store=store, workflow=new("after"))
    assert (done.status, done.state["took"]) == (RunStatus.COMPLETED, True)
    assert lines() == ["pay o-1", "ask o-1"]


def test_the_answer_is_kept_though_the_patched_calls_fill_its_position(store: Store) -> None:
    # A fresh v2 run: the marker says True, then the manager's call takes position 0.
    paused = run(new("before"), ORDER, store=store)
    assert paused.status is RunStatus.INTERRUPTED
    # The step runs again on resume: the journal now holds a call at the patch's
    # position, which alone would read as "passed"; the marker answers first.
    again = resume(paused.run_id, value="again", store=store, workflow=new("before"))
    assert again.status is RunStatus.INTERRUPTED
    done = resume(paused.run_id, value="ok", store=store, workflow=new("before"))
    assert (done.status, done.state["took"]) == (RunStatus.COMPLETED, True)
    assert lines() == ["ask o-1", "pay o-1"]  # each once, over three executions
    assert _answers(store, paused.run_id) == [True]


def test_a_fork_gets_its_origin_s_answer(store: Store) -> None:
    # Origin under old code: the fork, under new code, replays the origin's payment.
    origin = run(old(), ORDER, store=store)
    first = next(reversed(history(origin.run_id, store=store)))
    forked = fork(first.checkpoint_id, store=store, workflow=new("before"))
    assert forked.result is not None and forked.result.status is RunStatus.INTERRUPTED
    assert lines() == ["pay o-1"]  # reused, not paid again
    assert _answers(store, forked.run_id) == [False]
    # Origin under new code: its marker said True; the fork takes the patch and reuses
    # the manager's call and the payment, though a call fills that position.
    took = run(new("before"), {"order": "o-2"}, store=store)
    start = next(reversed(history(took.run_id, store=store)))
    again = fork(start.checkpoint_id, store=store, workflow=new("before"))
    assert again.result is not None and again.result.status is RunStatus.INTERRUPTED
    assert lines() == ["pay o-1", "ask o-2", "pay o-2"]
    assert _answers(store, again.run_id) == [True]
    [entry] = [e for e in store.list_effects(again.run_id) if e.kind is EffectKind.PATCH]
    assert entry.metadata.get("decided") == "origin"


def test_a_fork_of_a_run_with_a_call_in_doubt_there_keeps_the_old_path(store: Store) -> None:
    # v1's charge raised after it may have gone out: in doubt, the run stops for a person.
    with pytest.raises(InDoubtEffectError) as raised:
        run(charging(False), ORDER, run_id="doubt", store=store)
    assert raised.value.run_id == "doubt"
    start = next(reversed(history("doubt", store=store)))
    # The fork takes the origin's path and stops at the same doubt, for a person; taking
    # the patch would have diverged there and charged again for real.
    with pytest.raises(SavegameError, match="in doubt"):
        fork(start.checkpoint_id, store=store, workflow=charging(True))
    assert lines() == ["charge o-1"]
    [forked] = [r for r in store.list_runs() if r.run_id != "doubt"]
    assert forked.status is RunStatus.NEEDS_ATTENTION
    assert _answers(store, forked.run_id) == [False]


def test_deprecate_patch_refuses_a_run_that_kept_the_old_path(store: Store) -> None:
    paused = run(old(), ORDER, store=store)
    kept = resume(paused.run_id, value="again", store=store, workflow=new("before"))
    assert kept.status is RunStatus.INTERRUPTED and _answers(store, paused.run_id) == [False]
    with pytest.raises(SavegameError) as caught:
        resume(paused.run_id, value="ok", store=store, workflow=deprecated())
    assert isinstance(caught.value, NonDeterminismError) or isinstance(
        caught.value.__cause__, NonDeterminismError
    )
    assert "deprecate_patch('ask-first')" in str(caught.value)
    assert lines() == ["pay o-1"]  # nothing down the new path


def test_deprecate_patch_records_the_patch_taken_for_a_fresh_run(store: Store) -> None:
    paused = run(deprecated(), ORDER, store=store)
    assert paused.status is RunStatus.INTERRUPTED
    assert _answers(store, paused.run_id) == [True]
    # Code rolled back to patched() agrees with it.
    done = resume(paused.run_id, value="ok", store=store, workflow=new("before"))
    assert (done.status, done.state["took"]) == (RunStatus.COMPLETED, True)
    assert lines() == ["ask o-1", "pay o-1"]


@pytest.mark.parametrize("bad", ["", "a:b", "x" * 101, 3])
def test_a_patch_id_must_be_a_short_string_without_colons(store: Store, bad: Any) -> None:
    bad_wf = Workflow("bad-patch")

    @bad_wf.step(entry=True)
    def step(state: dict[str, Any], ctx: StepContext) -> Any:
        ctx.patched(bad)
        return {}, "__end__"

    with pytest.raises(SavegameError) as caught:
        run(bad_wf, store=store)
    assert isinstance(caught.value, ConfigurationError) or isinstance(
        caught.value.__cause__, ConfigurationError
    )


@pytest.mark.slow
@pytest.mark.crash
def test_the_answer_survives_a_sigkill_and_a_resume(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'patch.db'}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run(
        [sys.executable, patch_flows.__file__, url, "killed-run"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert proc.returncode == -9, proc.stderr  # SIGKILLed inside the manager's call
    assert lines() == ["ask o-1"]
    with SqliteStore(tmp_path / "patch.db") as store:
        assert _answers(store, "killed-run") == [True]  # committed before the call
        paused = resume("killed-run", store=store, workflow=new("before"))
        assert paused.status is RunStatus.INTERRUPTED
        done = resume("killed-run", value="ok", store=store, workflow=new("before"))
        assert (done.status, done.state["took"]) == (RunStatus.COMPLETED, True)
        # The idempotent call in doubt is made again with its request id, then the payment.
        assert lines() == ["ask o-1", "ask o-1", "pay o-1"]
        assert _answers(store, "killed-run") == [True]
