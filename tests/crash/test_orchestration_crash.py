"""Waiting runs under real SIGKILL: events taken once, sleeps that keep their clock,
child runs started once.

Children run the workloads of ``orchestration_workload.py`` against a real SQLite store;
their tools write to a separate SQLite file (the outside world), so the test counts
what really happened across process deaths.
"""

from __future__ import annotations

import os
import random
import sqlite3
from datetime import datetime
from pathlib import Path

import pytest

from savegame import RunStatus, send
from savegame.client import get_run, list_effects
from savegame.errors import NotFoundError
from savegame.model import EffectKind, EffectStatus

from .harness import kill_after_delay, kill_at_hook, run_to_end
from .orchestration_workload import records

pytestmark = pytest.mark.crash

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "effects_child.py")
SENDER = os.path.join(HERE, "send_child.py")


def records_at(world: str) -> float:
    """When the outside world saw the (one) record."""
    conn = sqlite3.connect(world)
    try:
        (at,) = conn.execute("SELECT at FROM records").fetchone()
    finally:
        conn.close()
    return float(at)


def _env(tmp_path: Path, workload: str) -> dict[str, str]:
    return {
        "SAVEGAME_WORLD": str(tmp_path / "world.db"),
        "SAVEGAME_WORKLOAD": f"orchestration_workload.py:{workload}",
    }


def _until_done(url: str, run_id: str, env: dict[str, str], rng: random.Random) -> RunStatus:
    """Resume, killed at random moments, until a child gets to the end of what it can do."""
    for _ in range(50):
        if rng.random() < 0.5:
            kill_after_delay("resume", url, run_id, rng.uniform(0.0, 0.4), script=CHILD, env=env)
            continue
        out = run_to_end("resume", url, run_id, script=CHILD, env=env)
        if out.done is not None:
            return RunStatus(out.done)
        status = get_run(run_id, store=url).status
        if out.error == "RunStateError" and status in (RunStatus.WAITING, RunStatus.COMPLETED):
            # A resume killed above got the run to its next wait (nothing woke it since)
            # or to its end, just before the kill: this one is refused, nothing is left.
            return status
        assert out.error in ("LeaseHeldError", None), (out.error, out.stderr)
    raise AssertionError("the run never got to the end")


def test_an_event_sent_twice_with_one_key_is_taken_once_across_kills(tmp_path: Path) -> None:
    url, run_id = f"sqlite:///{tmp_path / 'store.db'}", "orders-1"
    env = _env(tmp_path, "orders")
    rng = random.Random(18)
    assert run_to_end("start", url, run_id, script=CHILD, env=env).done == "waiting"

    # A webhook sender killed at any moment, then retried with the same key.
    first = {**env, "SAVEGAME_TOPIC": "order", "SAVEGAME_VALUE": '"A"', "SAVEGAME_KEY": "o-1"}
    for delay in (0.0, 0.05, 0.15, 0.3):
        kill_after_delay("send", url, run_id, delay, script=SENDER, env=first)
    sent = run_to_end("send", url, run_id, script=SENDER, env=first)
    assert sent.done in ("delivered", "dropped"), sent.stderr
    assert get_run(run_id, store=url).wake_at is not None

    # Killed between the two writes of taking it, then after the wait was answered.
    out = kill_at_hook("resume", url, run_id, "event-taken", script=CHILD, env=env)
    assert out.hooks == ["event-taken"], out.stderr
    (taken,) = [e for e in list_effects(run_id, store=url) if e.kind is EffectKind.EVENT]
    (wait,) = [e for e in list_effects(run_id, store=url) if e.kind is EffectKind.WAIT]
    assert (taken.status, taken.metadata["taken_by"]) == (EffectStatus.DONE, wait.request_id)
    assert wait.status is EffectStatus.PENDING  # the second write never happened
    out = kill_at_hook("resume", url, run_id, "after-wait", script=CHILD, env=env)
    assert out.hooks == ["after-wait"], out.stderr
    assert _until_done(url, run_id, env, rng) is RunStatus.WAITING
    assert records(env["SAVEGAME_WORLD"]) and [b for _, b in records(env["SAVEGAME_WORLD"])] == [
        "first A"
    ]

    # The same key again, now that the run waits for its second order: dropped, not woken.
    again = run_to_end("send", url, run_id, script=SENDER, env={**first, "SAVEGAME_VALUE": '"A2"'})
    assert again.done == "dropped"
    assert get_run(run_id, store=url).wake_at is None
    second = {**first, "SAVEGAME_VALUE": '"B"', "SAVEGAME_KEY": "o-2"}
    assert run_to_end("send", url, run_id, script=SENDER, env=second).done == "delivered"
    assert _until_done(url, run_id, env, rng) is RunStatus.COMPLETED

    assert [b for _, b in records(env["SAVEGAME_WORLD"])] == ["first A", "second B"]
    journal = list_effects(run_id, store=url)
    events = [e for e in journal if e.kind is EffectKind.EVENT]
    waits = {e.request_id: e for e in journal if e.kind is EffectKind.WAIT}
    assert sorted(e.arguments for e in events) == ["A", "B"]
    assert all(e.status is EffectStatus.DONE for e in events)
    takers = [e.metadata["taken_by"] for e in events]
    assert sorted(takers) == sorted(waits)  # each event taken by one wait, each wait by one
    for event in events:
        assert waits[event.metadata["taken_by"]].result == {
            "value": event.arguments,
            "event": event.request_id,
        }
    with pytest.raises(Exception, match="completed"):
        send(run_id, "order", "late", store=url)


def test_a_sleep_resumed_after_kills_keeps_the_wake_up_time_it_recorded(tmp_path: Path) -> None:
    url, run_id = f"sqlite:///{tmp_path / 'store.db'}", "nap-1"
    env = {**_env(tmp_path, "naps"), "SAVEGAME_INPUT": '{"nap": 1.5}', "SAVEGAME_WAIT": "1"}
    # Killed right after the wake-up time was journaled, before the waiting checkpoint.
    out = kill_at_hook("start", url, run_id, "sleep-recorded", script=CHILD, env=env)
    assert out.hooks == ["sleep-recorded"], out.stderr
    (entry,) = [e for e in list_effects(run_id, store=url) if e.kind is EffectKind.SLEEP]
    until = entry.arguments["until"]
    # Killed again while blocked in the sleep (each resume computes nothing anew).
    for delay in (0.2, 0.4, 0.3):
        kill_after_delay("resume", url, run_id, delay, script=CHILD, env=env)
        (again,) = [e for e in list_effects(run_id, store=url) if e.kind is EffectKind.SLEEP]
        assert again.arguments["until"] == until
    done = run_to_end("resume", url, run_id, script=CHILD, env=env)
    assert done.done == "completed", (done.error, done.stderr)
    (slept,) = [e for e in list_effects(run_id, store=url) if e.kind is EffectKind.SLEEP]
    assert slept.arguments["until"] == until and slept.result["woke"] >= until
    assert [b for _, b in records(env["SAVEGAME_WORLD"])] == ["woke"]
    woke_at = records_at(env["SAVEGAME_WORLD"])
    assert woke_at >= datetime.fromisoformat(until).timestamp()


def _child_runs(url: str, parent: str) -> list[str]:
    from savegame.client import list_runs

    return sorted(r.run_id for r in list_runs(store=url) if r.run_id != parent)


BOSS_RECORDS = ["boss child 0,child 1,child 2", "child 0", "child 1", "child 2"]


def test_a_parent_killed_mid_start_child_starts_each_child_once(tmp_path: Path) -> None:
    url, run_id = f"sqlite:///{tmp_path / 'store.db'}", "boss-1"
    env = {**_env(tmp_path, "boss"), "SAVEGAME_INPUT": "{}", "SAVEGAME_WAIT": "1"}
    out = kill_at_hook("start", url, run_id, "child-intent", script=CHILD, env=env)
    assert out.hooks == ["child-intent"], out.stderr
    assert _child_runs(url, run_id) == []  # journaled, not created
    out = kill_at_hook("resume", url, run_id, "child-created", script=CHILD, env=env)
    assert out.hooks == ["child-created"], out.stderr
    assert _child_runs(url, run_id) == [f"{run_id}:1:0"]  # created, its entry not settled
    rng = random.Random(1)
    for _ in range(3):  # and killed at random while it drives its children here
        if get_run(run_id, store=url).status is RunStatus.COMPLETED:
            break
        kill_after_delay("resume", url, run_id, rng.uniform(0.05, 0.3), script=CHILD, env=env)
    if get_run(run_id, store=url).status is not RunStatus.COMPLETED:
        done = run_to_end("resume", url, run_id, script=CHILD, env=env)
        assert done.done == "completed", (done.error, done.stderr)
    assert _child_runs(url, run_id) == [f"{run_id}:1:{i}" for i in range(3)]
    assert sorted(b for _, b in records(env["SAVEGAME_WORLD"])) == BOSS_RECORDS
    journal = list_effects(run_id, store=url)
    assert [e.status for e in journal if e.kind is EffectKind.CHILD] == [EffectStatus.DONE] * 3
    ends = [e for e in journal if e.kind is EffectKind.EVENT]
    assert len(ends) == 3 and all(e.status is EffectStatus.DONE for e in ends)


def test_a_child_killed_mid_step_ends_once_for_its_parent(tmp_path: Path) -> None:
    url, run_id = f"sqlite:///{tmp_path / 'store.db'}", "boss-2"
    env = {**_env(tmp_path, "boss"), "SAVEGAME_INPUT": "{}"}
    assert run_to_end("start", url, run_id, script=CHILD, env=env).done == "waiting"
    first, *others = _child_runs(url, run_id)
    out = kill_at_hook("resume", url, first, "child-recorded", script=CHILD, env=env)
    assert out.hooks == ["child-recorded"], out.stderr
    rng = random.Random(2)
    for child in (first, *others):
        assert _until_done(url, child, env, rng) is RunStatus.COMPLETED
        woken = get_run(run_id, store=url).wake_at is not None
        assert woken is (child == others[-1])  # the parent wakes with its last child
    assert _until_done(url, run_id, env, rng) is RunStatus.COMPLETED
    assert sorted(b for _, b in records(env["SAVEGAME_WORLD"])) == BOSS_RECORDS
    ends = [e for e in list_effects(run_id, store=url) if e.kind is EffectKind.EVENT]
    assert sorted(e.name for e in ends) == sorted(f"$child:{c}" for c in (first, *others))


def test_a_worker_killed_mid_gather_makes_only_the_unfinished_calls_again(tmp_path: Path) -> None:
    from .orchestration_workload import executions

    url, run_id = f"sqlite:///{tmp_path / 'store.db'}", "fan-1"
    env = {**_env(tmp_path, "fanout"), "SAVEGAME_INPUT": "{}"}
    world = env["SAVEGAME_WORLD"]
    out = kill_at_hook("start", url, run_id, "mid-gather", script=CHILD, env=env)
    assert out.hooks == ["mid-gather"], out.stderr
    assert len(executions(world)) == 3
    # Each call whose result is journaled, with how often it had been made by then.
    finished = _finished(url, run_id, world)
    assert 0 < len(finished) < 8
    rng = random.Random(3)
    for _ in range(8):
        if get_run(run_id, store=url).status is RunStatus.COMPLETED:
            break
        kill_after_delay("resume", url, run_id, rng.uniform(0.3, 0.9), script=CHILD, env=env)
        # A call that had finished is never made again; those in flight are (same id).
        ran = executions(world)
        assert {rid: ran[rid] for rid in finished} == finished
        finished = {**_finished(url, run_id, world), **finished}
    if get_run(run_id, store=url).status is not RunStatus.COMPLETED:
        done = run_to_end("resume", url, run_id, script=CHILD, env=env)
        assert done.done == "completed", (done.error, done.stderr)
    ran = executions(world)
    assert {rid: ran[rid] for rid in finished} == finished
    assert sorted(b for _, b in records(world)) == sorted(f"{k}{x}" for k in range(4) for x in "ab")
    writes = [e.request_id for e in list_effects(run_id, store=url) if e.kind is EffectKind.WRITE]
    assert sorted(writes) == sorted(f"{run_id}:1:0:b{k}:{n}" for k in range(4) for n in range(2))


def _finished(url: str, run_id: str, world: str) -> dict[str, int]:
    from .orchestration_workload import executions

    ran = executions(world)
    return {
        e.request_id: ran[e.request_id]
        for e in list_effects(run_id, store=url)
        if e.kind is EffectKind.WRITE and e.status is EffectStatus.DONE
    }


def _exists(url: str, run_id: str) -> bool:
    try:
        get_run(run_id, store=url)
    except NotFoundError:
        return False
    return True
