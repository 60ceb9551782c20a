"""The CLI as users run it: real processes, `python -m savegame`, the demo."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

import savegame

SRC = str(Path(savegame.__file__).resolve().parents[1])


def test_crash_in_one_process_resume_in_another(
    tmp_path: Path, workflow_file: Path, proc: Any
) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    (tmp_path / "FAIL").touch()
    args = ["run", "counter_flow.py:wf", "--run-id", "r1", "--input", '{"until": 3}']
    out = proc(*args, "--store", store, cwd=tmp_path)
    assert out.returncode == 1
    assert out.stderr == "error: run r1: step 'tick' raised RuntimeError: the flaky API said no\n"

    (tmp_path / "FAIL").unlink()
    # From another folder: the run's stored reference is an absolute path.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = proc("resume", "r1", "--store", store, "--json", cwd=elsewhere)
    assert out.returncode == 0, out.stderr
    result: dict[str, Any] = orjson.loads(out.stdout)
    assert (result["status"], result["step"]) == ("completed", 3)
    assert result["state"]["seen"] == {"$sg:tuple": [1, 2, 3]}

    shown = orjson.loads(proc("show", "r1", "--store", store, "--json", cwd=elsewhere).stdout)
    assert shown["checkpoint_id"] == result["checkpoint_id"]


def test_importing_savegame_does_not_import_the_cli_stack(tmp_path: Path) -> None:
    code = "import sys, savegame; print(sorted({m.split('.')[0] for m in sys.modules} & {'typer', 'rich', 'click'}))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": SRC},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (out.returncode, out.stdout.strip()) == (0, "[]"), out.stderr


def test_demo_yes_refunds_once_emails_once_and_proves_the_state(tmp_path: Path, proc: Any) -> None:
    out = proc("demo", "--yes", "--no-keep", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stderr == ""
    assert "approved automatically (--yes)" in out.stdout
    assert "✗ SIGKILL" in out.stdout and "inside issue_refund" in out.stdout
    assert "was still pending (no result recorded)" in out.stdout
    assert len(re.findall(r"\brefunded\s+refund re_0001", out.stdout)) == 1
    assert len(re.findall(r"\bdeduplicated\s+refund re_0001", out.stdout)) == 1
    assert len(re.findall(r"\bsent\s+email msg_0001", out.stdout)) == 1
    assert "re_0002" not in out.stdout and "msg_0002" not in out.stdout
    assert (
        "✓ verdict: exactly 1 refund and 1 confirmation email, and the resumed run's final "
        "state equals the uninterrupted run's byte for byte" in out.stdout
    )
    assert "final answer" in out.stdout
    assert list(tmp_path.iterdir()) == []  # nothing left in the folder it ran in


def test_demo_without_a_terminal_approves_by_itself(tmp_path: Path, proc: Any, cli: Any) -> None:
    store = f"sqlite:///{tmp_path / 'demo.db'}"
    out = proc(
        "demo", "--store", store, "--no-keep", cwd=tmp_path
    )  # no terminal: stdin is /dev/null
    assert out.returncode == 0, out.stdout + out.stderr
    assert (
        "Approve refund of $149.00 for order A-10423? approved automatically (no terminal attached)"
        in out.stdout
    )
    assert "[y/N]" not in out.stdout

    runs = cli("runs", "--store", store, "--json").json()
    assert [r["status"] for r in runs] == ["completed", "completed"]
    assert {r["workflow_ref"] for r in runs} == {"savegame.demo.refund:agent"}
    crashed, reference = runs[1], runs[0]
    assert crashed["step"] == reference["step"] == 12
    a = cli("show", crashed["run_id"], "--store", store, "--json").json()["state"]
    b = cli("show", reference["run_id"], "--store", store, "--json").json()["state"]
    assert a == b
    assert a["answer"].startswith("I'm sorry the Aurora ANC headphones arrived damaged")
    journal = cli("effects", crashed["run_id"], "--store", store, "--json").json()
    writes = [(e["name"], e["status"]) for e in journal if e["kind"] in ("write", "approval")]
    assert writes == [
        ("issue_refund", "done"),
        ("issue_refund", "done"),
        ("send_confirmation_email", "done"),
    ]
    approval = next(e for e in journal if e["kind"] == "approval")
    assert approval["metadata"]["by"] == "savegame demo (no terminal attached)"
