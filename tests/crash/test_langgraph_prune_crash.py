"""LangGraph's prune and copy_thread rebuild a line into a new run; SIGKILLed at any
moment, the thread reads as before (the old run until the new one is whole), and the
next prune or copy finishes the job."""

from __future__ import annotations

import os
import shutil
import signal
import time
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langgraph.types import Command

from savegame.langgraph import SavegameSaver
from tests.crash.harness import run_to_end, spawn

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "langgraph_prune_child.py")

pytestmark = pytest.mark.crash


def _state(url: str, thread: str) -> Any:
    from tests.crash.langgraph_prune_child import graph

    snapshot = graph(SavegameSaver(url)).get_state({"configurable": {"thread_id": thread}})
    return [m.content for m in snapshot.values["messages"]], snapshot.next


def _time(mode: str, url: str) -> float:
    """Seconds from the start of the rebuild to its end (the DONE line, not the exit)."""
    proc = spawn(mode, url, "t", script=SCRIPT)
    assert proc.stdout is not None
    started = 0.0
    for line in proc.stdout:
        if line.startswith("WORKING"):
            started = time.perf_counter()
        elif line.startswith("DONE"):
            break
    took = time.perf_counter() - started
    proc.communicate(timeout=60)
    return took


def _kill_while(mode: str, url: str, delay: float) -> bool:
    """Start ``mode`` and SIGKILL it ``delay`` seconds after it starts the rebuild; True
    when it was killed before it finished."""
    proc = spawn(mode, url, "t", script=SCRIPT)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("WORKING"):
            break
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    out, _ = proc.communicate(timeout=30)
    return "DONE" not in out


@pytest.mark.parametrize("mode", ["prune", "copy"])
def test_a_rebuild_killed_anywhere_loses_nothing(tmp_path: Any, mode: str) -> None:
    url = f"sqlite:///{tmp_path / 'lg.db'}"
    built = run_to_end("build", url, "t", script=SCRIPT)
    assert built.done == "completed", built.stderr
    # How long the rebuild takes here, on a copy: the kills land within it.
    shutil.copy(tmp_path / "lg.db", tmp_path / "calibrate.db")
    took = _time(mode, f"sqlite:///{tmp_path / 'calibrate.db'}")
    before = _state(url, "t")
    assert before[1] == ("wait",)
    killed = 0
    for i in range(4):  # spread over the rebuild: its start, a quarter, a half ...
        killed += _kill_while(mode, url, took * i / 4)
        assert _state(url, "t") == before
        if mode == "copy":
            copied = SavegameSaver(url).get_tuple({"configurable": {"thread_id": "t-copy"}})
            # A killed copy is invisible; a finished one reads as the source.
            assert copied is None or _state(url, "t-copy") == before
    assert killed > 0  # at least one kill landed mid-rebuild
    finished = run_to_end(mode, url, "t", script=SCRIPT)
    assert finished.done == "completed", finished.stderr
    target = "t" if mode == "prune" else "t-copy"
    assert _state(url, target) == before
    lines = SavegameSaver(url)._lines
    assert len(lines.runs(target, unfinished=True)) == 1  # the leftovers were deleted
    from tests.crash.langgraph_prune_child import graph

    out = graph(SavegameSaver(url)).invoke(
        Command(resume="yes"), {"configurable": {"thread_id": target}}
    )
    assert out["messages"][-1].content == "answer yes"
