"""The demo's worker processes: spawn ``savegame.demo.child``, read its events, kill it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

import savegame
from savegame.errors import SavegameError

#: A child that says nothing for this long is killed and the demo fails.
CHILD_TIMEOUT = 30.0


class DemoError(SavegameError):
    """The demo could not carry out its plan (a child failed, the store is unsuitable)."""


@dataclass
class Child:
    """What one worker process did."""

    label: str
    pid: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    killed: bool = False
    returncode: int | None = None

    def last(self, kind: str) -> dict[str, Any] | None:
        return next((e for e in reversed(self.events) if e["event"] == kind), None)


def _env() -> dict[str, str]:
    # The child must import this very savegame, even when it is not installed (PYTHONPATH=src).
    root = str(Path(savegame.__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _event(line: str) -> dict[str, Any] | None:
    """A child's JSON event line; anything else a library might print is ignored."""
    line = line.strip()
    if not line.startswith("{"):
        return None
    try:
        event = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    return event if isinstance(event, dict) and "event" in event else None


def run_child(label: str, *args: str, kill_on: str | None = None) -> Child:
    """Run ``python -m savegame.demo.child ARGS`` to its end, or SIGKILL it at event ``kill_on``.

    Raises:
        DemoError: the child failed, went silent, or ended without the expected event.
    """
    child = Child(label)
    with subprocess.Popen(
        [sys.executable, "-m", "savegame.demo.child", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    ) as proc:
        child.pid = proc.pid
        watchdog = threading.Timer(CHILD_TIMEOUT, proc.kill)
        watchdog.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                event = _event(line)
                if event is None:
                    continue
                child.events.append(event)
                if kill_on is not None and event["event"] == kill_on:
                    os.kill(proc.pid, signal.SIGKILL)
                    child.killed = True
                    break
            _, stderr = proc.communicate()
        finally:
            watchdog.cancel()
    child.returncode = proc.returncode
    expected = kill_on or "done"
    if child.last(expected) is None or (kill_on is None and proc.returncode != 0):
        tail = stderr.strip().splitlines()[-1:] or ["no output"]
        raise DemoError(f"demo: {label} exited with {proc.returncode}: {tail[0]}")
    return child
