"""The runner: steps, checkpoints, history, threads, failures and the public run/resume API."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import itertools
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from savegame import (
    END,
    CheckpointPolicy,
    MemoryStore,
    RunInfo,
    RunStatus,
    SqliteStore,
    StepContext,
    Store,
    Workflow,
    arun,
    resume,
    run,
    submit,
)
from savegame.client import Observer, get_checkpoint, history, list_runs
from savegame.errors import (
    ConfigurationError,
    NotFoundError,
    RunStateError,
    SerializationError,
    StepError,
)
from savegame.model import CheckpointHeader
from savegame.runtime import Durability
from savegame.stores import Capabilities


def counter(limit: int = 10, **kwargs: Any) -> Workflow:
    wf = Workflow("counter", **kwargs)

    @wf.step(entry=True)
    def tick(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        n = state.get("n", 0) + 1
        return {"n": n, "seen": [*state.get("seen", []), n]}, ("tick" if n < limit else END)

    return wf


def test_counter_runs_to_the_end_with_one_checkpoint_per_step(store: Store) -> None:
    result = run(counter(), {}, store=store)
    assert result.status is RunStatus.COMPLETED
    assert result.state == {"n": 10, "seen": list(range(1, 11))}
    assert result.step == 10
    headers = history(result.run_id, store=store)
    assert [h.step for h in headers] == list(range(10, -1, -1))  # newest first, input = step 0
    assert headers[0].checkpoint_id == result.checkpoint_id
    assert headers[0].status is RunStatus.COMPLETED and headers[0].next is None
    assert all(h.status is RunStatus.RUNNING and h.next == "tick" for h in headers[1:])
    assert headers[-1].node is None and headers[-1].parent_id is None
    for newer, older in itertools.pairwise(headers):
        assert newer.parent_id == older.checkpoint_id
        assert newer.checkpoint_id > older.checkpoint_id  # time-sortable ids
    info = store.get_run(result.run_id)
    assert info.status is RunStatus.COMPLETED and info.step == 10
    assert info.head_checkpoint_id == result.checkpoint_id
    assert info.lease is None  # released at the end


def test_async_steps_and_arun(store: Store) -> None:
    wf = Workflow("async")

    @wf.step(entry=True)
    async def first(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        await asyncio.sleep(0)
        return {"a": 1}, "second"

    @wf.step
    def second(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"b": state["a"] + 1}, END

    assert run(wf, store=store).state == {"a": 1, "b": 2}
    assert asyncio.run(arun(wf, store=store)).state == {"a": 1, "b": 2}


@pytest.mark.parametrize(
    ("policy", "expected_steps"),
    [
        (CheckpointPolicy.every_n_steps(3), [10, 9, 6, 3, 0]),
        (CheckpointPolicy.only_key_steps("never"), [10, 0]),
        (CheckpointPolicy(every=4, key_steps=frozenset({"tick"})), list(range(10, -1, -1))),
    ],
)
def test_checkpoint_policy(
    store: Store, policy: CheckpointPolicy, expected_steps: list[int]
) -> None:
    result = run(counter(), store=store, policy=policy)
    assert [h.step for h in history(result.run_id, store=store)] == expected_steps
    assert result.state["n"] == 10


def test_interval_policy_checkpoints_on_time(store: Store) -> None:
    wf = Workflow("slow")

    @wf.step(entry=True)
    def tick(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        import time

        time.sleep(0.02)
        n = state.get("n", 0) + 1
        return {"n": n}, ("tick" if n < 6 else END)

    result = run(wf, store=store, policy=CheckpointPolicy.interval(0.035))
    steps = [h.step for h in history(result.run_id, store=store)]
    assert steps[0] == 6 and steps[-1] == 0
    assert 3 <= len(steps) < 7  # roughly every other step, never all of them


def test_step_can_force_a_checkpoint_and_tag_it(store: Store) -> None:
    wf = Workflow("forced", policy=CheckpointPolicy.only_key_steps())

    @wf.step(entry=True)
    def a(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"x": 1}, "b"

    @wf.step
    def b(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        ctx.checkpoint()
        ctx.tag(kind="important")
        return {"y": 2}, "c"

    @wf.step(checkpoint=True)
    def c(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"z": 3}, "d"

    @wf.step
    def d(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {}, END

    result = run(wf, store=store)
    headers = history(result.run_id, store=store)
    assert [h.node for h in headers] == ["d", "c", "b", None]
    assert history(result.run_id, store=store, metadata={"kind": "important"})[0].node == "b"


def test_async_durability_writes_everything_in_order(store: Store) -> None:
    result = run(counter(limit=30), store=store, durability="async")
    headers = history(result.run_id, store=store)
    assert [h.step for h in headers] == list(range(30, -1, -1))
    assert get_checkpoint(result.run_id, store=store).state == result.state


def test_new_run_on_a_thread_continues_from_the_thread_state(store: Store) -> None:
    wf = Workflow("chat")

    @wf.step(entry=True)
    def reply(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        turns = [*state.get("turns", []), f"you said {state['say']}"]
        return {"turns": turns}, END

    first = run(wf, {"say": "hi"}, thread_id="t1", store=store)
    second = run(wf, {"say": "again"}, thread_id="t1", store=store)
    assert second.state["turns"] == ["you said hi", "you said again"]
    assert {r.run_id for r in list_runs(thread_id="t1", store=store)} == {
        first.run_id,
        second.run_id,
    }
    # The new run's input checkpoint links to the thread's previous head.
    assert history(second.run_id, store=store)[-1].parent_id == first.checkpoint_id
    other = run(wf, {"say": "x"}, thread_id="t2", store=store)
    assert other.state["turns"] == ["you said x"]


def test_step_error_marks_run_failed_and_resume_retries(store: Store) -> None:
    calls = {"n": 0}
    wf = Workflow("flaky")

    @wf.step(entry=True)
    def a(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"a": 1}, "b"

    @wf.step
    def b(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("upstream 503")
        return {"b": 2}, END

    with pytest.raises(StepError, match=r"step 'b' raised RuntimeError: upstream 503") as info:
        run(wf, run_id="r-flaky", store=store)
    assert info.value.run_id == "r-flaky"
    info_row = store.get_run("r-flaky")
    assert info_row.status is RunStatus.FAILED and "upstream 503" in (info_row.error or "")
    failed = get_checkpoint("r-flaky", store=store)
    assert failed.status is RunStatus.FAILED and failed.next == "b" and failed.state == {"a": 1}
    result = resume("r-flaky", store=store, workflow=wf)
    assert result.status is RunStatus.COMPLETED and result.state == {"a": 1, "b": 2}


def test_unserializable_update_names_the_path_and_keeps_the_resume_point(store: Store) -> None:
    sock = socket.socket()
    bad = {"on": True}
    wf = Workflow("leaky")

    @wf.step(entry=True)
    def a(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"tools": [1, 2]}, "b"

    @wf.step
    def b(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        extra = {"conn": sock} if bad["on"] else {"conn": "closed"}
        return {"tools": [*state["tools"], extra]}, END

    try:
        with pytest.raises(SerializationError) as info:
            run(wf, run_id="r-leak", store=store)
        assert info.value.path == "state.tools[2].conn"
        assert "run r-leak" in str(info.value) and "'b'" in str(info.value)
        cp = get_checkpoint("r-leak", store=store)
        assert cp.state == {"tools": [1, 2]} and cp.next == "b"
        bad["on"] = False
        assert resume("r-leak", store=store, workflow=wf).state["tools"][2] == {"conn": "closed"}
    finally:
        sock.close()


def test_bad_step_results_are_clear(store: Store) -> None:
    wf = Workflow("bad")

    @wf.step(entry=True)
    def a(state: dict[str, Any], ctx: StepContext) -> Any:
        return {"x": 1}, "nowhere"

    with pytest.raises(ConfigurationError, match="has no step 'nowhere'"):
        run(wf, store=store)
    wf2 = Workflow("bad2")

    @wf2.step(entry=True)
    def b(state: dict[str, Any], ctx: StepContext) -> Any:
        return {"x": 1}

    with pytest.raises(ConfigurationError, match=r"must return \(update, next_step\)"):
        run(wf2, store=store)


def test_resume_refuses_completed_and_unknown_runs(store: Store) -> None:
    done = run(counter(limit=2), store=store)
    with pytest.raises(RunStateError, match=f"cannot resume run {done.run_id}: it is completed"):
        resume(done.run_id, store=store, workflow=counter())
    with pytest.raises(NotFoundError, match="no run 'nope'"):
        resume("nope", store=store, workflow=counter())


def test_workflow_reference_is_stored_and_used_by_resume(store: Store) -> None:
    result = run(MODULE_WF, store=store)
    info = store.get_run(result.run_id)
    assert info.workflow_ref == f"{__name__}:MODULE_WF"


MODULE_WF = counter(limit=3)


def test_state_schema_migration_on_resume(store: Store) -> None:
    v1 = Workflow("migrating")

    @v1.step(entry=True)
    def a(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        raise RuntimeError("stop here")

    for run_id in ("r-mig", "r-old"):
        with pytest.raises(StepError):
            run(v1, {"name": "Ada Lovelace"}, run_id=run_id, store=store)

    v2 = Workflow("migrating", state_version=3)

    @v2.migration(from_version=1)
    def split(state: dict[str, Any]) -> dict[str, Any]:
        first, last = state.pop("name").split(" ")
        return {**state, "first": first, "last": last}

    @v2.migration(from_version=2)
    def upper(state: dict[str, Any]) -> dict[str, Any]:
        return {**state, "last": state["last"].upper()}

    @v2.step(entry=True)
    def a2(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"greeting": f"hello {state['first']} {state['last']}"}, END

    v2.steps["a"] = v2.steps.pop("a2")
    v2.entry = "a"
    result = resume("r-mig", store=store, workflow=v2)
    assert result.state == {"first": "Ada", "last": "LOVELACE", "greeting": "hello Ada LOVELACE"}
    assert history("r-mig", store=store)[0].state_version == 3

    from savegame.errors import StateVersionError

    old = Workflow("migrating", state_version=2)
    old.add_step(a2, name="a", entry=True)
    newer = run(
        v2, {"first": "x", "last": "y"}, store=store, policy=CheckpointPolicy.only_key_steps()
    )
    with pytest.raises(StateVersionError, match="newer than workflow 'migrating'"):
        run(old, thread_id=newer.thread_id, store=store)
    missing = Workflow("migrating", state_version=2)
    missing.add_step(a2, name="a", entry=True)
    with pytest.raises(StateVersionError, match="no migration from state version 1 to 2"):
        run(missing, thread_id="r-old", store=store, on_thread_busy="allow")


def test_input_must_be_pure_data(store: Store) -> None:
    with pytest.raises(SerializationError, match=r"state\.x"):
        run(counter(), {"x": object()}, store=store)
    with pytest.raises(ConfigurationError, match="run input must be a dict"):
        run(counter(), [1], store=store)  # type: ignore[arg-type]


def test_resume_from_a_chosen_checkpoint(store: Store) -> None:
    wf = Workflow("pick")
    fail = {"on": True}

    @wf.step(entry=True)
    def tick(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        n = state.get("n", 0) + 1
        if n == 4 and fail["on"]:
            raise RuntimeError("boom")
        return {"n": n, "trail": [*state.get("trail", []), n]}, ("tick" if n < 5 else END)

    with pytest.raises(StepError):
        run(wf, run_id="r-pick", store=store)
    step1 = next(h for h in history("r-pick", store=store) if h.step == 1)
    with pytest.raises(NotFoundError):
        resume("r-pick", store=store, workflow=wf, from_checkpoint="not-a-checkpoint")
    fail["on"] = False
    result = resume("r-pick", store=store, workflow=wf, from_checkpoint=step1.checkpoint_id)
    assert result.state == {"n": 5, "trail": [1, 2, 3, 4, 5]}
    # The continuation hangs off the chosen checkpoint.
    step2 = [h for h in history("r-pick", store=store) if h.step == 2]
    assert step1.checkpoint_id in {h.parent_id for h in step2}


def test_check_mutations_names_a_key_changed_in_place(store: Store) -> None:
    wf = Workflow("sneaky", check_mutations=True)

    @wf.step(entry=True)
    def start(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"log": ["a"], "n": 1}, "sneak"

    @wf.step
    def sneak(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        state["log"].append("b")  # in place, and not returned: a checkpoint would miss it
        return {"n": 2}, END

    with pytest.raises(ConfigurationError, match=r"step 'sneak' changed state\['log'\] in place"):
        run(wf, store=store)
    honest = Workflow("honest", check_mutations=True)

    @honest.step(entry=True)
    def fine(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"log": [*state.get("log", []), "b"]}, END

    assert run(honest, {"log": ["a"]}, store=store).state["log"] == ["a", "b"]


def test_check_mutations_names_a_list_item_changed_in_place(store: Store) -> None:
    """The step returns the list grown but edited an old item in place: deltas and packs
    keep the items they already stored, so the edit would be lost."""
    wf = Workflow("editor", check_mutations=True)

    @wf.step(entry=True)
    def start(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"log": [{"text": "a"}]}, "edit"

    @wf.step
    def edit(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        state["log"][0]["text"] = "redacted"
        return {"log": [*state["log"], {"text": "b"}]}, END

    with pytest.raises(
        ConfigurationError, match=r"step 'edit' changed state\['log'\]\[0\] in place"
    ):
        run(wf, store=store)
    honest = Workflow("replacer", check_mutations=True)

    @honest.step(entry=True)
    def replace_item(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        log = state["log"]
        return {"log": [{**log[0], "text": "redacted"}, *log[1:], {"text": "b"}]}, END

    done = run(honest, {"log": [{"text": "a"}]}, store=store)
    assert done.state["log"] == [{"text": "redacted"}, {"text": "b"}]
    assert get_checkpoint(done.run_id, store=store).state == done.state


@pytest.mark.parametrize("how", ["replace", "reverse", "insert", "shrink"])
def test_check_mutations_accepts_a_list_changed_in_place_and_returned(
    store: Store, how: str
) -> None:
    """Changing the list itself (not its items) and returning it is stored right."""
    wf = Workflow(f"list-{how}", check_mutations=True)

    @wf.step(entry=True)
    def start(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"log": [{"t": "a"}, {"t": "b"}, {"t": "c"}]}, "edit"

    @wf.step
    def edit(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        log = state["log"]
        if how == "replace":
            log[0] = {"t": "A"}
        elif how == "reverse":
            log.reverse()
        elif how == "insert":
            log.insert(0, {"t": "z"})
        else:
            del log[1:]
        return {"log": log}, END

    done = run(wf, store=store)
    assert get_checkpoint(done.run_id, store=store).state == done.state


def test_check_mutations_names_an_item_changed_in_place_beside_a_replaced_one(
    store: Store,
) -> None:
    """One item replaced makes the delta carry the whole list, but a later keyframe still
    reuses packs by identity: the item mutated in place must be named all the same."""
    wf = Workflow("mixed-edit", check_mutations=True)

    @wf.step(entry=True)
    def start(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"log": [{"t": "a"}, {"t": "b"}]}, "edit"

    @wf.step
    def edit(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        log = state["log"]
        log[1]["t"] = "redacted"
        return {"log": [{"t": "A"}, *log[1:]]}, END

    with pytest.raises(ConfigurationError, match=r"changed state\['log'\]\[1\] in place"):
        run(wf, store=store)


def test_metadata_that_would_read_as_encrypted_is_refused_by_key(store: Store) -> None:
    """A value starting with $sg:enc: would later be taken for a sealed one and fail to
    decrypt in history and listings; it is refused where it comes in, by key."""
    wf = Workflow("tagger")

    @wf.step(entry=True)
    def start(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        ctx.tag(note="$sg:enc:k1:forged")
        return {}, END

    with pytest.raises(SerializationError, match=r"metadata\['who'\].*\$sg:enc:"):
        run(wf, store=store, metadata={"who": "$sg:enc:k1:abc"})
    assert list_runs(store=store) == []  # nothing was created
    with pytest.raises(SerializationError, match=r"step 'start' metadata\['note'\]"):
        run(wf, store=store, metadata={"who": "ada"})


def test_check_mutations_names_a_nested_dict_entry_changed_in_place(store: Store) -> None:
    """{call_id: result} is packed like a list: a result edited in place, in a dict that
    is returned, would keep its packed value; the check names it at the step."""
    wf = Workflow("results-edit", check_mutations=True)

    @wf.step(entry=True)
    def start(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"results": {"c0": {"status": "pending"}, "c1": {"status": "pending"}}}, "edit"

    @wf.step
    def edit(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        state["results"]["c0"]["status"] = "done"
        return {"results": {**state["results"], "c2": {"status": "new"}}}, END

    with pytest.raises(ConfigurationError, match=r"changed state\['results'\]\['c0'\] in place"):
        run(wf, store=store)


def test_run_and_resume_never_format_the_whole_result(
    store: Store, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest
) -> None:
    """asyncio.run formats its SIGINT handler, which holds the finished task and its
    result: a RunResult repr costs time in the size of the state (20 ms at 4 MB)."""
    import signal

    from savegame import RunResult

    formatted: list[object] = []

    def counted(self: object) -> str:
        formatted.append(self)  # asyncio swallows an error raised here, so count instead
        return "RunResult(...)"

    monkeypatch.setattr(RunResult, "__repr__", counted)
    # asyncio.run only installs its handler over Python's default one, which a shell
    # replaces with SIG_IGN for a job it starts in the background.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    request.addfinalizer(lambda: signal.signal(signal.SIGINT, previous))
    wf = Workflow("pausing")

    @wf.step(entry=True)
    def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"answer": ctx.interrupt("go on?")}, END

    paused = run(wf, {}, store=store)
    assert paused.status is RunStatus.INTERRUPTED
    done = resume(paused.run_id, value="yes", workflow=wf, store=store)
    assert done.status is RunStatus.COMPLETED and done.state == {"answer": "yes"}
    assert formatted == []


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_a_finished_run_leaves_nothing_for_the_cycle_collector(
    store: Store, durability: Durability
) -> None:
    """A run's loop, encoder and packs go when run() and resume() return. A cycle among
    them (loop -> writer -> the loop's callback) kept a finished run's state and its packs
    alive until the collector's next full pass, which a busy worker may not reach soon."""
    wf = Workflow("pausing")

    @wf.step(entry=True)
    def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"answer": ctx.interrupt("go on?"), "pad": "x" * 5000}, END

    run(counter(limit=3), {}, store=store, durability=durability)  # first-call caches
    gc.collect()
    gc.disable()
    try:
        result = run(counter(limit=10), {}, store=store, durability=durability)
        after_run = gc.collect()
        paused = run(wf, {}, store=store, durability=durability)
        done = resume(paused.run_id, value="yes", workflow=wf, store=store)
        after_resume = gc.collect()
    finally:
        gc.enable()
    assert result.state["n"] == 10 and done.state["answer"] == "yes"
    assert (after_run, after_resume) == (0, 0)


def test_a_write_in_flight_when_arun_is_cancelled_still_reaches_the_observer() -> None:
    """arun writes on a worker thread; cancelling the run does not stop a write already
    started. Its checkpoint is durable, so the observer must still hear of it."""
    entered, release = threading.Event(), threading.Event()

    class Held(MemoryStore):
        @property
        def capabilities(self) -> Capabilities:
            # It waits on an event: called on the loop, it would hold the loop too.
            return dataclasses.replace(super().capabilities, blocking=True)

        def put_checkpoint(self, record: Any, **kwargs: Any) -> Any:
            if record.header.step == 1:
                entered.set()
                release.wait(10)
            return super().put_checkpoint(record, **kwargs)

    store = Held()
    seen: list[int] = []
    told = threading.Event()

    def heard(header: Any, seconds: float) -> None:
        seen.append(header.step)
        if header.step == 1:
            told.set()

    observer = Observer(on_checkpoint=heard)

    async def main() -> None:
        task = asyncio.create_task(arun(counter(limit=3), {}, store=store, observer=observer))
        assert await asyncio.to_thread(entered.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        release.set()

    asyncio.run(main())
    # The write goes on in savegame's io thread, which asyncio.run does not wait for
    # (it waits only for the loop's default executor): wait for the notice itself.
    assert told.wait(10)
    assert store.get_run(store.list_runs()[0].run_id).step == 1  # the write committed
    assert seen == [0, 1]


@pytest.mark.parametrize("blocking", [False, True])
def test_arun_calls_a_store_that_does_not_block_on_its_loop(blocking: bool) -> None:
    """memory:// answers in microseconds: an async run calls it on the loop, where a
    thread hop would cost more than the call; a store that blocks gets a worker thread."""
    threads: set[int] = set()

    class Recording(MemoryStore):
        @property
        def capabilities(self) -> Capabilities:
            return dataclasses.replace(super().capabilities, blocking=blocking)

        def put_checkpoint(self, record: Any, **kwargs: Any) -> Any:
            threads.add(threading.get_ident())
            return super().put_checkpoint(record, **kwargs)

    async def main() -> int:
        result = await arun(counter(limit=3), {}, store=Recording())
        assert result.state["n"] == 3
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert threads and (loop_thread in threads) is not blocking


class CountingReads(SqliteStore):
    """A real SQLite store that counts reads of the run row."""

    reads = 0

    def get_run(self, run_id: str) -> RunInfo:
        self.reads += 1
        return super().get_run(run_id)


@pytest.mark.parametrize("durability", ["sync", "async"])
def test_a_step_after_a_written_checkpoint_reads_no_run_row(
    tmp_path: Path, durability: Durability
) -> None:
    """The cancel flag comes back with each sync write, so a step does not read the
    run again (on PostgreSQL and Redis that read is a round trip)."""
    store = CountingReads(tmp_path / "s.db")
    result = run(counter(limit=10), {}, store=store, durability=durability)
    assert result.state["n"] == 10
    # Sync: only the first step, which follows no write of this process. Async writes
    # return before they commit, so every boundary reads the run.
    assert store.reads == (1 if durability == "sync" else 10)
    store.close()


def test_a_cancel_requested_by_a_step_stops_the_run_at_the_next_boundary(store: Store) -> None:
    wf = Workflow("self-cancelling")

    @wf.step(entry=True)
    def tick(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        n = state.get("n", 0) + 1
        if n == 3:
            store.request_cancel(ctx.run_id)
        return {"n": n}, "tick"

    result = run(wf, {}, store=store)
    assert result.status is RunStatus.CANCELLED and result.state == {"n": 3}


@pytest.mark.parametrize("after", [2, 4])
def test_a_cancel_asked_by_a_checkpoint_observer_stops_the_next_step(
    store: Store, after: int
) -> None:
    """A budget guard as an observer: the flag the write read is stale once user code ran."""

    def guard(header: CheckpointHeader, seconds: float) -> None:
        if header.step == after:
            store.request_cancel(header.run_id)

    wf = Workflow("guarded")

    @wf.step(entry=True)
    def tick(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        n = state.get("n", 0) + 1
        return {"n": n}, ("tick" if n < 5 else END)

    result = run(wf, {}, store=store, observer=Observer(on_checkpoint=guard))
    assert result.status is RunStatus.CANCELLED and result.state == {"n": after}


@pytest.mark.parametrize(
    ("ids", "message"),
    [
        ({"run_id": "a\nb"}, r"run_id 'a\\nb' has whitespace \(U\+000A\)"),
        ({"run_id": ""}, "run_id must not be empty"),
        ({"thread_id": "t\x1b[2J"}, r"thread_id .* has a control character"),
        ({"thread_id": "t" * 1000}, "thread_id is 1000 characters long; at most 200"),
    ],
    ids=["newline", "empty", "escape", "too-long"],
)
def test_ids_a_user_gives_are_checked_before_anything_is_stored(
    store: Store, ids: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        run(counter(), {}, store=store, **ids)
    with pytest.raises(ConfigurationError, match=message):
        asyncio.run(arun(counter(), {}, store=store, **ids))
    with pytest.raises(ConfigurationError, match=message):
        submit(counter(), {}, store=store, **ids)
    assert store.list_runs() == []
