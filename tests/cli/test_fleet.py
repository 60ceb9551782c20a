"""submit and worker: queued runs executed by real worker processes, stopped with a real SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

import savegame

from .conftest import clean_env
from .test_errors import assert_one_error_line

SLOW = textwrap.dedent(
    """
    import time

    from savegame import END, Workflow

    wf = Workflow("slow")


    @wf.step(entry=True)
    def tick(state, ctx):
        time.sleep(0.1)
        n = state.get("n", 0) + 1
        return {"n": n}, ("tick" if n < state["until"] else END)
    """
)


@pytest.fixture
def slow(tmp_path: Path) -> str:
    path = tmp_path / "slow_flow.py"
    path.write_text(SLOW)
    return f"{path}:wf"


def test_submit_queues_a_run_without_running_it(cli: Any, ref: str, store: str) -> None:
    out = cli("submit", ref, "--input", '{"until": 2}', "--run-id", "q1", "--store", store)
    assert out.exit_code == 0, out.stderr
    assert "queued run q1 (counter, thread q1)" in out.stdout
    assert f"savegame worker --store {store}" in out.stdout
    info = cli("submit", ref, "--thread", "t", "--store", store, "--json").json()
    assert (info["status"], info["thread_id"], info["step"]) == ("queued", "t", 0)
    assert info["workflow_ref"].endswith("counter_flow.py:wf")
    runs = cli("runs", "--status", "queued", "--store", store, "--json").json()
    assert {r["run_id"] for r in runs} == {"q1", info["run_id"]}


def test_submit_refuses_bad_input(cli: Any, ref: str, store: str) -> None:
    assert_one_error_line(cli("submit", ref, "--input", "[1]", "--store", store), "--input")
    assert_one_error_line(cli("submit", f"{ref}x", "--store", store), "has no attribute")
    assert cli("runs", "--store", store, "--json").json() == []


def test_a_worker_process_runs_the_queued_runs_then_exits_when_idle(
    cli: Any, ref: str, store: str, proc: Any, tmp_path: Path
) -> None:
    for run_id in ("q1", "q2"):
        cli("submit", ref, "--input", '{"until": 3}', "--run-id", run_id, "--store", store)
    out = proc(
        "worker", "--exit-when-idle", "0.3", "--poll", "0.05", "--store", store, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "worker stopped: claimed 2 runs (2 completed)"
    events = out.stderr.splitlines()
    assert any("claimed run q1 (token " in line for line in events), out.stderr
    assert any(line.endswith("run q2 completed at step 3") for line in events), out.stderr
    for run_id in ("q1", "q2"):
        shown = cli("show", run_id, "--store", store, "--json").json()
        assert (shown["status"], shown["state"]["n"]) == ("completed", 3)


def test_a_worker_only_claims_the_workflows_it_is_given(
    cli: Any, ref: str, store: str, proc: Any, tmp_path: Path
) -> None:
    cli("submit", ref, "--run-id", "q1", "--store", store)
    args = ("worker", "--exit-when-idle", "0.2", "--poll", "0.05", "--store", store)
    out = proc(*args, "--workflow", "other", "--workflow", "another", cwd=tmp_path)
    assert (out.returncode, out.stdout.strip()) == (
        0,
        "worker stopped: claimed 0 runs (nothing to do)",
    )
    assert savegame.client.get_run("q1", store=store).status is savegame.RunStatus.QUEUED


def wait_for(condition: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_sigterm_stops_a_worker_at_a_step_boundary_and_another_finishes(
    cli: Any, slow: str, store: str, proc: Any, tmp_path: Path
) -> None:
    cli("submit", slow, "--input", '{"until": 15}', "--run-id", "long", "--store", store)
    worker = subprocess.Popen(
        [sys.executable, "-m", "savegame", "worker", "--poll", "0.05", "--store", store],
        cwd=tmp_path,
        env=clean_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(lambda: savegame.client.get_run("long", store=store).step >= 2)
        worker.send_signal(signal.SIGTERM)
        stopped_at = time.monotonic()
        stdout, stderr = worker.communicate(timeout=10)
    finally:
        if worker.poll() is None:
            worker.kill()
    assert worker.returncode == 0, stderr
    assert time.monotonic() - stopped_at < 3
    assert stdout.strip() == "worker stopped: claimed 1 run (1 left running for another worker)"
    assert "finishing current steps, then stopping" in stderr

    info = savegame.client.get_run("long", store=store)
    assert (info.status, info.lease) == (savegame.RunStatus.RUNNING, None)
    assert 2 <= info.step < 15
    head = savegame.client.get_checkpoint("long", store=store)
    # A step boundary: the head is the run's last finished step, with the next step named.
    assert (head.checkpoint_id, head.step, head.next) == (
        info.head_checkpoint_id,
        info.step,
        "tick",
    )
    assert head.state["n"] == info.step
    assert f"run long stopped at step {info.step}" in stderr

    out = proc(
        "worker", "--exit-when-idle", "0.3", "--poll", "0.05", "--store", store, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    done = cli("show", "long", "--store", store, "--json").json()
    assert (done["status"], done["step"], done["state"]["n"]) == ("completed", 15, 15)
    steps = [h["step"] for h in cli("history", "long", "--store", store, "--json").json()]
    assert steps == list(range(15, -1, -1))  # no step was lost or done twice


@pytest.mark.parametrize(
    ("url", "fragment"),
    [("bogus://x", "unknown store URL 'bogus://x'"), ("memory://", "lives in one process")],
)
def test_a_worker_refuses_a_store_it_cannot_share(cli: Any, url: str, fragment: str) -> None:
    out = cli("worker", "--exit-when-idle", "0", "--store", url)
    assert_one_error_line(out, fragment)
    assert out.exit_code == 2


def test_runs_shows_each_run_s_version_and_what_a_queued_one_waits_for(
    cli: Any, tmp_path: Path, store: str
) -> None:
    flow = tmp_path / "versioned_flow.py"
    flow.write_text(SLOW.replace('Workflow("slow")', 'Workflow("slow", version="2024-12-01")'))
    ref = f"{flow}:wf"
    assert cli("submit", ref, "--input", '{"until": 1}', "--store", store).exit_code == 0
    assert cli("submit", ref, "--input", '{"until": 1}', "--store", store).exit_code == 0
    out = cli("runs", "--store", store)
    assert out.exit_code == 0, out.stderr
    assert "version" in out.stdout and "2024-12-01" in out.stdout
    assert "2 queued runs of version 2024-12-01: waiting for a worker of version" in out.stdout
    listed = cli("runs", "--store", store, "--json").json()
    assert {r["version"] for r in listed} == {"2024-12-01"}
    # A worker of another version leaves them queued; one of theirs runs them.
    idle = cli("worker", "--store", store, "--version", "v0", "--exit-when-idle", "0.3")
    assert idle.exit_code == 0, idle.stderr
    assert {r["status"] for r in cli("runs", "--store", store, "--json").json()} == {"queued"}
    ran = cli(
        "worker", "--store", store, "--version", "v9", "--compatible", "2024-12-01",
        "--exit-when-idle", "0.3",
    )  # fmt: skip
    assert ran.exit_code == 0, ran.stderr
    assert {r["status"] for r in cli("runs", "--store", store, "--json").json()} == {"completed"}
    assert "waiting for a worker" not in cli("runs", "--store", store).stdout
    run_id = listed[0]["run_id"]
    assert (
        "started under code version 2024-12-01" in cli("history", run_id, "--store", store).stdout
    )


def test_worker_refuses_compatible_versions_without_its_own(cli: Any, store: str) -> None:
    assert_one_error_line(
        cli("worker", "--store", store, "--compatible", "v1", "--exit-when-idle", "0.1"),
        "version=",
    )


def test_history_names_the_version_of_a_paused_run(
    cli: Any, store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.effects.patch_flows import old

    monkeypatch.setenv("SAVEGAME_LEDGER", str(tmp_path / "ledger.txt"))
    paused = savegame.run(old(), {"order": "o-1"}, store=store)  # two checkpoints at step 0
    out = cli("history", paused.run_id, "--store", store)
    assert out.exit_code == 0, out.stderr
    assert "started under code version v1" in out.stdout
