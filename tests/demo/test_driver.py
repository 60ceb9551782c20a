"""The demo keeps its store where it says, says where its code is, and does not count the
time a person takes to answer as run time."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson

import savegame

SRC = str(Path(savegame.__file__).resolve().parents[1])


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAVEGAME_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, env.get("PYTHONPATH")) if p)
    env["TMPDIR"] = str(tmp_path)  # where the demo makes its folder
    return env


# In a process of its own: the demo's agent registers its tools (issue_refund ...) by name,
# which other tests' tools of the same name must not meet.
SLOW_PERSON = textwrap.dedent(
    """
    import time

    import orjson

    from savegame.demo import run_demo


    def slow_person(question):
        time.sleep(1.0)  # reads the question, thinks, says yes
        return True


    began = time.perf_counter()
    report = run_demo(ask=slow_person)
    wall = time.perf_counter() - began
    print(orjson.dumps({
        "wall": wall, "seconds": report.seconds, "verdict": report.verdict,
        "how": report.approval.how, "kept": report.kept, "store_url": report.store_url,
        "run_id": report.run_id, "last": report.timeline[-1].checkpoint_id,
        "code": report.code,
    }).decode())
    """
)


def test_thinking_time_is_not_run_time_and_the_store_is_kept(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", SLOW_PERSON],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    report = orjson.loads(out.stdout)
    assert report["verdict"] and report["how"] == "at the terminal"
    waited, wall = report["seconds"]["approval"], report["wall"]
    assert waited >= 1.0
    # Every time the demo reports leaves the wait out (it counted it before).
    assert report["seconds"]["total"] <= wall - waited
    assert report["seconds"]["processes"] <= wall - waited

    kept = Path(report["kept"])
    assert kept.parent == tmp_path
    assert report["store_url"] == f"sqlite:///{kept / 'demo.db'}"
    shown = savegame.client.history(report["run_id"], store=report["store_url"])
    assert shown[0].checkpoint_id == report["last"]
    assert any(path.endswith("demo/refund.py") for path in report["code"].values())
    assert all(Path(path).is_file() for path in report["code"].values())


def test_the_cli_prints_where_the_code_and_the_store_are(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "savegame", "demo", "--yes"],
        cwd=tmp_path,
        env=_env(tmp_path),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    [folder] = tmp_path.glob("savegame-demo-*")
    url = f"sqlite:///{folder / 'demo.db'}"
    lines = [line.strip() for line in out.stdout.splitlines()]
    refund = str(Path(SRC) / "savegame" / "demo" / "refund.py")
    assert any(line.startswith(refund) for line in lines)
    assert "the demo's store, kept" in lines and url in lines
    history = next(line for line in lines if line.startswith("savegame history "))
    assert history.endswith(f"--store {url}")
    # The printed command works, and shows the run the timeline showed.
    again = subprocess.run(
        [sys.executable, "-m", *history.split(), "--json"],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 0, again.stderr
    assert history.split()[2] in out.stdout


def test_no_keep_deletes_the_folder(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "savegame", "demo", "--yes", "--no-keep"],
        cwd=tmp_path,
        env=_env(tmp_path),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert list(tmp_path.iterdir()) == []
    assert "the demo's files were deleted (--no-keep)" in out.stdout


def test_a_demo_that_stops_before_it_starts_leaves_no_folder(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "savegame", "demo", "--yes", "--store", "memory://"],
        cwd=tmp_path,
        env=_env(tmp_path),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1
    assert "cannot be shared between processes" in out.stderr
    assert list(tmp_path.iterdir()) == []
