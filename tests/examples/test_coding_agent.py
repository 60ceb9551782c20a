"""examples/coding_agent.py: the agent edits a file in its workspace; a fork from the
checkpoint before the edit reads the file as it was then and edits it otherwise, while
the first run's version stays in its own checkpoints."""

from __future__ import annotations

import re
from pathlib import Path

from savegame import open_store
from savegame.client import get_checkpoint, history, restore_workspace
from tests.provider import CHAT, FakeProvider, chat

from .conftest import example

ORIGINAL = 'def greet(name):\n    return f"hello {name}"\n'
SHOUT = ORIGINAL + "\n\ndef shout(name):\n    return greet(name).upper()\n"
FAREWELL = ORIGINAL + '\n\ndef farewell(name):\n    return f"goodbye {name}"\n'


def test_a_fork_sees_the_files_its_checkpoint_saw(fake: FakeProvider, tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "greet.py").write_text(ORIGINAL)
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    fake.script(
        CHAT,
        chat(None, [("list_files", {})]),
        chat(None, [("read_file", {"path": "greet.py"})]),
        chat(None, [("write_file", {"path": "greet.py", "content": SHOUT})]),
        chat("Added shout() to greet.py."),
    )
    out = example("coding_agent", "run", "add shout()", fake=fake, cwd=tmp_path)
    assert "answer: Added shout() to greet.py." in out
    assert (project / "greet.py").read_text() == SHOUT
    found = re.search(r"^run: (\S+)", out, re.MULTILINE)
    assert found
    run_id = found.group(1)
    # The model read the file the workspace held and listed what was there.
    tool_results = [m for m in fake.bodies(CHAT)[-1]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in tool_results[1:]] == [
        ORIGINAL,
        f"wrote {len(SHOUT)} characters to greet.py",
    ]

    shown = example("coding_agent", "history", run_id, fake=fake, cwd=tmp_path)
    assert len(shown.splitlines()) == len(history(run_id, store=store))
    # The input checkpoint comes before the first capture; every later one holds the file.
    lines = shown.splitlines()
    assert "(input)" in lines[0] and not lines[0].endswith("greet.py")
    assert all(line.endswith("greet.py") for line in lines[1:]), shown

    # The checkpoint after the read, before the write: fork from it with another task.
    read = [cp for cp in reversed(history(run_id, store=store)) if cp.node == "tools"][1]
    fake.script(
        CHAT,
        chat(None, [("read_file", {"path": "greet.py"})]),
        chat(None, [("write_file", {"path": "greet.py", "content": FAREWELL})]),
        chat("Added farewell() instead."),
    )
    forked = example(
        "coding_agent", "fork", read.checkpoint_id, "no: add farewell()", fake=fake, cwd=tmp_path
    )
    assert "answer: Added farewell() instead." in forked
    # The fork's read saw the file before the first run's edit: the directory was put
    # back as that checkpoint had it.
    fork_read = fake.bodies(CHAT)[5]["messages"][-1]
    assert fork_read["role"] == "tool" and fork_read["content"] == ORIGINAL
    assert (project / "greet.py").read_text() == FAREWELL
    # The first run's files are still in its checkpoints.
    elsewhere = tmp_path / "first-run"
    # restore_workspace takes a Store, not a URL.
    with open_store(store) as handle:
        restore_workspace(get_checkpoint(run_id, store=handle), elsewhere, store=handle)
    assert (elsewhere / "greet.py").read_text() == SHOUT
    assert len(fake.bodies(CHAT)) == 7
