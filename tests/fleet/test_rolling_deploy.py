"""A rolling deploy on PostgreSQL: release v1's workers are replaced by v2's while runs
are in flight, and no run ever goes to code that cannot continue it.

Two releases of one project, each a folder with its ``app.py`` (``app:wf``, the same
reference in both, as after a real deploy): v2 adds a step (``audit``) that v1's code
does not have, so a v2 run claimed by a v1 worker would fail there, and puts a change in
``work`` behind ``ctx.patched``. v2 declares v1 compatible: its workers continue v1 runs.

The workers are real ``savegame worker`` processes (``--version``, ``--compatible``).
Each step execution appends ``run_id step code-version pid`` to a ledger file outside
the store; the test reads every line against the version each run started under.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from savegame.client import get_checkpoint, list_runs
from savegame.model import RunStatus
from tests import services

pytestmark = [pytest.mark.slow, pytest.mark.crash]

SRC = Path(__file__).resolve().parents[2] / "src"
OLD_RUNS, HELD_RUNS, NEW_RUNS = 10, 2, 6

APP = """
import os
import time

from savegame import END, Workflow

VERSION = {version!r}
wf = Workflow("deploy", version=VERSION)


def note(ctx, step):
    line = f"{{ctx.run_id}} {{step}} {{VERSION}} {{os.getpid()}}\\n"
    fd = os.open(os.environ["DEPLOY_LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


@wf.step(entry=True)
def work(state, ctx):
    note(ctx, "work")
    time.sleep(0.2)
    while state.get("hold") and VERSION == "v1":
        time.sleep(0.05)  # v1 holds these runs until it is killed; v2 dropped the hold
    n = state.get("n", 0) + 1
    {patch}
    return {{"n": n}}, ("work" if n < 4 else {after!r})
{more}
"""

PATCH_V2 = """if ctx.patched("faster"):
        time.sleep(0.0)"""

AUDIT = """

@wf.step
def audit(state, ctx):
    note(ctx, "audit")
    return {"audited": True}, END
"""


def release(root: Path, version: str) -> Path:
    folder = root / version
    folder.mkdir()
    text = APP.format(
        version=version,
        patch=PATCH_V2 if version == "v2" else "pass",
        after="audit" if version == "v2" else END_NAME,
        more=AUDIT if version == "v2" else "",
    )
    (folder / "app.py").write_text(textwrap.dedent(text))
    return folder


END_NAME = "__end__"


def _env(ledger: Path) -> dict[str, str]:
    return {
        **os.environ,
        "DEPLOY_LEDGER": str(ledger),
        "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
    }


def submit_runs(
    folder: Path, url: str, count: int, ledger: Path, given: dict[str, object] | None = None
) -> list[str]:
    """``count`` runs of the release in ``folder``, submitted from a process of its own
    (so each run's reference is ``app:wf`` and its version that release's)."""
    code = (
        "import sys, savegame, app\n"
        f"ids = [savegame.submit(app.wf, {given!r}, store={url!r}).run_id"
        f" for _ in range({count})]\n"
        "print(' '.join(ids))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=folder, env={**_env(ledger), "PYTHONPATH":
        f"{folder}{os.pathsep}{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


def worker(
    folder: Path, url: str, ledger: Path, *flags: str, slots: int = 2
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable, "-m", "savegame", "worker", "--store", url, "--app-dir",
            str(folder), "--concurrency", str(slots), "--lease-ttl", "3", "--poll", "0.05",
            "--exit-when-idle", "3", *flags,
        ],
        cwd=folder, env=_env(ledger), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def ledger_lines(ledger: Path) -> list[tuple[str, str, str, int]]:
    if not ledger.exists():
        return []
    found = []
    for line in ledger.read_text().splitlines():
        run_id, step, version, pid = line.split()
        found.append((run_id, step, version, int(pid)))
    return found


def wait_until(check: object, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.02)
    raise AssertionError(f"gave up waiting: {what}")


@pytest.fixture
def url() -> Iterator[str]:
    with services.postgres_schema("deploy") as name:
        yield services.postgres_url(name)


def test_a_rolling_deploy_never_hands_a_run_to_code_that_cannot_continue_it(
    tmp_path: Path, url: str
) -> None:
    ledger = tmp_path / "ledger.txt"
    v1, v2 = release(tmp_path, "v1"), release(tmp_path, "v2")
    old = submit_runs(v1, url, OLD_RUNS, ledger)
    held = submit_runs(v1, url, HELD_RUNS, ledger, {"hold": True})  # the newest: claimed last
    procs: list[subprocess.Popen[str]] = []

    def count(status: RunStatus, ids: list[str]) -> int:
        return sum(
            1 for r in list_runs(store=url, limit=100) if r.run_id in ids and r.status is status
        )

    try:
        # v1 serving, one slot more than the runs it will hold: a slot stays free to claim.
        v1_worker = worker(v1, url, ledger, "--version", "v1", slots=HELD_RUNS + 1)
        procs.append(v1_worker)
        wait_until(
            lambda: (
                count(RunStatus.COMPLETED, old) == OLD_RUNS
                and {r for r, _, v, _ in ledger_lines(ledger) if v == "v1"} >= set(held)
            ),
            "v1's worker finishing its runs and holding the last ones",
        )
        # The deploy: v2's code starts runs, and v2's worker comes up beside v1's, whose
        # free slot polls all along: a v2 run it took would fail in ``audit``.
        new = submit_runs(v2, url, NEW_RUNS, ledger)
        v2_worker = worker(v2, url, ledger, "--version", "v2", "--compatible", "v1")
        procs.append(v2_worker)
        wait_until(lambda: count(RunStatus.COMPLETED, new) >= NEW_RUNS // 2, "v2's first runs")
        # v1's worker is SIGKILLed with runs in hand; v2's takes them over.
        in_hand = sum(1 for r in list_runs(store=url) if r.run_id in held and r.lease)
        v1_worker.send_signal(signal.SIGKILL)
        v1_worker.communicate(timeout=10)
        _out, err = v2_worker.communicate(timeout=120)
        assert v2_worker.returncode == 0, err[-3000:]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate(timeout=10)
    old += held

    runs = {r.run_id: r for r in list_runs(store=url, limit=100)}
    assert {r.status for r in runs.values()} == {RunStatus.COMPLETED}, {
        r.run_id: r.error for r in runs.values() if r.error
    }
    assert {runs[r].version for r in old} == {"v1"} and {runs[r].version for r in new} == {"v2"}
    # The ledger against each run's version: v1's code ran v1 runs only; v2's, both.
    lines = ledger_lines(ledger)
    can_continue = {"v1": {"v1"}, "v2": {"v1", "v2"}}
    wrong = [line for line in lines if runs[line[0]].version not in can_continue[line[2]]]
    assert wrong == []
    # Every v2 run went through the step v1's code lacks (so did v1 runs whose last
    # ``work`` step v2's code ran: it continues them as v2 does).
    audited = {run_id for run_id, step, _, _ in lines if step == "audit"}
    assert set(new) <= audited
    for run_id in new:
        assert get_checkpoint(run_id, store=url).state == {"n": 4, "audited": True}
    counts = Counter((runs[run_id].version, version) for run_id, _, version, _ in lines)
    by_code = {
        kind: len(
            {
                run_id
                for run_id, _, v, _ in lines
                if runs[run_id].version == kind[0] and v == kind[1]
            }
        )
        for kind in counts
    }
    # Printed for the report: step executions and runs per (run version, code version).
    print(f"\nin hand at the kill: {in_hand}; steps: {dict(counts)}; runs: {by_code}")
    assert by_code.get(("v2", "v1"), 0) == 0
    # The deploy really happened mid-flight: v1 runs ran under both releases' code.
    assert by_code.get(("v1", "v1"), 0) > 0 and by_code.get(("v1", "v2"), 0) > 0
