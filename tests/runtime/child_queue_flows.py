"""The workflows of the child-queue tests (issue 30, point 6): a planner that starts children
with the ``start_child`` options its input lists, each step appending ``start``/``end``
markers to the file its state names. Imported by the tests and by worker processes
(``tests.runtime.child_queue_flows:PLANNER``), so nothing here imports pytest.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from savegame import END, RunStatus, StepContext, Workflow, submit
from savegame.client import declare_queue, get_checkpoint, get_run, list_runs

State = dict[str, Any]

#: How long a child's step works: long enough that three unlimited children overlap.
WORK_SECONDS = 0.05


def mark(state: State, ctx: StepContext, what: str) -> None:
    with open(state["log"], "a") as f:
        f.write(f"{what} {ctx.run_id} {ctx.node}\n")


CHILD = Workflow("queued-child")


@CHILD.step(entry=True)
def work(state: State, ctx: StepContext) -> tuple[State, str]:
    mark(state, ctx, "start")
    try:
        time.sleep(WORK_SECONDS)
        return {"done": state["n"]}, END
    finally:
        mark(state, ctx, "end")


PLANNER = Workflow("queued-planner")


@PLANNER.step(entry=True)
def plan(state: State, ctx: StepContext) -> tuple[State, str]:
    mark(state, ctx, "start")
    try:
        kids = [
            ctx.start_child(CHILD, {"n": n, "log": state["log"]}, **options)
            for n, options in enumerate(state["children"])
        ]
        return {"kids": kids}, "gather"
    finally:
        mark(state, ctx, "end")


@PLANNER.step()
def gather(state: State, ctx: StepContext) -> tuple[State, str]:
    mark(state, ctx, "start")
    try:  # the first time, wait_children suspends the run: an end all the same
        return {"got": [r["done"] for r in ctx.wait_children(state["kids"])]}, END
    finally:
        mark(state, ctx, "end")


def most_at_once(log: Path) -> int:
    """The most steps the markers show executing at once; every start has its end."""
    running: set[str] = set()
    most = 0
    for line in log.read_text().splitlines():
        what, run_id, node = line.split(" ")
        if what == "start":
            running.add(f"{run_id} {node}")
            most = max(most, len(running))
        else:
            running.remove(f"{run_id} {node}")
    assert running == set(), f"steps that never ended: {running}"
    return most


def children_of(parent: str, n: int) -> list[str]:
    return [f"{parent}:1:{i}" for i in range(n)]


def submit_tree(url: str, log: Path, children: int = 3) -> str:
    """A planner of ``children`` children submitted to queue ``llm``, declared with
    concurrency 1; its run id."""
    declare_queue("llm", concurrency=1, store=url)
    state = {"log": str(log), "children": [{}] * children}
    return submit(PLANNER, state, store=url, queue="llm").run_id


def check_tree_done(url: str, parent: str, log: Path, children: int = 3) -> None:
    """The planner and its children completed, the planner with every child's result,
    and never two of their steps at once (the queue's concurrency)."""
    runs = {r.run_id: r.status for r in list_runs(store=url)}
    expected = dict.fromkeys([parent, *children_of(parent, children)], RunStatus.COMPLETED)
    assert runs == expected, runs
    head = get_run(parent, store=url).head_checkpoint_id or ""
    assert get_checkpoint(head, store=url).state["got"] == list(range(children))
    assert most_at_once(log) == 1
