"""Attacks on ``ctx.patched`` (issue 33 point 2): one id asked twice at a point and again
later, several ids at one point, inside gather branches under old code, a point after a
call that raised, and random sequences of patches and calls re-executed after a pause
(hypothesis): an execution must get the answers the first one recorded, and a run that
went past a point under old code must keep its old path there."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import savegame
from savegame import END, RunStatus, StepContext, Workflow, tool


@pytest.fixture
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ledger.txt"
    monkeypatch.setenv("PATCH_LEDGER", str(path))
    return path


def _count(name: str) -> None:
    with Path(os.environ["PATCH_LEDGER"]).open("a") as out:
        out.write(name + "\n")


def calls(ledger: Path) -> list[str]:
    return ledger.read_text().splitlines() if ledger.exists() else []


@tool(name="patch_old")
def patch_old(item: str) -> str:
    _count(f"old {item}")
    return f"old {item}"


@tool(name="patch_new")
def patch_new(item: str) -> str:
    _count(f"new {item}")
    return f"new {item}"


@tool(name="patch_quiet")
def patch_quiet(item: str) -> str:
    return item


@tool(name="patch_fails")
def patch_fails(item: str) -> str:
    _count(f"fails {item}")
    raise LookupError(item)


def test_one_id_asked_twice_and_several_ids_at_one_point_agree_across_executions(
    tmp_path: Path, ledger: Path
) -> None:
    wf = Workflow("patch-twice")

    @wf.step(entry=True)
    def only(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        got = [ctx.patched("a"), ctx.patched("a"), ctx.patched("b")]
        ctx.call(patch_old, "x")
        got.append(ctx.patched("a"))
        answer = ctx.interrupt("go?")
        return {"got": got, "answer": answer}, END

    with savegame.connect(f"sqlite:///{tmp_path / 'p.db'}") as sg:
        paused = sg.run(wf, {})
        assert paused.status is RunStatus.INTERRUPTED
        done = sg.supply(paused.run_id, "yes", workflow=wf).result
        assert done is not None and done.status is RunStatus.COMPLETED
        assert done.state["got"] == [True, True, True, True]
    assert calls(ledger) == ["old x"]  # the read's result replayed in the second execution


def _branches(patched: bool) -> Workflow:
    wf = Workflow("patch-gather")

    @wf.step(entry=True)
    async def fan(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        async def one(branch: StepContext, item: str) -> str:
            if patched and branch.patched("p"):
                return str(await branch.acall(patch_new, item))
            return str(await branch.acall(patch_old, item))

        got = await ctx.map(one, ["a", "b"])
        answer = ctx.interrupt("go?")
        return {"got": got, "answer": answer}, END

    return wf


def test_a_run_past_a_gathers_point_under_old_code_keeps_its_old_path(
    tmp_path: Path, ledger: Path
) -> None:
    with savegame.connect(f"sqlite:///{tmp_path / 'g.db'}") as sg:
        paused = sg.run(_branches(False), {})
        assert paused.status is RunStatus.INTERRUPTED
        done = sg.supply(paused.run_id, "yes", workflow=_branches(True)).result
        assert done is not None and done.state["got"] == ["old a", "old b"]
        fresh = sg.run(_branches(True), {})
        assert fresh.status is RunStatus.INTERRUPTED
        again = sg.supply(fresh.run_id, "yes", workflow=_branches(True)).result
        assert again is not None and again.state["got"] == ["new a", "new b"]
    assert sorted(calls(ledger)) == ["new a", "new b", "old a", "old b"]


def test_a_point_after_a_call_that_raised_is_answered_once(tmp_path: Path, ledger: Path) -> None:
    wf = Workflow("patch-raised")

    @wf.step(entry=True)
    def only(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        with contextlib.suppress(LookupError):
            ctx.call(patch_fails, "x")
        took = ctx.patched("after")
        ctx.call(patch_new if took else patch_old, "y")
        answer = ctx.interrupt("go?")
        return {"took": took, "answer": answer}, END

    with savegame.connect(f"sqlite:///{tmp_path / 'r.db'}") as sg:
        paused = sg.run(wf, {})
        done = sg.supply(paused.run_id, "yes", workflow=wf).result
        assert done is not None and done.state["took"] is True
    assert calls(ledger) == ["fails x", "new y", "fails x"]


POINTS = st.integers(min_value=0, max_value=3).flatmap(
    lambda old: st.tuples(
        st.just(old),
        st.lists(st.tuples(st.integers(0, old), st.sampled_from(["p1", "p2", "p3"])), max_size=6),
    )
)


@settings(max_examples=12, deadline=None)
@given(case=POINTS)
def test_random_patches_between_calls_are_answered_alike_by_every_execution(
    case: tuple[int, list[tuple[int, str]]],
) -> None:
    # Old code made ``old`` calls, then asked a person; new code asks patches between the
    # same calls. A run of the old code has passed every point (its person's question
    # holds the last): the old path everywhere. A fresh run of the new code: the new path,
    # and the same answers when its step runs again after the pause.
    old, points = case
    before = Workflow("patch-ops")

    @before.step(entry=True, name="only")
    def only_old(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        for n in range(old):
            ctx.call(patch_quiet, str(n))
        return {"answer": ctx.interrupt("go?")}, END

    after = Workflow("patch-ops")
    seen: list[list[tuple[int, str, bool]]] = []  # each execution's answers

    @after.step(entry=True, name="only")
    def only_new(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        got = []
        for n in range(old + 1):
            got += [(n, pid, ctx.patched(pid)) for at, pid in points if at == n]
            if n < old:
                ctx.call(patch_quiet, str(n))
        seen.append(got)
        return {"got": got, "answer": ctx.interrupt("go?")}, END

    with savegame.connect("memory://") as sg:
        paused = sg.run(before, {})
        done = sg.supply(paused.run_id, "yes", workflow=after)
        assert done.result is not None and done.result.status is RunStatus.COMPLETED
        assert all(answer is False for _, _, answer in done.result.state["got"]), case
        seen.clear()
        fresh = sg.run(after, {})
        assert all(answer is True for _, _, answer in seen[0]), case
        again = sg.supply(fresh.run_id, "yes", workflow=after)
        assert again.result is not None and again.result.state["got"] == seen[0], case
        assert len(seen) == 2


def test_deprecate_patch_on_a_fork_of_a_run_in_doubt_at_its_point_charges_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # v1's charge raised after it may have gone out. A fork under code whose old path is
    # gone (deprecate_patch) must not take the new path past the origin's doubt: that
    # charges again at another position, for real. It stops, as the origin took the old
    # path there and this code has none.
    from savegame.client import fork, history
    from savegame.errors import InDoubtEffectError, NonDeterminismError, SavegameError
    from tests.effects.patch_flows import ASK_FIRST, charging, lines, patch_ask, patch_charge

    monkeypatch.setenv("SAVEGAME_LEDGER", str(tmp_path / "ledger.txt"))
    gone = Workflow("charge", version="v3")

    @gone.step(entry=True)
    def charge(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        ctx.deprecate_patch(ASK_FIRST)
        ctx.call(patch_ask, state["order"])
        ctx.call(patch_charge, state["order"])
        return {}, END

    with savegame.connect(f"sqlite:///{tmp_path / 'd.db'}") as sg:
        with pytest.raises(InDoubtEffectError):
            sg.run(charging(False), {"order": "o-1"}, run_id="doubt")
        start = next(reversed(history("doubt", store=sg.store)))
        with pytest.raises(SavegameError) as stopped:
            fork(start.checkpoint_id, store=sg.store, workflow=gone)
        assert "deprecate_patch('ask-first')" in str(stopped.value), stopped.value
        # The run itself, resumed under that code: its journal holds the charge where
        # the new path asks first; it stops there too.
        with pytest.raises(NonDeterminismError):
            sg.resume("doubt", workflow=gone)
    assert lines() == ["charge o-1"]  # neither asked nor charged again
