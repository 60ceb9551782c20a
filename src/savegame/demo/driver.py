"""``savegame demo``: crash an agent for real, resume it elsewhere, compare with a clean run.

1. A child process starts the refund agent on a fresh SQLite store and stops
   dead right after checkpoint ``KILL_AFTER`` is committed; the parent SIGKILLs it.
2. A second, fresh child resumes the run from the store alone (it is told
   nothing but the run id; the workflow is imported from the stored reference).
3. The same agent runs uninterrupted on its own thread, as a reference.
4. The final states are compared byte for byte in canonical encoding.

This module has no rich or typer import: it returns a :class:`DemoReport`
and the CLI renders it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

import savegame
from savegame.codec import canonical
from savegame.errors import SavegameError

#: The step after whose checkpoint the first process is killed: the model has just
#: asked for two tool calls, which the resumed process then has to run.
KILL_AFTER = 4
#: A child that says nothing for this long is killed and the demo fails.
CHILD_TIMEOUT = 30.0

FIRST = "first"
AFTER_CRASH = "after-crash"

Events = Callable[[str], None]


class DemoError(SavegameError):
    """The demo could not carry out its plan (a child failed, the store is unsuitable)."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One checkpoint of the crashed-and-resumed run."""

    step: int
    node: str | None
    checkpoint_id: str
    next: str | None
    status: str
    size: int
    write_ms: float | None
    """Commit time reported by the writing process (None when it reported none)."""
    process: str
    """``first`` or ``after-crash``."""
    pid: int | None


@dataclass(frozen=True, slots=True)
class DemoReport:
    """Everything the demo did and found, for rendering."""

    store_url: str
    db_path: str | None
    """The SQLite file when it was kept (``--keep`` or a store of the caller's), else None."""
    run_id: str
    reference_run_id: str
    kill_after: int
    killed_pid: int
    killed_returncode: int | None
    resumed_pid: int | None
    timeline: list[Entry]
    final: bytes
    """Canonical encoding of the resumed run's final state, read back from the store."""
    reference: bytes
    """Canonical encoding of the reference run's final state."""
    answer: str | None
    usage: savegame.Usage
    reference_usage: savegame.Usage
    seconds: dict[str, float] = field(default_factory=dict)
    """Wall time of each phase: first, resume, reference, total."""

    @property
    def verdict(self) -> bool:
        return self.final == self.reference and self.usage == self.reference_usage

    @property
    def final_sha(self) -> str:
        return hashlib.sha256(self.final).hexdigest()

    @property
    def reference_sha(self) -> str:
        return hashlib.sha256(self.reference).hexdigest()


def _env() -> dict[str, str]:
    # The child must import this very savegame, even when it is not installed (PYTHONPATH=src).
    root = str(Path(savegame.__file__).resolve().parents[1])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "savegame.demo.child", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
    )


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


def _child_failed(what: str, proc: subprocess.Popen[str], stderr: str) -> DemoError:
    tail = stderr.strip().splitlines()[-1:] or ["no output"]
    return DemoError(f"demo: the {what} process exited with {proc.returncode}: {tail[0]}")


def _first_process(url: str, say: Events) -> tuple[list[dict[str, Any]], subprocess.Popen[str]]:
    """Run until the pause after checkpoint KILL_AFTER, then SIGKILL the child."""
    events: list[dict[str, Any]] = []
    with _spawn("start", "--store", url, "--pause-after", str(KILL_AFTER)) as proc:
        watchdog = threading.Timer(CHILD_TIMEOUT, proc.kill)
        watchdog.start()
        try:
            assert proc.stdout is not None
            say(f"process 1 (pid {proc.pid}) starts the refund agent")
            for line in proc.stdout:
                event = _event(line)
                if event is None:
                    continue
                events.append(event)
                if event["event"] == "paused":
                    os.kill(proc.pid, signal.SIGKILL)
                    say(
                        f"SIGKILL pid {proc.pid} right after checkpoint {event['step']} was committed"
                    )
                    break
            _, stderr = proc.communicate()
        finally:
            watchdog.cancel()
    if not events or events[-1]["event"] != "paused":
        raise _child_failed("first", proc, stderr)
    return events, proc


def _resume_process(url: str, run_id: str, say: Events) -> tuple[list[dict[str, Any]], int]:
    with _spawn("resume", "--store", url, run_id) as proc:
        say(f"process 2 (pid {proc.pid}) resumes run {run_id} from the store")
        try:
            stdout, stderr = proc.communicate(timeout=CHILD_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            stdout, stderr = proc.communicate()
    events = [e for e in map(_event, stdout.splitlines()) if e is not None]
    if proc.returncode != 0 or not events or events[-1]["event"] != "done":
        raise _child_failed("resuming", proc, stderr)
    return events, proc.pid


def _timeline(
    store: savegame.Store, run_id: str, first: list[dict[str, Any]], second: list[dict[str, Any]]
) -> list[Entry]:
    written: dict[str, tuple[str, dict[str, Any]]] = {}
    for process, events in ((FIRST, first), (AFTER_CRASH, second)):
        for event in events:
            if event["event"] == "checkpoint":
                written[event["checkpoint_id"]] = (process, event)
    first_pid = first[0]["pid"] if first else None
    entries = []
    for h in reversed(savegame.history(run_id, store=store)):
        process, event = written.get(h.checkpoint_id, (FIRST, {}))
        entries.append(
            Entry(
                step=h.step,
                node=h.node,
                checkpoint_id=h.checkpoint_id,
                next=h.next,
                status=h.status.value,
                size=h.size,
                write_ms=event.get("ms"),
                process=process,
                pid=event.get("pid", first_pid),
            )
        )
    return entries


def _workspace(store: str | None, keep: bool) -> tuple[str, str | None, str | None]:
    """The store URL, the temp folder to delete afterwards, and the db path to report."""
    if store is not None:
        return store, None, store
    folder = tempfile.mkdtemp(prefix="savegame-demo-")
    path = os.path.join(folder, "demo.db")
    return f"sqlite:///{path}", (None if keep else folder), (path if keep else None)


def run_demo(
    *, store: str | None = None, keep: bool = False, on_event: Events | None = None
) -> DemoReport:
    """Kill the refund agent mid-run, resume it in a fresh process, compare with a clean run.

    Args:
        store: a store URL shared between processes (default: a new SQLite file
            in a temporary folder, deleted afterwards unless ``keep``).
        keep: keep the temporary SQLite file.
        on_event: called with a line of progress as each phase happens.

    Raises:
        DemoError: a child process failed or the store cannot be shared between processes.
    """
    say = on_event or (lambda _: None)
    url, cleanup, shown = _workspace(store, keep)
    started = time.perf_counter()
    seconds: dict[str, float] = {}
    try:
        handle = savegame.open_store(url)
        try:
            if not handle.capabilities.multi_process:
                raise DemoError(
                    f"demo: store {url} cannot be shared between processes; use a sqlite:// URL"
                )
            first, killed = _first_process(url, say)
            seconds["first"] = time.perf_counter() - started
            run_id = first[-1]["run_id"]
            mark = time.perf_counter()
            second, resumed_pid = _resume_process(url, run_id, say)
            seconds["resume"] = time.perf_counter() - mark
            from savegame.demo.refund import QUESTION, agent

            mark = time.perf_counter()
            say("reference: the same agent, uninterrupted, on its own thread")
            reference = savegame.run(agent, {"input": QUESTION}, store=handle)
            seconds["reference"] = time.perf_counter() - mark
            final = savegame.get_checkpoint(run_id, store=handle)
            expected = savegame.get_checkpoint(reference.run_id, store=handle)
            timeline = _timeline(handle, run_id, first, second)
        finally:
            handle.close()
    finally:
        if cleanup is not None:
            shutil.rmtree(cleanup, ignore_errors=True)
    seconds["total"] = time.perf_counter() - started
    return DemoReport(
        store_url=url,
        db_path=shown,
        run_id=run_id,
        reference_run_id=reference.run_id,
        kill_after=KILL_AFTER,
        killed_pid=killed.pid,
        killed_returncode=killed.returncode,
        resumed_pid=resumed_pid,
        timeline=timeline,
        final=canonical(final.state),
        reference=canonical(expected.state),
        answer=final.state.get("answer"),
        usage=final.usage,
        reference_usage=expected.usage,
        seconds=seconds,
    )
