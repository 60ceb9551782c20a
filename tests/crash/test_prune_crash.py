"""Retention under real SIGKILL: a prune killed between two delete batches leaves a sound store.

Checkpoints go in batches; a child process prunes a real SQLite file and kills
itself right after its k-th batch. Whatever k, ``verify`` must then pass (no
delta left without its base) and every run's head must load as it did before.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from savegame import StorageConfig, run
from savegame.client import get_checkpoint, prune, verify
from savegame.maintenance import RetentionPolicy
from savegame.model import utcnow

from .harness import _env
from .workload import STEPS, wf

pytestmark = pytest.mark.crash

CHILD = str(Path(__file__).with_name("prune_child.py"))
RUNS = 3
BATCH = 3
#: Chains of a keyframe and three deltas (the input and the last checkpoint are keyframes of
#: their own): keep_last=1 drops all but the head, bases of deltas among them.
STORAGE = StorageConfig(keyframe_every=4)


def build(url: str) -> dict[str, Any]:
    """Runs of the crash workload, with long delta chains; each run's head state."""
    heads = {}
    for i in range(RUNS):
        result = run(wf, {}, run_id=f"run-{i}", store=url, storage=STORAGE)
        heads[result.run_id] = get_checkpoint(result.run_id, store=url).state
    return heads


@pytest.mark.parametrize("kill_after", [1, 3, 5, 8])
def test_a_prune_killed_after_any_batch_leaves_a_store_that_verifies(
    tmp_path: Path, kill_after: int
) -> None:
    url = f"sqlite:///{tmp_path / 'prune.db'}"
    heads = build(url)
    doomed = prune(RetentionPolicy(keep_last=1), store=url, dry_run=True).checkpoints
    assert len(doomed) == RUNS * STEPS and kill_after < len(doomed) / BATCH  # a cut in the middle

    child = subprocess.run(
        [sys.executable, CHILD, url, str(BATCH), str(kill_after)],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    batches = [line.split() for line in child.stdout.splitlines()]
    assert batches == [["BATCH", str(n), str(BATCH)] for n in range(1, kill_after + 1)]

    report = verify(store=url)
    assert report.ok, report.damaged
    assert report.checkpoints == RUNS * (STEPS + 1) - kill_after * BATCH
    for run_id, state in heads.items():
        assert get_checkpoint(run_id, store=url).state == state
    # The next prune finishes the job.
    rest = prune(RetentionPolicy(keep_last=1), store=url, now=utcnow())
    assert len(rest.checkpoints) == len(doomed) - kill_after * BATCH
    assert verify(store=url).checkpoints == RUNS
