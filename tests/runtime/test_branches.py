"""Parallel branches inside a step: ``ctx.gather`` and ``ctx.map``, journaled per branch."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from savegame import END, RunStatus, StepContext, Store, Workflow, resume, run, tool
from savegame.client import fork, history, list_effects
from savegame.errors import ConfigurationError, StepError
from savegame.model import EffectKind

State = dict[str, Any]
calls: list[str] = []
running = {"now": 0, "most": 0}


@tool(name="branch_lookup")
async def lookup(key: str, delay: float) -> str:
    calls.append(key)
    running["now"] += 1
    running["most"] = max(running["most"], running["now"])
    await asyncio.sleep(delay)
    running["now"] -= 1
    return key.upper()


@tool(name="branch_write", effect="write")
async def write(key: str) -> str:
    calls.append(f"write {key}")
    if key == "boom":
        raise RuntimeError("the provider is down")
    return f"wrote {key}"


@pytest.fixture(autouse=True)
def _fresh() -> None:
    calls.clear()
    running.update(now=0, most=0)


async def _two_calls(ctx: StepContext, key: str) -> list[str]:
    # Slower first: the branches finish in the reverse of their order.
    first = await ctx.acall(lookup, key, 0.05 if key == "a" else 0.0)
    return [first, await ctx.acall(write, key)]


GATHER = Workflow("gather")


@GATHER.step(entry=True)
async def fan_out(state: State, ctx: StepContext) -> tuple[State, str]:
    got = await ctx.gather(*(lambda c, k=k: _two_calls(c, k) for k in state["keys"]))
    seen = ctx.interrupt({"got": got})  # a person looks; the step then runs again
    return {"got": got, "seen": seen}, END


def test_branches_run_together_results_in_order_ids_by_branch(store: Store) -> None:
    paused = run(GATHER, {"keys": ["a", "b", "c"]}, store=store)
    assert paused.status is RunStatus.INTERRUPTED
    assert running["most"] > 1  # they really ran together
    ids = sorted(
        e.request_id
        for e in list_effects(paused.run_id, store=store)
        if e.kind in (EffectKind.READ, EffectKind.WRITE)
    )
    rid = paused.run_id
    assert ids == sorted(f"{rid}:1:0:b{k}:{n}" for k in range(3) for n in range(2))
    # The step runs again: every call of every branch is replayed, none is made again.
    before = list(calls)
    done = resume(paused.run_id, store=store, value="ok")
    assert done.state["got"] == [["A", "wrote a"], ["B", "wrote b"], ["C", "wrote c"]]
    assert calls == before
    assert done.usage.tool_calls == 6


LIMITED = Workflow("limited")


@LIMITED.step(entry=True)
async def limited(state: State, ctx: StepContext) -> tuple[State, str]:
    async def one(c: StepContext, key: str) -> str:
        return str(await c.acall(lookup, key, 0.02))

    return {"got": await ctx.map(one, state["keys"], concurrency=2)}, END


def test_map_keeps_the_items_order_and_its_concurrency(store: Store) -> None:
    done = run(LIMITED, {"keys": list("abcdef")}, store=store)
    assert done.state["got"] == list("ABCDEF")
    assert running["most"] == 2


down = {"provider": True}


@tool(name="branch_quote")
async def quote(key: str) -> str:
    calls.append(f"quote {key}")
    if down["provider"]:
        raise RuntimeError("the quote service is down")
    return f"quote for {key}"


FLAKY = Workflow("flaky")


@FLAKY.step(entry=True)
async def flaky(state: State, ctx: StepContext) -> tuple[State, str]:
    async def one(c: StepContext, key: str) -> str:
        return str(await (c.acall(quote, key) if key == "x" else c.acall(write, key)))

    return {"got": await ctx.map(one, ["p", "x", "q"])}, END


def test_a_failing_branch_lets_the_others_finish_and_they_replay(store: Store) -> None:
    down["provider"] = True
    with pytest.raises(StepError, match="the quote service is down"):
        run(FLAKY, {}, store=store)
    assert sorted(calls) == ["quote x", "write p", "write q"]  # the writes finished
    failed = store.list_runs()[0]
    assert failed.status is RunStatus.FAILED
    # Back up: the writes replay from the journal; only the failed read is made again.
    down["provider"] = False
    calls.clear()
    done = resume(failed.run_id, store=store)
    assert done.state["got"] == ["wrote p", "quote for x", "wrote q"]
    assert calls == ["quote x"]


def test_concurrency_must_be_a_whole_number(store: Store) -> None:
    wf = Workflow("bad-concurrency")

    @wf.step(entry=True)
    async def step(state: State, ctx: StepContext) -> tuple[State, str]:
        return {"got": await ctx.map(lambda c, i: c.acall(lookup, i, 0), ["a"], concurrency=0)}, END

    with pytest.raises(ConfigurationError, match="concurrency"):
        run(wf, {}, store=store)


# -- a fork through a gather -----------------------------------------------------------
PLANNED = Workflow("planned")


@PLANNED.step(entry=True)
async def plan(state: State, ctx: StepContext) -> tuple[State, str]:
    return {"keys": state["keys"]}, "fan"


@PLANNED.step()
async def fan(state: State, ctx: StepContext) -> tuple[State, str]:
    got = await ctx.map(_two_calls, state["keys"])
    after = await ctx.acall(write, "after")
    return {"got": got, "after": after}, END


def _first(store: Store, run_id: str) -> str:
    """The checkpoint after ``plan``: a fork from it runs ``fan`` again."""
    [cp] = [h for h in history(run_id, store=store) if h.node == "plan"]
    return cp.checkpoint_id


def _replay_marks(store: Store, run_id: str) -> dict[str, str]:
    return {
        e.request_id[len(run_id) + 1 :]: e.metadata["replay"]
        for e in list_effects(run_id, store=store)
        if "replay" in e.metadata
    }


def test_a_fork_reuses_every_branch_call_while_the_branches_are_the_same(store: Store) -> None:
    origin = run(PLANNED, {"keys": ["a", "b", "c"]}, store=store)
    calls.clear()
    forked = fork(_first(store, origin.run_id), store=store, workflow=PLANNED)
    assert forked.result is not None and forked.result.state == origin.state
    assert calls == []  # no write of the origin is made again
    marks = _replay_marks(store, forked.run_id)
    assert set(marks.values()) == {"reused"} and len(marks) == 7


def test_a_branch_that_differs_executes_alone_and_the_fork_diverges_after_the_gather(
    store: Store,
) -> None:
    origin = run(PLANNED, {"keys": ["a", "b", "c"]}, store=store)
    calls.clear()
    # Branch 1 reads "B" where the origin read "b": it makes its calls; 0 and 2 reuse.
    forked = fork(
        _first(store, origin.run_id), update={"keys": ["a", "B", "c"]}, store=store,
        workflow=PLANNED,
    )  # fmt: skip
    assert forked.result is not None
    assert forked.result.state["got"] == [["A", "wrote a"], ["B", "wrote B"], ["C", "wrote c"]]
    assert sorted(calls) == ["B", "write B", "write after"]
    marks = _replay_marks(store, forked.run_id)
    assert marks == {
        "2:0:b0:0": "reused", "2:0:b0:1": "reused",
        "2:0:b1:0": "executed", "2:0:b1:1": "executed",
        "2:0:b2:0": "reused", "2:0:b2:1": "reused",
        "2:1": "executed",  # after a branch diverged, the step goes on for real
    }  # fmt: skip


def test_a_fork_with_fewer_branches_diverges_after_the_gather(store: Store) -> None:
    origin = run(PLANNED, {"keys": ["a", "b", "c"]}, store=store)
    calls.clear()
    fork(
        _first(store, origin.run_id), update={"keys": ["a", "b"]}, store=store,
        workflow=PLANNED,
    )  # fmt: skip
    # What the origin did after its gather depended on a third branch this fork lacks.
    assert calls == ["write after"]


stop = {"in_branch": ""}


async def _stopping(ctx: StepContext, key: str) -> list[str]:
    first = await ctx.acall(lookup, key, 0.0)
    if key == stop["in_branch"]:
        raise RuntimeError(f"stopped in branch {key}")
    return [first, await ctx.acall(write, key)]


ONE_BY_ONE = Workflow("one-by-one")


@ONE_BY_ONE.step(entry=True)
async def ready(state: State, ctx: StepContext) -> tuple[State, str]:
    return {"keys": state["keys"]}, "each"


@ONE_BY_ONE.step()
async def each(state: State, ctx: StepContext) -> tuple[State, str]:
    return {"got": await ctx.map(_stopping, state["keys"], concurrency=1)}, END


def test_a_fork_that_stopped_mid_gather_goes_on_reusing_the_other_branches(
    store: Store,
) -> None:
    origin = run(ONE_BY_ONE, {"keys": ["a", "b"]}, store=store)
    [start] = [h for h in history(origin.run_id, store=store) if h.node == "ready"]
    calls.clear()
    # Branch 0 differs (it executes); branch 1 reads (reused), then its step fails
    # before its write.
    stop["in_branch"] = "b"
    with pytest.raises(StepError, match="stopped in branch b"):
        fork(start.checkpoint_id, update={"keys": ["A", "b"]}, store=store, workflow=ONE_BY_ONE)
    assert calls == ["A", "write A"]
    stop["in_branch"] = ""
    [failed] = [r for r in store.list_runs() if r.status is RunStatus.FAILED]
    done = resume(failed.run_id, store=store, workflow=ONE_BY_ONE)
    # Branch 1's write is the origin's, at the same place in the same branch: reused,
    # as it would have been had the fork not stopped. Never written twice.
    assert done.state["got"] == [["A", "wrote A"], ["B", "wrote b"]]
    assert calls == ["A", "write A"]
