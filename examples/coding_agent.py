"""A coding agent that edits files in a workspace, each checkpoint holding the files as
they were, so a fork from any point sees exactly the files that point saw.

    python examples/coding_agent.py run "add a farewell() to greet.py" --workspace ./project
    python examples/coding_agent.py history RUN                  # checkpoints and their files
    python examples/coding_agent.py fork CHECKPOINT "do it differently" --workspace ./project

The workspace (``Agent(workspace=...)``) is snapshotted with every checkpoint: each
file's content once, as a blob in the store. A resume puts the directory back as its
checkpoint had it before the next step; so does a fork, so the tools of a fork from
the checkpoint before an edit read the file without that edit, while the first run's
files stay in its own checkpoints (``savegame.client.restore_workspace`` brings them back).

The file tools are plain functions, not journaled writes: the snapshot is their
record. A step killed half way through its edits runs again on the files it first
saw, its calls made again, and what it wrote is kept at the step's checkpoint.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from _common import model, parser, report

from savegame import Agent, Workspace, run
from savegame.client import fork, get_checkpoint, history
from savegame.model import WORKSPACE_KEY

SYSTEM = (
    "You are a careful coding agent. List the files, read what you change, then write "
    "each changed file whole. Answer with a one-line summary of what you changed."
)


def file_tools(root: Path) -> list[Any]:
    def inside(path: str) -> Path:
        target = (root / path).resolve()
        if not target.is_relative_to(root.resolve()):
            raise ValueError(f"{path!r} is outside the workspace")
        return target

    def list_files() -> list[str]:
        """List the workspace's files."""
        return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())

    def read_file(path: str) -> str:
        """Read a file of the workspace."""
        return inside(path).read_text()

    def write_file(path: str, content: str) -> str:
        """Write a whole file of the workspace (created if new)."""
        target = inside(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
        return f"wrote {len(content)} characters to {path}"

    return [list_files, read_file, write_file]


def coder(args: Any) -> Agent:
    root = Path(args.workspace)
    root.mkdir(parents=True, exist_ok=True)
    return Agent(
        "coder",
        model(args),
        file_tools(root),
        system=SYSTEM,
        workspace=Workspace(root, ignore=[".git/", "__pycache__/"]),
    )


def main(argv: list[str]) -> int:
    parse = parser("A coding agent over workspace snapshots.")
    commands = parse.add_subparsers(dest="command", required=True)
    start = commands.add_parser("run", help="give the agent a task")
    start.add_argument("task")
    start.add_argument("--workspace", default="project")
    show = commands.add_parser("history", help="a run's checkpoints and their files")
    show.add_argument("run_id")
    again = commands.add_parser("fork", help="from a checkpoint, with a new instruction")
    again.add_argument("checkpoint_id")
    again.add_argument("instruction")
    again.add_argument("--workspace", default="project")
    args = parse.parse_args(argv)

    if args.command == "history":
        for cp in reversed(history(args.run_id, store=args.store)):
            files = sorted(
                (get_checkpoint(cp.checkpoint_id, store=args.store).state or {}).get(WORKSPACE_KEY)
                or {}
            )
            line = f"{cp.checkpoint_id}  step {cp.step:>2}  {cp.node or '(input)':<8} {' '.join(files)}"
            print(line.rstrip())
        return 0
    agent = coder(args)
    if args.command == "run":
        result = run(agent, {"input": args.task}, store=args.store)
    else:
        origin = get_checkpoint(args.checkpoint_id, store=args.store)
        said = {"role": "user", "content": args.instruction}
        forked = fork(
            args.checkpoint_id,
            update={"messages": [*origin.state["messages"], said]},
            store=args.store,
            workflow=agent,
        )
        assert forked.result is not None
        result = forked.result
    report(result, args.store, "examples/coding_agent.py")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
