"""Invariants 1-3 under real SIGKILL: atomic boundaries, resume from storage only, deterministic resume.

A child process runs the ten-step workload against a real SQLite file and is
killed (a) right after each step's checkpoint is committed and (b) at random
moments, including inside checkpoint writes. A fresh process then resumes the
run. The final state must equal an uninterrupted run's byte for byte, every
checkpoint the child reported as committed must be in the store, and the
history must be one unbroken chain.
"""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from savegame import RunStatus, codec, open_store
from savegame.client import get_checkpoint, history
from savegame.errors import NotFoundError

from .harness import Outcome, kill_after_delay, kill_after_step, run_to_end

pytestmark = pytest.mark.crash

STEPS = 10


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    url = f"sqlite:///{tmp_path_factory.mktemp('ref') / 'ref.db'}"
    out = run_to_end("start", url, "ref-run")
    assert out.done == "completed", out.stderr
    assert [step for step, _ in out.committed] == list(range(STEPS + 1))
    out.stderr = url
    return out


@pytest.fixture(scope="module")
def reference(uninterrupted: Outcome) -> bytes:
    """Canonical bytes of the final state of an uninterrupted run."""
    return codec.canonical(get_checkpoint("ref-run", store=uninterrupted.stderr).state)


def check_store(url: str, run_id: str, reported: list[Outcome], reference: bytes) -> None:
    store = open_store(url)
    try:
        headers = history(run_id, store=store)
        ids = {h.checkpoint_id for h in headers}
        # Invariant 1: nothing a child saw committed is missing.
        for out in reported:
            for _, cid in out.committed:
                assert cid in ids, f"committed checkpoint {cid} is missing"
        # One unbroken chain from the head back to the input checkpoint.
        by_id = {h.checkpoint_id: h for h in headers}
        head = headers[0]
        assert head.status is RunStatus.COMPLETED and head.step == STEPS
        chain, cursor = [], head
        while cursor is not None:
            chain.append(cursor.step)
            cursor = by_id.get(cursor.parent_id) if cursor.parent_id else None
        assert chain == list(range(STEPS, -1, -1))
        # Invariant 3: byte for byte the uninterrupted run's final state.
        assert codec.canonical(get_checkpoint(run_id, store=store).state) == reference
    finally:
        store.close()


@pytest.mark.parametrize("step", range(STEPS))
def test_kill_right_after_each_step_then_resume(
    tmp_path: Path, reference: bytes, step: int
) -> None:
    url = f"sqlite:///{tmp_path / 'crash.db'}"
    killed = kill_after_step("start", url, "run", step)
    assert killed.returncode == -9
    assert killed.committed[-1][0] == step
    resumed = run_to_end("resume", url, "run")
    assert resumed.done == "completed", resumed.stderr
    # The resumed process continued after the kill point, never before it.
    assert [s for s, _ in resumed.committed] == list(range(step + 1, STEPS + 1))
    check_store(url, "run", [killed, resumed], reference)


def _random_kill(
    tmp_path: Path, seed: int, reference: bytes, window: tuple[float, float]
) -> list[Outcome]:
    rng = random.Random(seed)
    url = f"sqlite:///{tmp_path / f'random-{seed}.db'}"
    outcomes: list[Outcome] = []
    # Kill the first process at a random moment of its life (import and setup included),
    # and sometimes the resuming process too.
    mode = "start"
    for attempt in range(3):
        delay = rng.uniform(*window)
        # The first process is always killed; the resuming one half the time.
        killing = attempt == 0 or (attempt == 1 and rng.random() < 0.5)
        out = kill_after_delay(mode, url, "run", delay) if killing else run_to_end(mode, url, "run")
        outcomes.append(out)
        if out.done == "completed":
            break
        store = open_store(url)
        try:
            store.get_run("run")
            mode = "resume"
        except NotFoundError:
            mode = "start"  # killed before the run was created: nothing to resume
        finally:
            store.close()
    if outcomes[-1].done != "completed":
        final = run_to_end(mode, url, "run")
        outcomes.append(final)
        if final.done is None:
            # Killed after the final checkpoint but before printing: nothing left to resume.
            assert "cannot resume run run: it is completed" in final.stderr, final.stderr
    check_store(url, "run", outcomes, reference)
    return outcomes


def _random_kills(
    tmp_path: Path, reference: bytes, uninterrupted: Outcome, *, kills_wanted: int, seeds: int
) -> None:
    # Kill anywhere from shortly before the first checkpoint to just after the last,
    # measured on this machine, so most kills land inside steps and writes.
    assert uninterrupted.first_checkpoint_after and uninterrupted.ended_after
    # Two children run at once below, so stretch the window for the shared cores.
    low, high = 0.8 * uninterrupted.first_checkpoint_after, 1.1 * uninterrupted.ended_after
    # A child that finished before its kill time is not a kill, and how many do depends
    # on how fast this machine runs at the moment (one CI run got 41 of 60): so keep
    # going, 10 seeds at a time, until enough real kills. The reference was timed once;
    # on a machine that got busier since, every kill lands before the first checkpoint,
    # so a batch in which no child got past it moves the window later; on one that got
    # quieter (or a reference timed while it was busy), most children end before their
    # kill, so a batch in which fewer than half were killed moves it earlier.
    results: list[list[Outcome]] = []
    kills = 0
    with ThreadPoolExecutor(max_workers=2) as pool:
        for start in range(0, seeds, 10):
            batch = range(start, start + 10)
            window = (low, high)
            outs = list(
                pool.map(lambda s, w=window: _random_kill(tmp_path, s, reference, w), batch)
            )
            results += outs
            kills = sum(1 for seed in results for o in seed if o.returncode == -9)
            if max(_progress(o) for o in outs) < 1:
                low, high = low * 1.5, high * 1.5
            elif sum(1 for o in outs if o[0].returncode == -9) < len(outs) / 2:
                low, high = low / 1.5, high / 1.5
            if kills >= kills_wanted and _spread(results):
                break
    assert kills >= kills_wanted, f"{kills} kills in {len(results)} seeds"
    # The kills spread over the run's life: some before any step, some mid-run.
    assert _spread(results), [_progress(o) for o in results]


def _progress(outcomes: list[Outcome]) -> int:
    """The last step the first (killed) process committed; -1 for none."""
    return max((s for s, _ in outcomes[0].committed), default=-1)


def _spread(results: list[list[Outcome]]) -> bool:
    progress = [_progress(o) for o in results]
    return min(progress) < 1 and max(progress) >= 1


def test_kill_at_random_moments_then_resume(
    tmp_path: Path, reference: bytes, uninterrupted: Outcome
) -> None:
    _random_kills(tmp_path, reference, uninterrupted, kills_wanted=15, seeds=60)


@pytest.mark.soak
def test_kill_at_many_random_moments_then_resume(
    tmp_path: Path, reference: bytes, uninterrupted: Outcome
) -> None:
    """Fifty kills or more, in CI's soak step (``python -m pytest -m soak``)."""
    _random_kills(tmp_path, reference, uninterrupted, kills_wanted=50, seeds=160)
