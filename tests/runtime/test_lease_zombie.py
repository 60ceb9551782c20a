"""A dead owner is recognised even before it is reaped: a SIGKILLed process that is still a
zombie (no parent waits for it, as in a container without an init) holds no run."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import savegame
from savegame.errors import LeaseHeldError
from savegame.runtime._lease import _ps_state, holder_is_dead, owner_id

SRC = str(Path(savegame.__file__).resolve().parents[1])

pytestmark = [
    pytest.mark.crash,
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc to see a zombie"),
]


def proc_state(pid: int) -> str:
    stat = Path(f"/proc/{pid}/stat").read_bytes()
    return stat[stat.rindex(b")") + 2 :].split()[0].decode()


def wait_for_state(pid: int, state: str) -> None:
    deadline = time.monotonic() + 30
    while proc_state(pid) != state:
        assert time.monotonic() < deadline, f"pid {pid} never became {state}"
        time.sleep(0.01)


@contextmanager
def zombie() -> Iterator[int]:
    """A child of this process that has exited and that nobody has waited for yet."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        owner = owner_id(child.pid)  # its identity while it runs, start time included
        child.send_signal(signal.SIGKILL)
        wait_for_state(child.pid, "Z")
        yield int(owner.split(":")[1])
    finally:
        child.wait()


def test_a_zombie_holder_is_dead_and_a_running_one_is_not() -> None:
    with zombie() as pid:
        assert proc_state(pid) == "Z"
        os.kill(pid, 0)  # the pid is still there: this alone took it for alive
        assert holder_is_dead(f"{socket.gethostname()}:{pid}:0")
    assert not holder_is_dead(owner_id())


def test_ps_sees_a_zombie_where_there_is_no_proc() -> None:
    # The fallback for macOS and the BSDs, checked here against the same zombie.
    if _ps_state(os.getpid()) is None:
        pytest.skip("no ps")
    with zombie() as pid:
        assert _ps_state(pid) == "Z"
    assert _ps_state(os.getpid()) in ("R", "S")


FLOW = textwrap.dedent(
    """
    import time
    from pathlib import Path

    from savegame import END, Workflow

    HERE = Path(__file__).parent
    wf = Workflow("slow")


    @wf.step(entry=True)
    def first(state, ctx):
        return {"n": 1}, "second"


    @wf.step()
    def second(state, ctx):
        if (HERE / "BLOCK").exists():
            (HERE / "READY").touch()  # between two checkpoints, holding the lease
            time.sleep(600)
        return {"n": 2}, END
    """
)

# Forks a child that runs the flow and takes its lease, SIGKILLs it inside the second
# step, and then deliberately never waits for it: the child stays a zombie until this
# process exits, as a child of a PID 1 that does not reap.
PARENT = textwrap.dedent(
    """
    import os, signal, sys, time
    from pathlib import Path

    here, url = Path(sys.argv[1]), sys.argv[2]
    pid = os.fork()
    if pid == 0:
        try:
            from savegame import run
            from savegame.runtime import load

            run(load(f"{here / 'slow_flow.py'}:wf"), {}, run_id="z1", store=url, lease_ttl=600)
        finally:
            os._exit(0)
    deadline = time.monotonic() + 60
    while not (here / "READY").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    print(pid, flush=True)
    sys.stdin.read()  # until the test is done; the child is never waited for
    """
)


def test_resume_proceeds_at_once_past_a_killed_owner_that_is_still_a_zombie(
    tmp_path: Path,
) -> None:
    (tmp_path / "slow_flow.py").write_text(FLOW)
    (tmp_path / "parent.py").write_text(PARENT)
    (tmp_path / "BLOCK").touch()
    url = f"sqlite:///{tmp_path / 'z.db'}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAVEGAME_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, env.get("PYTHONPATH")) if p)
    with subprocess.Popen(
        [sys.executable, str(tmp_path / "parent.py"), str(tmp_path), url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    ) as parent:
        assert parent.stdin is not None and parent.stdout is not None
        try:
            pid = int(parent.stdout.readline())
            wait_for_state(pid, "Z")
            (tmp_path / "BLOCK").unlink()

            # A third process, as a person would type it.
            out = subprocess.run(
                [sys.executable, "-m", "savegame", "resume", "z1", "--store", url, "--json"],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert out.returncode == 0, out.stderr  # not LeaseHeldError for 600 s
            assert '"status": "completed"' in out.stdout
            assert proc_state(pid) == "Z"  # never reaped: still there, running nothing
        finally:
            parent.stdin.close()  # the parent exits; its zombie child goes with it


def test_the_takeover_says_whose_lease_it_was(caplog: pytest.LogCaptureFixture) -> None:
    from savegame.runtime import acquire_lease
    from savegame.stores import MemoryStore
    from savegame.testing.builders import make_run

    store = MemoryStore()
    store.create_run(*make_run(run_id="r1"), owner=None, ttl=30)
    with zombie() as pid:
        store.acquire_lease("r1", f"{socket.gethostname()}:{pid}:0", 600)
        with caplog.at_level(logging.INFO, logger="savegame.lease"):
            acquire_lease(store, "r1", ttl=30)
    assert (
        f"run r1 was held by PID {pid} on host {socket.gethostname()}, which is not running: "
        "taking it over"
    ) in caplog.text


def test_a_lease_error_says_what_is_known_of_the_holder() -> None:
    here = socket.gethostname()
    owner = f"{here}:4242:7"
    assert str(LeaseHeldError("r1", owner, 12.34, running=True)) == (
        f"run r1 is being executed by PID 4242 on host {here}; its lease expires in 12.3s"
    )
    assert str(LeaseHeldError("r1", owner, 12.34, running=False)) == (
        f"run r1 is held by PID 4242 on host {here}, which is not running; "
        "its lease expires in 12.3s"
    )
    assert str(LeaseHeldError("r1", "far:1:1", 1.0)) == (
        "run r1 is held by PID 1 on host far; its lease expires in 1.0s"
    )
