"""The CLI as users run it: real processes, `python -m savegame`, the demo."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson

import savegame

SRC = str(Path(savegame.__file__).resolve().parents[1])


def savegame_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAVEGAME_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, env.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-m", "savegame", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_crash_in_one_process_resume_in_another(tmp_path: Path, workflow_file: Path) -> None:
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    (tmp_path / "FAIL").touch()
    args = ["run", "counter_flow.py:wf", "--run-id", "r1", "--input", '{"until": 3}']
    out = savegame_cli(*args, "--store", store, cwd=tmp_path)
    assert out.returncode == 1
    assert out.stderr == "error: run r1: step 'tick' raised RuntimeError: the flaky API said no\n"

    (tmp_path / "FAIL").unlink()
    # From another folder: the run's stored reference is an absolute path.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = savegame_cli("resume", "r1", "--store", store, "--json", cwd=elsewhere)
    assert out.returncode == 0, out.stderr
    result: dict[str, Any] = orjson.loads(out.stdout)
    assert (result["status"], result["step"]) == ("completed", 3)
    assert result["state"]["seen"] == {"$sg:tuple": [1, 2, 3]}

    shown = orjson.loads(
        savegame_cli("show", "r1", "--store", store, "--json", cwd=elsewhere).stdout
    )
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


def test_demo_kills_resumes_and_proves_the_state(tmp_path: Path) -> None:
    out = savegame_cli("demo", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stderr == ""
    assert "SIGKILL" in out.stdout
    assert "after-crash" in out.stdout
    assert (
        "✓ verdict: the resumed run's final state equals the uninterrupted run's byte for byte"
        in (out.stdout)
    )
    assert "final answer" in out.stdout
    assert list(tmp_path.iterdir()) == []  # nothing left behind without --keep


def test_demo_on_a_given_store_leaves_both_runs_to_inspect(tmp_path: Path, cli: Any) -> None:
    store = f"sqlite:///{tmp_path / 'demo.db'}"
    out = savegame_cli("demo", "--store", store, "--keep", cwd=tmp_path)
    assert out.returncode == 0, out.stdout + out.stderr
    runs = cli("runs", "--store", store, "--json").json()
    assert [r["status"] for r in runs] == ["completed", "completed"]
    assert {r["workflow_ref"] for r in runs} == {"savegame.demo.refund:agent"}
    crashed, reference = runs[1], runs[0]
    assert crashed["step"] == reference["step"] == 8
    a = cli("show", crashed["run_id"], "--store", store, "--json").json()["state"]
    b = cli("show", reference["run_id"], "--store", store, "--json").json()["state"]
    assert a == b
    assert a["answer"].startswith("I'm sorry the Aurora ANC headphones arrived damaged")
