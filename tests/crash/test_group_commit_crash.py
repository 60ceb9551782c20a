"""SIGKILL in the middle of a group commit: a batch lands whole or not at all, every
checkpoint reported committed survives, and every run resumes to the state of a run
never interrupted (SQLite and PostgreSQL)."""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import savegame
from savegame import RunStatus
from savegame.errors import NotFoundError
from savegame.stores import open_store
from tests import services
from tests.crash import group_workload
from tests.crash.harness import spawn

pytestmark = pytest.mark.crash

RUNS = 8
SEEDS = [0, 1, *(pytest.param(seed, marks=pytest.mark.soak) for seed in range(2, 12))]
"""Two kills per store in the default run; ten more in the soak step."""


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with services.scratch_store(request.param, tmp_path) as store:
        yield store.url


def kill_mid_batch(
    url: str, seed: int, mode: str = "run"
) -> tuple[list[list[str]], dict[str, int]]:
    """Start the child, SIGKILL it a random 0-3 ms after a random BATCH line; return the
    batches it announced and the last step it reported committed per run."""
    rng = random.Random(seed)
    child = str(Path(group_workload.__file__).with_name("group_child.py"))
    proc = spawn(mode, url, str(RUNS), script=child)
    batches: list[list[str]] = []
    committed: dict[str, int] = {}
    target = rng.randint(1, 6)
    assert proc.stdout is not None
    try:
        for line in proc.stdout:
            parts = line.split()
            if parts[:1] == ["BATCH"]:
                batches.append(parts[1:])
                if len(batches) == target:
                    time.sleep(rng.uniform(0, 0.003))
                    proc.send_signal(signal.SIGKILL)
                    break
            elif parts[:1] == ["CP"]:
                committed[parts[1]] = int(parts[2])
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()  # reaps it and closes the pipes
    return batches, committed


@pytest.mark.parametrize("mode", ["run", "arun"])
@pytest.mark.parametrize("seed", SEEDS)
def test_a_kill_mid_batch_leaves_whole_batches_and_every_run_resumes(
    url: str, seed: int, mode: str
) -> None:
    """``run``: each run in a thread; ``arun``: all on one event loop, batched by its
    committer before the io thread (runtime/_commit.py's LoopCommit)."""
    batches, committed = kill_mid_batch(url, seed, mode)
    assert batches, "the child announced no batch: the runs never shared a transaction"
    store = open_store(url)
    try:
        for batch in batches:
            present = []
            for checkpoint_id in batch:
                try:
                    store.get_checkpoint(checkpoint_id)
                    present.append(True)
                except NotFoundError:
                    present.append(False)
            assert all(present) or not any(present), f"a batch half written: {batch} {present}"
        for run_id, step in committed.items():
            # What was reported committed is durable.
            assert store.get_run(run_id).step >= step
    finally:
        store.close()
    for i in range(RUNS):
        run_id = f"g{i}"
        try:
            info = savegame.client.get_run(run_id, store=url)
        except NotFoundError:
            continue  # killed before this run was created: nothing to resume
        if not info.status.finished:
            savegame.resume(run_id, store=url)
        assert savegame.client.get_run(run_id, store=url).status is RunStatus.COMPLETED
        assert savegame.client.get_checkpoint(run_id, store=url).state == group_workload.EXPECTED
        steps = [h.step for h in savegame.client.history(run_id, store=url)]
        assert sorted(steps) == list(range(group_workload.STEPS + 1))
