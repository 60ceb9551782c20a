"""A process a test stops with SIGINT as a terminal does: the workload (sigint_workload.py)
through the Python API or the CLI, in a process group of its own, its stdout in a file and
its stderr a terminal (a pseudo-terminal: savegame tells a person there it took the Ctrl-C,
which is how the test knows)."""

from __future__ import annotations

import contextlib
import os
import pty
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import savegame
from savegame import RunStatus

SRC = str(Path(savegame.__file__).resolve().parents[1])
WORKLOAD = Path(__file__).with_name("sigint_workload.py")
NOTICE = "savegame: Ctrl-C:"
"""What savegame's handler writes to a terminal when it takes the first Ctrl-C."""
PATIENCE = 60.0
"""Seconds a test waits for the child at most: it needs well under one, on a machine
nothing else loads."""


@contextlib.contextmanager
def _as_in_a_terminal() -> Iterator[None]:
    """SIGINT handled while the child is started, so it starts with SIGINT at its default,
    as a terminal's foreground job does (a handler is reset to the default across exec).
    Without it, a pytest a shell started in the background without job control
    (``(pytest &)``) ignores SIGINT, its children inherit SIG_IGN, savegame rightly leaves
    an ignored SIGINT alone, and every Ctrl-C here went unheard for a minute."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


@dataclass
class Ended:
    returncode: int
    stdout: str
    stderr: str

    def lines(self, word: str) -> list[list[str]]:
        """The stdout lines that start with ``word``, split."""
        return [line.split() for line in self.stdout.splitlines() if line.startswith(word)]


class Child:
    """One process of the workload; its call ``hold`` (``2``: the one logged ``start 2``)
    waits in flight until the test opens the gate."""

    def __init__(self, args: list[str], tmp: Path, hold: str, env: dict[str, str]) -> None:
        self.hold = hold
        self.log, self.gate = tmp / "calls.log", tmp / "gate"
        self.out = tmp / "stdout.txt"
        environ = {
            **os.environ,
            "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "SIGINT_LOG": str(self.log),
            "SIGINT_GATE": str(self.gate),
            "SIGINT_HOLD": hold,
            **env,
        }
        self._terminal, err = pty.openpty()
        os.set_blocking(self._terminal, False)
        self._err = b""
        with self.out.open("w") as out, _as_in_a_terminal():
            # A session of its own: the child leads its own process group, as the job in
            # a terminal's foreground does, so killpg reaches it (and its children) and
            # not pytest.
            self.proc = subprocess.Popen(
                [sys.executable, *args],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=environ,
                cwd=tmp,
                start_new_session=True,
            )
        os.close(err)

    @classmethod
    def python(
        cls, name: str, store: str, how: str, tmp: Path, *, hold: str = "2", **env: str
    ) -> Child:
        """``savegame.run`` (or ``arun``, ...) from a program: sigint_workload.py's main."""
        return cls([str(WORKLOAD), name, store, how], tmp, hold, env)

    @classmethod
    def cli(cls, args: list[str], tmp: Path, *, hold: str = "2", **env: str) -> Child:
        """``savegame ARGS``, as ``python -m savegame``."""
        return cls(["-m", "savegame", *args], tmp, hold, env)

    def calls(self) -> list[str]:
        return self.log.read_text().splitlines() if self.log.exists() else []

    def stderr(self) -> str:
        """What the child wrote to stderr so far (read off the terminal as it comes, or
        the child would block once the terminal's buffer is full)."""
        while True:
            try:
                chunk = os.read(self._terminal, 65536)
            except (BlockingIOError, OSError):  # nothing yet; EIO: the child closed it
                break
            if not chunk:
                break
            self._err += chunk
        return self._err.decode(errors="replace").replace("\r\n", "\n")

    def wait_for(self, what: str, done: Callable[[], bool]) -> None:
        deadline = time.monotonic() + PATIENCE
        while not done():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                found = self.diagnosis()
                self.proc.kill()
                self.proc.wait()
                ended = self.end()
                raise AssertionError(f"waited for {what}; calls {self.calls()}, {ended}\n{found}")
            time.sleep(0.01)

    def diagnosis(self) -> str:
        """Why a child that is still alive did not get on: how it and this process hold
        SIGINT (ignored and blocked signals are inherited), and its threads' stacks
        (sigint_workload.py's faulthandler, on SIGUSR1)."""
        if self.proc.poll() is not None:
            return "the child had exited"
        held = f"SIGINT here: {signal.getsignal(signal.SIGINT)!r}"
        with contextlib.suppress(OSError):
            status = Path(f"/proc/{self.proc.pid}/status").read_text().splitlines()
            held += "; the child's " + ", ".join(
                line.replace("\t", " ") for line in status if line.startswith(("Sig", "ShdPnd"))
            )
        before = len(self.stderr())
        with contextlib.suppress(OSError):
            self.proc.send_signal(signal.SIGUSR1)
            time.sleep(0.5)
        return f"{held}\nthe child's threads:\n{self.stderr()[before:]}"

    def in_call(self) -> None:
        """Until the call held has begun."""
        line = f"start {self.hold}"
        self.wait_for(line, lambda: line in self.calls())

    def ctrl_c(self, *, group: bool = True) -> None:
        """SIGINT to the process group, as a terminal's Ctrl-C; or to the process alone."""
        if group:
            os.killpg(self.proc.pid, signal.SIGINT)
        else:
            self.proc.send_signal(signal.SIGINT)

    def noticed(self, times: int = 1) -> None:
        """Until savegame's handler has taken the first Ctrl-C (it says so on stderr)."""
        self.wait_for("the Ctrl-C notice", lambda: self.stderr().count(NOTICE) >= times)

    def open_gate(self) -> None:
        self.gate.touch()

    def end(self) -> Ended:
        deadline = time.monotonic() + PATIENCE
        while self.proc.poll() is None:
            self.stderr()
            if time.monotonic() > deadline:
                self.proc.kill()
            time.sleep(0.01)
        err = self.stderr()
        os.close(self._terminal)
        return Ended(self.proc.returncode, self.out.read_text(), err)


def first_ctrl_c(child: Child, *, group: bool = True) -> Ended:
    """Ctrl-C while the call held is in flight; the call returns once it was taken."""
    child.in_call()
    child.ctrl_c(group=group)
    child.noticed()
    child.open_gate()
    return child.end()


def second_ctrl_c(child: Child) -> Ended:
    """Ctrl-C twice while the call held is in flight; the call never returns."""
    child.in_call()
    child.ctrl_c()
    child.noticed()
    child.ctrl_c()
    return child.end()


def savegame_cli(args: list[str], tmp: Path, **env: str) -> Ended:
    """``savegame ARGS`` run to its end (a resume), its calls logged to the same file."""
    done = subprocess.run(
        [sys.executable, "-m", "savegame", *args],
        env={
            **os.environ,
            "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "SIGINT_LOG": str(tmp / "calls.log"),
            **env,
        },
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=PATIENCE,
    )
    return Ended(done.returncode, done.stdout, done.stderr)


def head(run_id: str, url: str) -> tuple[int, RunStatus, str | None]:
    """The step, status and next step of the run's latest checkpoint."""
    header = savegame.client.get_checkpoint(run_id, store=url).header
    return header.step, header.status, header.next


def resumed(run_id: str, url: str, tmp: Path, **env: str) -> dict[str, Any]:
    """``savegame resume RUN`` run to the run's end; the state it ended in."""
    out = savegame_cli(["resume", run_id, "--store", url, "--json"], tmp, **env)
    assert out.returncode == 0, out
    done = savegame.client.get_checkpoint(run_id, store=url)
    assert done.header.status is RunStatus.COMPLETED
    return dict(done.state)
