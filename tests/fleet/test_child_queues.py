"""Issue 30, point 6, with real workers: a planner submitted to queue ``llm``
(concurrency 1) starts three children; two ``savegame worker --queue llm`` processes
complete the planner and its children, and never run two steps of the queue at once.

Before the fix the children went in no queue: these workers never claimed them and the
planner waited for ever. What ran at once is read from the markers every step appends
to a file (``child_queue_flows``), never from timing.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import services
from tests.runtime.child_queue_flows import check_tree_done, children_of, submit_tree

ROOT = Path(__file__).resolve().parents[2]
WORKERS = 2


@pytest.fixture(params=services.SQL_BACKENDS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with services.BACKENDS[request.param](tmp_path) as found:
        yield found


def _worker(url: str) -> subprocess.Popen[str]:
    # The workers import the planner as tests.runtime.child_queue_flows: the checkout's
    # root on their path, after the source under test.
    path = os.pathsep.join([str(ROOT / "src"), str(ROOT), os.environ.get("PYTHONPATH", "")])
    return subprocess.Popen(
        [
            sys.executable, "-m", "savegame", "worker", "--store", url, "--queue", "llm",
            "--concurrency", "3", "--poll", "0.02", "--lease-ttl", "10",
            "--exit-when-idle", "2",
        ],
        env={**os.environ, "PYTHONPATH": path}, cwd=ROOT,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


@pytest.mark.timeout(180)
def test_queue_workers_complete_a_planner_and_its_children_one_at_a_time(
    url: str, tmp_path: Path
) -> None:
    log = tmp_path / "marks.log"
    parent = submit_tree(url, log)
    workers = [_worker(url) for _ in range(WORKERS)]
    outs = []
    try:
        for proc in workers:
            _, err = proc.communicate(timeout=150)
            outs.append((proc.returncode, err[-2000:]))
    finally:
        for proc in workers:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)
    assert all(code == 0 for code, _ in outs), outs
    check_tree_done(url, parent, log)
    # Each child's step ran once, the planner's first step once and its second twice (it
    # waited, then the last child woke it): a start and an end marker each time.
    kids = children_of(parent, 3)
    steps = Counter(line.split(" ", 1)[1] for line in log.read_text().splitlines())
    assert steps == {f"{parent} plan": 2, f"{parent} gather": 4, **{f"{k} work": 2 for k in kids}}
