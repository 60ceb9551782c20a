"""A compensation name is resolved from the code at compensation time; one that finds no
tool ends the run compensation_failed (exit 7), which a person can fix in the code or
settle by hand. The real CLI in real processes (each loads the flow file as it is now)
on a real SQLite file; ``world.txt`` is the outside world.
"""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import orjson

FLOW = textwrap.dedent(
    """
    import os

    from savegame import END, Workflow, tool

    WORLD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "world.txt")


    def world(line):
        with open(WORLD, "a") as fh:
            fh.write(line + "\\n")


    @tool(effect="write", idempotent=True, name="{undo}")
    def undo_refund(order_id, *, result, request_id):
        world(f"cancel {{order_id}}")
        return "cancelled"


    @tool(effect="write", idempotent=True, compensate="{compensate}")
    def issue_refund(order_id, *, request_id):
        world(f"refund {{order_id}}")
        return {{"order_id": order_id}}


    wf = Workflow("refunds")


    @wf.step(entry=True)
    def refund(state, ctx):
        return {{"receipt": ctx.call(issue_refund, order_id="A-1")}}, END
    """
)


def deploy(tmp_path: Path, *, undo: str, compensate: str) -> Path:
    path = tmp_path / "refund_flow.py"
    path.write_text(FLOW.format(undo=undo, compensate=compensate))
    return path


def world(tmp_path: Path) -> list[str]:
    path = tmp_path / "world.txt"
    return path.read_text().splitlines() if path.exists() else []


def status(proc: Any, tmp_path: Path, store: str) -> str:
    out = proc("runs", "--store", store, "--json", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    [row] = orjson.loads(out.stdout)
    return str(row["status"])


def refund_then_rename_the_undo(proc: Any, tmp_path: Path, store: str) -> None:
    """A refund is made; the next deploy renames the undo tool but not ``compensate=``."""
    flow = deploy(tmp_path, undo="cancel_refund", compensate="cancel_refund")
    made = proc("run", f"{flow}:wf", "--run-id", "r1", "--store", store, cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    flow = deploy(tmp_path, undo="cancel_refund_v2", compensate="cancel_refund")

    typo = proc("run", f"{flow}:wf", "--run-id", "r2", "--store", store, cwd=tmp_path)
    assert typo.returncode == 2  # a new run is refused before its refund
    assert typo.stderr == (
        "error: workflow 'refunds', step 'refund': tool issue_refund declares "
        "compensate='cancel_refund', but no tool of that name is registered "
        "(did you mean 'cancel_refund_v2'?)\n"
    )

    failed = proc("compensate", "r1", "--store", store, cwd=tmp_path)
    assert failed.returncode == 7, failed.stderr
    assert "compensation cancel_refund for r1:1:0 failed" in failed.stderr
    assert "did you mean 'cancel_refund_v2'?" in failed.stderr
    assert "savegame resolve r1 --effect r1:1:0:compensate --done" in failed.stderr
    assert status(proc, tmp_path, store) == "compensation_failed"
    assert world(tmp_path) == ["refund A-1"]


def test_a_fixed_name_is_taken_from_the_code_at_compensation_time(
    proc: Any, tmp_path: Path, store: str
) -> None:
    refund_then_rename_the_undo(proc, tmp_path, store)
    deploy(tmp_path, undo="cancel_refund_v2", compensate="cancel_refund_v2")
    fixed = proc("compensate", "r1", "--store", store, cwd=tmp_path)
    assert fixed.returncode == 0, fixed.stderr
    assert "run r1: compensated" in fixed.stdout
    assert status(proc, tmp_path, store) == "compensated"
    assert world(tmp_path) == ["refund A-1", "cancel A-1"]


def test_a_person_settles_an_unresolvable_compensation_by_hand(
    proc: Any, tmp_path: Path, store: str
) -> None:
    refund_then_rename_the_undo(proc, tmp_path, store)
    settled = proc(
        "resolve", "r1", "--effect", "r1:1:0:compensate", "--done", "--by", "ops",
        "--store", store, cwd=tmp_path,
    )  # fmt: skip
    assert settled.returncode == 0, settled.stderr
    assert "r1:1:0:compensate (cancel_refund) settled as done by ops" in settled.stdout
    assert f"next: savegame compensate r1 --store {store}" in settled.stdout
    done = proc("compensate", "r1", "--store", store, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert status(proc, tmp_path, store) == "compensated"
    assert world(tmp_path) == ["refund A-1"]  # undone by the person, not called
