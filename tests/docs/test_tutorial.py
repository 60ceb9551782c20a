"""The tutorial (docs/tutorial.md), done as a reader does it, in its order: its agent.py
written as shown, its commands run as written in a fresh folder, each a new process.
The model is the local provider of the tests (tests/provider.py) reached through the
OpenAI SDK's own variables, as the tutorial's local-server line says; the kill is a
real SIGKILL while the agent is inside its slow lookup.

What the reader is told is checked: the killed run is listed with its owner gone, the
resumed run does not ask the model again for the call it had paid for, the refund waits
for a person, happens once after the approval, the UI shows the run, and the fork calls
nothing at all."""

from __future__ import annotations

import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from tests import provider
from tests.docs.pages import ROOT, Block, blocks, reader_env
from tests.provider import CHAT, chat

pytestmark = pytest.mark.slow  # whole processes, a SIGKILL and a web server: ~15 s

PAGE = ROOT / "docs" / "tutorial.md"


@pytest.fixture
def fake() -> Iterator[provider.FakeProvider]:
    yield from provider.serve()


def tutorial() -> tuple[Block, list[str]]:
    """The tutorial's agent.py and its command lines, in the page's order."""
    shown = list(blocks(PAGE))
    (agent,) = [b for b in shown if b.title == "agent.py"]
    lines = [
        line.split("  #")[0].strip()
        for b in shown
        if b.lang == "bash"
        for line in b.code.splitlines()
        if line.strip()
    ]
    return agent, lines


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_the_tutorial_as_a_reader_does_it(fake: provider.FakeProvider, tmp_path: Path) -> None:
    agent, lines = tutorial()
    assert lines == [
        "python -m pip install 'savegame[openai,ui]'",
        "export OPENAI_API_KEY=sk-...",
        'python agent.py ticket-1 "My kettle (order A-1) arrived broken. I want my money back."',
        "savegame runs",
        "savegame resume ticket-1",
        "savegame approvals",
        "savegame approve ticket-1",
        "savegame effects ticket-1",
        "savegame models ticket-1",
        "savegame ui",
        "savegame history ticket-1",
        "savegame fork CHECKPOINT_ID --yes",
    ]
    fake.script(
        CHAT,
        chat(None, [("lookup_order", {"order_id": "A-1"})]),
        chat(None, [("issue_refund", {"order_id": "A-1", "amount": 120})]),
        chat("Your refund of 120 for order A-1 is on its way."),
    )
    (tmp_path / "agent.py").write_text(agent.code)
    # The install and the key are the reader's; here the package is on the path and the
    # model is the local provider, named the way the tutorial's comment says.
    env = reader_env({"OPENAI_BASE_URL": fake.openai_url, "OPENAI_API_KEY": "test-key"})

    def sg(line: str, *more: str) -> str:
        args = shlex.split(line)
        assert args[0] == "savegame", line
        done = subprocess.run(
            [sys.executable, "-m", "savegame", *args[1:], *more],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, f"{line}: {done.stdout}{done.stderr}"
        return done.stdout

    # 3. Run it, and kill it inside the lookup.
    started = subprocess.Popen(
        [sys.executable, *shlex.split(lines[2])[1:]],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert started.stdout is not None
    said = started.stdout.readline()
    assert said.startswith("looking up order A-1"), said + started.stderr.read()
    os.kill(started.pid, signal.SIGKILL)
    started.wait(timeout=10)
    started.stdout.close()
    started.stderr.close()  # type: ignore[union-attr]
    assert len(fake.asked) == 1
    listed = sg(lines[3])
    assert "ticket-1" in listed and "owner gone" in listed, listed

    # 4. Resume: the paid model call is not made again; the refund waits for a person.
    resumed = sg(lines[4])
    assert "interrupted" in resumed, resumed
    assert len(fake.asked) == 2
    assert not (tmp_path / "refunds.txt").exists()

    # 5. Approve: the refund happens once, the model answers.
    waiting = sg(lines[5])
    assert "issue_refund" in waiting and "ticket-1" in waiting, waiting
    approved = sg(lines[6])
    assert "completed" in approved, approved
    assert len(fake.asked) == 3
    refunds = (tmp_path / "refunds.txt").read_text().splitlines()
    assert len(refunds) == 1 and refunds[0].endswith(" A-1 120"), refunds
    assert "issue_refund" in sg(lines[7])
    assert "gpt-4o" in sg(lines[8])

    # 6. The web UI lists the run (on a free port, so parallel runs do not clash).
    port = free_port()
    ui = subprocess.Popen(
        [sys.executable, "-m", "savegame", *shlex.split(lines[9])[1:], "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        page = ""
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2) as got:
                    page = got.read().decode()
                break
            except OSError:
                time.sleep(0.2)
        assert "ticket-1" in page
    finally:
        ui.terminate()
        ui.wait(timeout=10)

    # 7. Fork from the input checkpoint (the last line of the history): nothing is called.
    shown = sg(lines[10])
    checkpoints = orjson.loads(sg(lines[10], "--json"))
    first = min(checkpoints, key=lambda c: c["step"])
    assert first["checkpoint_id"] in shown.splitlines()[-1] or first["checkpoint_id"] in shown
    forked = sg(lines[11].replace("CHECKPOINT_ID", first["checkpoint_id"]))
    assert "executed  0 calls" in forked and "reused    5 calls" in forked, forked
    assert len(fake.asked) == 3  # no model call was made again
    assert len((tmp_path / "refunds.txt").read_text().splitlines()) == 1
