"""Views of time travel: a thread's tree of runs, a fork's plan and what it reused."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text
from rich.tree import Tree as RichTree

from savegame.cli.render import status
from savegame.cli.words import plural, store_tail
from savegame.client import ForkPlan, ForkResult
from savegame.control import Call
from savegame.inspect import RunNode, Tree


def _label(node: RunNode) -> Text:
    info = node.run
    text = Text.assemble(
        ("run ", "bold"), (info.run_id, "bold"), f"  {info.workflow}  ", status(info.status),
        f"  step {info.step}",
    )  # fmt: skip
    if node.forked:
        how = f"  ⑂ fork of step {node.parent_step} ({node.mode}"
        how += f", by {node.by}" if node.by else ""
        how += f": {node.reason}" if node.reason else ""
        how += f"; edited {', '.join(node.edited)}" if node.edited else ""
        text.append(how + ")", style="magenta")
    elif node.parent_run_id is not None:
        text.append(f"  continues from step {node.parent_step}", style="dim")
    if node.spawned_by is not None:
        text.append(f"  ↳ child of run {node.spawned_by}", style="cyan")
    return text


def tree(out: Console, found: Tree) -> None:
    view = RichTree(Text(f"thread {found.thread_id}", style="bold"))
    todo: list[tuple[RichTree, RunNode]] = [(view, root) for root in found.roots]
    while todo:
        parent, node = todo.pop(0)
        branch = parent.add(_label(node))
        todo.extend((branch, child) for child in [*node.children, *node.spawned])
    out.print(view)


def kin(out: Console, node: RunNode) -> None:
    """The run that started this one as a child, and the child runs it started."""
    if node.spawned_by is not None:
        out.print(Text.assemble(("child of run ", "cyan"), node.spawned_by), soft_wrap=True)
    if node.spawned:
        out.print(Text("child runs", style="cyan"))
        for child in node.spawned:
            info = child.run
            out.print(
                Text.assemble(f"  {info.run_id}  {info.workflow}  ", status(info.status)),
                soft_wrap=True,
            )


def tree_json(found: Tree) -> dict[str, Any]:
    def one(node: RunNode) -> dict[str, Any]:
        return {
            "run_id": node.run_id,
            "workflow": node.run.workflow,
            "status": node.run.status.value,
            "step": node.run.step,
            "parent_run_id": node.parent_run_id,
            "parent_checkpoint_id": node.parent_checkpoint_id,
            "parent_step": node.parent_step,
            "forked": node.forked,
            "mode": node.mode,
            "by": node.by,
            "reason": node.reason,
            "edited": list(node.edited),
            "children": [one(c) for c in node.children],
            "spawned_by": node.spawned_by,
            "spawned": [one(c) for c in node.spawned],
        }

    return {"thread_id": found.thread_id, "runs": [one(r) for r in found.roots]}


def _call(c: Call) -> str:
    return f"step {c.step}, call {c.call_index} ({c.node}: {c.name})"


def plan(out: Console, p: ForkPlan, mode: str) -> None:
    o = p.origin
    out.print(
        f"fork checkpoint {o.checkpoint_id} of run {o.run_id} at step {o.step}", soft_wrap=True
    )
    if p.in_doubt:
        out.print(
            Text(
                "in doubt in the origin (started, no result: it may have happened); settle "
                "it there with `savegame resolve` first, or a redo calls it again:",
                style="yellow",
            )
        )
        for c in p.in_doubt:
            out.print(f"  {c.request_id}  {_call(c)}", soft_wrap=True)
    if not p.writes:
        if not p.in_doubt:
            out.print("no recorded write after it: nothing can happen twice")
        return
    n = len(p.writes)
    writes = plural(n, "recorded write")
    if mode == "redo":
        out.print(Text(f"redo runs {writes} again:", style="yellow"))
    else:
        out.print(
            f"replay reuses {writes} while the fork makes the same calls; "
            "from the first call that differs, they run again:"
        )
    for c in p.writes:
        out.print(f"  {c.request_id}  {_call(c)}", soft_wrap=True)


def forked(out: Console, f: ForkResult, store: str | None) -> None:
    out.print(
        Text.assemble(
            ("forked: ", "bold"), f"run {f.run_id} from checkpoint {f.origin.checkpoint_id}"
        ),
        soft_wrap=True,
    )
    if f.edited:
        out.print(f"  edited    {', '.join(f.edited)}  (update checkpoint {f.checkpoint_id})")
    out.print(f"  reused    {plural(len(f.reused), 'call')} from the journal, nothing called")
    out.print(f"  executed  {plural(len(f.executed), 'call')}")
    if f.diverged_at is not None:
        out.print(Text(f"  diverged at {_call(f.diverged_at)}", style="yellow"), soft_wrap=True)
    if f.result is None:
        out.print(f"  not run: savegame resume {f.run_id}{store_tail(store)}", soft_wrap=True)


def forked_json(f: ForkResult) -> dict[str, Any]:
    def calls(items: tuple[Call, ...]) -> list[dict[str, Any]]:
        return [
            {"request_id": c.request_id, "step": c.step, "call_index": c.call_index,
             "node": c.node, "name": c.name, "kind": c.kind.value}
            for c in items
        ]  # fmt: skip

    return {
        "run_id": f.run_id,
        "thread_id": f.thread_id,
        "origin": f.origin.to_metadata(),
        "checkpoint_id": f.checkpoint_id,
        "edited": list(f.edited),
        "reused": calls(f.reused),
        "executed": calls(f.executed),
        "diverged_at": calls(f.executed[:1])[0] if f.executed else None,
    }
