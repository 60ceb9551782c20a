"""Run the crash workload in real child processes, SIGKILL them, resume, and compare."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "child.py")


@dataclass
class Outcome:
    """What a child process reported before it ended or was killed."""

    committed: list[tuple[int, str]] = field(default_factory=list)
    done: str | None = None
    error: str | None = None
    """The savegame error class a child reported (``ERROR <Class> ...``)."""
    hooks: list[str] = field(default_factory=list)
    returncode: int | None = None
    stderr: str = ""
    first_checkpoint_after: float | None = None
    """Seconds from spawn to the first committed checkpoint line (calibrates random kills)."""
    ended_after: float | None = None


def _env() -> dict[str, str]:
    env = dict(os.environ)
    src = os.path.join(os.path.dirname(CHILD), "..", "..", "src")
    env["PYTHONPATH"] = os.path.abspath(src) + os.pathsep + env.get("PYTHONPATH", "")
    # A keyframe every 3 checkpoints and small packs: the ten-step workloads then write
    # keyframes whose lists are packed (loose blobs inside), so kills land in those too.
    env.setdefault("SAVEGAME_KEYFRAME_EVERY", "3")
    env.setdefault("SAVEGAME_PACK_BYTES", "512")
    return env


def spawn(
    mode: str,
    url: str,
    run_id: str,
    *extra: str,
    script: str = CHILD,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, script, mode, url, run_id, *extra],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**_env(), **(env or {})},
    )


def parse_line(line: str, out: Outcome) -> None:
    parts = line.split()
    if parts[:1] == ["CP"]:
        out.committed.append((int(parts[1]), parts[2]))
    elif parts[:1] == ["DONE"]:
        out.done = parts[1]
    elif parts[:1] == ["ERROR"]:
        out.error = parts[1]
    elif parts[:1] == ["HOOK"]:
        out.hooks.append(parts[1])


def run_to_end(
    mode: str, url: str, run_id: str, *, script: str = CHILD, env: dict[str, str] | None = None
) -> Outcome:
    started = time.perf_counter()
    proc = spawn(mode, url, run_id, script=script, env=env)
    out = Outcome()
    assert proc.stdout is not None
    for line in proc.stdout:
        parse_line(line, out)
        if out.first_checkpoint_after is None and out.committed:
            out.first_checkpoint_after = time.perf_counter() - started
    _, stderr = proc.communicate(timeout=60)
    out.ended_after = time.perf_counter() - started
    out.returncode, out.stderr = proc.returncode, stderr
    return out


def kill_after_step(mode: str, url: str, run_id: str, step: int) -> Outcome:
    """Start a child that blocks right after checkpoint ``step`` is committed, then SIGKILL it."""
    proc = spawn(mode, url, run_id, "--block-after", str(step))
    out = Outcome()
    assert proc.stdout is not None
    for line in proc.stdout:
        parse_line(line, out)
        if out.committed and out.committed[-1][0] == step:
            break
    proc.send_signal(signal.SIGKILL)
    _, stderr = proc.communicate(timeout=30)
    out.returncode, out.stderr = proc.returncode, stderr
    return out


def kill_at_hook(
    mode: str, url: str, run_id: str, hook: str, *, script: str, env: dict[str, str]
) -> Outcome:
    """Start a child with ``SAVEGAME_HOOK=hook`` and SIGKILL it when it reaches the hook.

    A child that ends without reaching the hook is left to finish.
    """
    proc = spawn(mode, url, run_id, script=script, env={**env, "SAVEGAME_HOOK": hook})
    out = Outcome()
    assert proc.stdout is not None
    for line in proc.stdout:
        parse_line(line, out)
        if out.hooks:
            proc.send_signal(signal.SIGKILL)
            break
    _, stderr = proc.communicate(timeout=30)
    out.returncode, out.stderr = proc.returncode, stderr
    return out


def kill_after_delay(
    mode: str,
    url: str,
    run_id: str,
    delay: float,
    *,
    script: str = CHILD,
    env: dict[str, str] | None = None,
) -> Outcome:
    """Start a child and SIGKILL it ``delay`` seconds later, wherever it is."""
    proc = spawn(mode, url, run_id, script=script, env=env)
    out = Outcome()
    lines: list[str] = []
    errors: list[str] = []
    # One reader per pipe and nothing else touching them: communicate() would read
    # stdout under the reader's feet and close it ("I/O operation on closed file").
    readers = [
        threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True),
        threading.Thread(target=lambda: errors.extend(proc.stderr or ()), daemon=True),
    ]
    for reader in readers:
        reader.start()
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    for reader in readers:
        reader.join(timeout=30)
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    for line in lines:
        parse_line(line, out)
    stderr = "".join(errors)
    out.returncode, out.stderr = proc.returncode, stderr
    return out
