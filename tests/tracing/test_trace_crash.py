"""A traced run SIGKILLed in one process and resumed in another: one trace."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from savegame import RunStatus
from savegame.client import get_run, history
from savegame.runtime._trace import TRACE_KEY

CHILD = Path(__file__).with_name("traced_child.py")


def _child(*args: str) -> subprocess.Popen[str]:
    src = str(Path(__file__).resolve().parents[2] / "src")
    env = {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.Popen(
        [sys.executable, str(CHILD), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_a_run_killed_and_resumed_in_another_process_stays_in_one_trace(
    tmp_path: Path, sqlite_url: str
) -> None:
    spans = tmp_path / "spans.jsonl"
    first = _child("start", sqlite_url, "order-1", str(spans))
    assert first.stdout is not None
    assert first.stdout.readline().strip() == "BLOCKED"
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)
    assert first.returncode == -signal.SIGKILL

    second = _child("resume", sqlite_url, "order-1", str(spans))
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    assert out.split() == ["DONE", "completed"]
    assert get_run("order-1", store=sqlite_url).status is RunStatus.COMPLETED

    lines: list[dict[str, Any]] = [json.loads(line) for line in spans.read_text().splitlines()]
    by_pid: dict[int, dict[str, dict[str, Any]]] = {}
    for line in lines:
        by_pid.setdefault(line["pid"], {})[line["name"]] = line
    killed, resumed = by_pid[first.pid], by_pid[second.pid]
    # The killed process's spans that ended got out; its open run and step two did not.
    assert set(killed) == {"start crashy", "step one", "execute_tool lookup"}
    assert set(resumed) == {"run crashy", "step two"}
    assert len({line["trace_id"] for line in lines}) == 1
    # The resumed execution hangs from the start span the first process ended.
    start = killed["start crashy"]
    assert resumed["run crashy"]["parent_id"] == start["span_id"]
    assert resumed["run crashy"]["attributes"]["savegame.resumed"] is True
    # It took over the lease the killed process never released, and says whose.
    assert resumed["run crashy"]["attributes"]["savegame.took_over"].split(":")[1] == str(first.pid)
    assert resumed["step two"]["parent_id"] == resumed["run crashy"]["span_id"]
    kept = {h.metadata.get(TRACE_KEY) for h in history("order-1", store=sqlite_url)}
    # Every checkpoint, both processes', keeps the start span as the run's trace.
    assert len(kept) == 1
    assert str(kept.pop()).startswith(f"00-{start['trace_id']}-{start['span_id']}-")
