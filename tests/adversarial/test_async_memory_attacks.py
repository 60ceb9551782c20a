"""Attacks on async runs calling memory:// on their event loop (``Capabilities.blocking``).

Many ``arun``s at once that wait for events, sleep durably and run children here;
a sync ``run`` in another thread on the same store meanwhile; an ``arun`` cancelled
mid-step, which must stay resumable with nothing done twice.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from savegame import (
    END,
    RunStatus,
    StepContext,
    Workflow,
    aresume,
    arun,
    run,
    send,
    tool,
)
from savegame.errors import NotFoundError
from savegame.ids import new_id
from savegame.stores import Store, open_store

State = dict[str, Any]

KID = Workflow("attack-async-kid")


@KID.step(entry=True)
def kid(state: State, ctx: StepContext) -> tuple[State, str]:
    return {"twice": state["n"] * 2}, END


BUSY = Workflow("attack-async-busy")


@BUSY.step(entry=True)
def ask(state: State, ctx: StepContext) -> tuple[State, str]:
    return {"got": ctx.wait_for("go")}, "nap"


@BUSY.step()
def nap(state: State, ctx: StepContext) -> tuple[State, str]:
    ctx.sleep(0.02)
    return {}, "kids"


@BUSY.step()
def kids(state: State, ctx: StepContext) -> tuple[State, str]:
    child = ctx.start_child(KID, {"n": state["got"]})
    return {"child": ctx.wait_child(child)["twice"]}, END


PLAIN = Workflow("attack-async-plain")


@PLAIN.step(entry=True)
def count(state: State, ctx: StepContext) -> tuple[State, str]:
    n = state.get("n", 0) + 1
    return {"n": n}, ("count" if n < 20 else END)


def _named() -> str:
    return f"memory://attack-{uuid.uuid4().hex}"


async def _send_when_there(url: str, run_id: str, value: int) -> None:
    store = open_store(url)
    try:
        while True:
            try:
                store.get_run(run_id)
                break
            except NotFoundError:
                await asyncio.sleep(0.001)
        send(run_id, "go", value, store=store)
    finally:
        store.close()


def _check_consistent(store: Store, run_id: str, state: State) -> None:
    info = store.get_run(run_id)
    head = store.get_checkpoint(info.head_checkpoint_id)
    assert info.status is RunStatus.COMPLETED
    assert head.header.step == info.step


def test_many_aruns_with_events_sleeps_and_children_on_one_loop() -> None:
    url = _named()
    ids = [new_id() for _ in range(30)]

    async def main() -> list[Any]:
        runs = [arun(BUSY, {}, run_id=r, store=url, wait=True) for r in ids]
        senders = [_send_when_there(url, r, i) for i, r in enumerate(ids)]
        return (await asyncio.gather(*runs, *senders))[: len(ids)]

    results = _on_a_thread(lambda: asyncio.run(main()))
    store = open_store(url)
    try:
        for i, (run_id, result) in enumerate(zip(ids, results, strict=True)):
            assert result.status is RunStatus.COMPLETED, result
            assert (result.state["got"], result.state["child"]) == (i, 2 * i)
            _check_consistent(store, run_id, result.state)
    finally:
        store.close()


def test_a_sync_run_in_another_thread_shares_the_store_with_aruns() -> None:
    url = _named()
    synced: list[Any] = []

    def sync_side() -> None:
        for _ in range(10):
            synced.append(run(PLAIN, {}, store=url))

    thread = threading.Thread(target=sync_side, daemon=True)

    async def main() -> list[Any]:
        thread.start()
        return list(await asyncio.gather(*(arun(PLAIN, {}, store=url) for _ in range(20))))

    results = _on_a_thread(lambda: asyncio.run(main()))
    thread.join(120)
    assert not thread.is_alive()
    store = open_store(url)
    try:
        for result in [*results, *synced]:
            assert result.status is RunStatus.COMPLETED and result.state["n"] == 20
            _check_consistent(store, result.run_id, result.state)
        assert len(synced) == 10
    finally:
        store.close()


# -- cancelled mid-step ---------------------------------------------------------------------
charged: list[str] = []
hang = {"on": True}
entered = threading.Event()


@tool(name="attack_charge", effect="write")
def charge(key: str) -> str:
    charged.append(key)
    return f"charged {key}"


SLOW = Workflow("attack-async-cancel")


@SLOW.step(entry=True)
async def pay(state: State, ctx: StepContext) -> tuple[State, str]:
    return {"receipt": ctx.call(charge, "first")}, "wait"


@SLOW.step()
async def wait(state: State, ctx: StepContext) -> tuple[State, str]:
    done = ctx.call(charge, "second")
    if hang["on"]:
        entered.set()
        await asyncio.sleep(3600)  # cancelled here
    return {"second": done}, END


def test_an_arun_cancelled_mid_step_resumes_with_nothing_done_twice() -> None:
    url = _named()
    run_id = new_id()
    charged.clear()
    hang["on"] = True
    entered.clear()

    async def main() -> None:
        task = asyncio.ensure_future(arun(SLOW, {}, run_id=run_id, store=url))
        while not entered.is_set():
            await asyncio.sleep(0.001)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return
        raise AssertionError("the cancelled run returned")

    store = open_store(url)  # keeps the named store alive between the two loops
    try:
        _on_a_thread(lambda: asyncio.run(main()))
        info = store.get_run(run_id)
        assert info.status in (RunStatus.RUNNING, RunStatus.QUEUED)
        assert info.lease is None, "a cancelled run kept its lease"
        hang["on"] = False
        done = _on_a_thread(lambda: asyncio.run(aresume(run_id, store=url)))
        assert done.status is RunStatus.COMPLETED
        assert done.state == {"receipt": "charged first", "second": "charged second"}
        # The write in the cancelled step was journaled and is replayed, not done again.
        assert charged == ["first", "second"]
        _check_consistent(store, run_id, done.state)
    finally:
        hang["on"] = False
        store.close()


def _on_a_thread(fn: Any) -> Any:
    """``fn()`` on a daemon thread, failing (not hanging) if it never returns."""
    out: list[Any] = []
    errors: list[BaseException] = []

    def go() -> None:
        try:
            out.append(fn())
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    thread.join(120)
    assert not thread.is_alive(), "hung"
    if errors:
        raise errors[0]
    return out[0]


ticks: list[str] = []


@tool(name="attack_tick", effect="write")
def tick(key: str) -> str:
    ticks.append(key)
    return key


STEPPY = Workflow("attack-async-steppy")


@STEPPY.step(entry=True)
async def stepper(state: State, ctx: StepContext) -> tuple[State, str]:
    n = state.get("n", 0)
    await asyncio.sleep(0)
    ctx.call(tick, f"{state['tag']}-{n}")
    await asyncio.sleep(0)
    return {"n": n + 1}, ("stepper" if n + 1 < 8 else END)


@settings(max_examples=40, deadline=None)
@given(k=st.integers(0, 24))  # the run takes some 20 ticks: most cuts land mid-run
def test_an_arun_cancelled_at_any_tick_resumes_exactly_once(k: int) -> None:
    url = _named()
    run_id = new_id()
    tag = uuid.uuid4().hex[:8]
    ticks.clear()

    async def main() -> bool:
        task = asyncio.ensure_future(arun(STEPPY, {"tag": tag}, run_id=run_id, store=url))
        for _ in range(k):
            if task.done():
                break
            await asyncio.sleep(0)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return True
        return False

    store = open_store(url)
    try:
        cancelled = _on_a_thread(lambda: asyncio.run(main()))
        try:
            info = store.get_run(run_id)
        except NotFoundError:
            assert cancelled and ticks == []  # cancelled before it was created
            return
        assert info.lease is None, "a cancelled run kept its lease"
        if info.status is not RunStatus.COMPLETED:
            done = _on_a_thread(lambda: asyncio.run(aresume(run_id, store=url)))
            assert done.status is RunStatus.COMPLETED and done.state["n"] == 8
        # Each step's write done once: a cancelled step's journaled call is replayed.
        assert ticks == [f"{tag}-{n}" for n in range(8)]
        _check_consistent(store, run_id, {})
    finally:
        store.close()
