"""A workflow whose steps edit a workspace, for the kill -9 in the middle of a step.

The workspace is ``$WS_WORLD/ws``; ``$WS_WORLD/seen.jsonl`` (outside it) logs the tree
each step found when it began. Each step writes a file, rewrites ``shared.txt``,
deletes an older file and changes a mode. With ``SAVEGAME_HOOK=midstep`` step 3 prints
``HOOK midstep`` half way through its writes and blocks on stdin, to be killed there.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from savegame import END, StepContext, Workflow


def world() -> Path:
    return Path(os.environ["WS_WORLD"])


def tree(root: Path) -> dict[str, list[Any]]:
    """Every file under ``root``: [content, mode] (a link: ["->" + target, 0])."""
    out: dict[str, list[Any]] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_symlink():
            out[rel] = ["->" + os.readlink(path), 0]
        elif path.is_file():
            out[rel] = [path.read_text(), path.stat().st_mode & 0o777]
    return out


wf = Workflow("crash-workspace", workspace=lambda run_id: world() / "ws")


@wf.step(entry=True)
def edit(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    ws = world() / "ws"
    n = state.get("n", 0) + 1
    with (world() / "seen.jsonl").open("a") as log:
        log.write(json.dumps({"step": n, "tree": tree(ws)}) + "\n")
    (ws / "sub").mkdir(exist_ok=True)
    (ws / "sub" / f"f{n}.txt").write_text(f"file {n}\n" * n)
    if n == 3 and os.environ.get("SAVEGAME_HOOK") == "midstep":
        (ws / "shared.txt").write_text("half written by a step that dies\n")
        (ws / "base.txt").unlink(missing_ok=True)
        sys.stdout.write("HOOK midstep\n")
        sys.stdout.flush()
        sys.stdin.readline()
    (ws / "shared.txt").write_text(f"after step {n}\n")
    if n >= 3:
        (ws / "sub" / f"f{n - 2}.txt").unlink()
    os.chmod(ws / "sub" / f"f{n}.txt", 0o600 if n % 2 else 0o755)
    return {"n": n}, ("edit" if n < 5 else END)
