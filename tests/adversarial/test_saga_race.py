"""The worker's saga finisher (fleet/_sagas.py) racing ``savegame compensate`` run by a
person in another process, and another worker, on a saga whose process was SIGKILLed in
its first compensation: every compensation runs once (the one the kill left in doubt is
retried once under its own request id, being idempotent), counted in an outside ledger."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from savegame import RunStatus, open_store
from tests.adversarial.conftest import Raw

FLOW = Path(__file__).with_name("saga_race_flow.py")
ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
@pytest.mark.crash
def test_the_saga_finisher_racing_compensate_and_a_worker_undoes_each_write_once(
    raw: Raw, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.txt"
    env = {**os.environ, "SAGA_LEDGER": str(ledger), "PYTHONPATH": os.pathsep.join(sys.path)}
    start = subprocess.run(
        [sys.executable, str(FLOW), raw.url, "start"], cwd=ROOT, capture_output=True,
        env={**env, "SAGA_KILL_IN_RELEASE": "1"}, timeout=120,
    )  # fmt: skip
    assert start.returncode == -9, start.stderr.decode()[-2000:]
    with open_store(raw.url) as store:
        info = store.get_run("saga")
        assert info.status is RunStatus.COMPENSATING
        while (lease := store.get_run("saga").lease) is not None and lease.expires_at > time.time():
            time.sleep(0.1)  # the dead process's lease runs out: everyone may take it now
    workers = [
        subprocess.Popen([sys.executable, str(FLOW), raw.url, "work"], cwd=ROOT, env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for _ in range(2)
    ]  # fmt: skip
    people = [
        subprocess.Popen([sys.executable, "-m", "savegame", "compensate", "saga", "--store",
                          raw.url], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT)
        for _ in range(2)
    ]  # fmt: skip
    outputs = [p.communicate(timeout=120)[0].decode() for p in workers + people]
    for p, out in zip(workers, outputs, strict=False):
        assert p.returncode == 0, out[-2000:]
    with open_store(raw.url) as store:
        assert store.get_run("saga").status is RunStatus.COMPENSATED, outputs
    lines = ledger.read_text().splitlines()
    assert sorted(x for x in lines if x.startswith("book")) == [f"book 1{c}" for c in "ABCD"]
    releases = Counter(x for x in lines if x.startswith("release"))
    # Four writes undone: the one the kill interrupted twice (the call in doubt, then its
    # retry), every other exactly once, whoever of the four processes ran it.
    assert sorted(releases.values()) == [1, 1, 1, 2], (releases, outputs)
