"""A thread's runs as a tree: forks under the run they left, continuations under the
run whose state they continued, lineage kept when retention prunes checkpoints."""

from __future__ import annotations

from typing import Any

import pytest

from savegame import END, StepContext, Store, Workflow, run
from savegame.client import fork, history, prune, tree
from savegame.errors import NotFoundError
from savegame.maintenance import RetentionPolicy

wf = Workflow("tree-counter")


@wf.step(entry=True)
def tick(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    n = state.get("n", 0) + 1
    return {"n": n}, "tick" if n % 3 else END


def test_forks_and_continuations_hang_under_their_parents(store: Store) -> None:
    first = run(wf, {}, thread_id="t", store=store)
    second = run(wf, {}, thread_id="t", store=store)  # continues the thread: n 3 -> 6
    cps = list(reversed(history(first.run_id, store=store)))
    a = fork(cps[1].checkpoint_id, by="ana", reason="try again", store=store, workflow=wf)
    b = fork(cps[2].checkpoint_id, update={"n": 0}, store=store, workflow=wf)
    deeper = history(a.run_id, store=store)[-1]
    c = fork(deeper.checkpoint_id, store=store, workflow=wf)

    found = tree(second.run_id, store=store)
    assert found.thread_id == "t"
    (root,) = found.roots
    assert root.run_id == first.run_id and root.parent_run_id is None
    kids = {n.run_id: n for n in root.children}
    assert set(kids) == {second.run_id, a.run_id, b.run_id}
    assert not kids[second.run_id].forked and kids[second.run_id].parent_step == 3
    assert kids[a.run_id].forked and kids[a.run_id].parent_step == 1
    assert (kids[a.run_id].by, kids[a.run_id].reason) == ("ana", "try again")
    assert kids[b.run_id].edited == ("n",)
    assert [n.run_id for n in kids[a.run_id].children] == [c.run_id]
    assert next(n.run_id for n in found.walk()) == first.run_id and len(found.walk()) == 5
    forks = found.forks_at(first.run_id)
    assert forks[cps[1].checkpoint_id][0].run_id == a.run_id
    assert forks[cps[3].checkpoint_id][0].run_id == second.run_id
    assert tree("t", store=store).roots[0].run_id == first.run_id


def test_a_fork_keeps_its_lineage_when_its_first_checkpoint_is_pruned(store: Store) -> None:
    first = run(wf, {}, thread_id="t2", store=store)
    start = history(first.run_id, store=store)[-1]
    forked = fork(start.checkpoint_id, store=store, workflow=wf)
    prune(RetentionPolicy(keep_last=1), store=store)
    assert len(history(forked.run_id, store=store)) == 1
    (root,) = tree("t2", store=store).roots
    assert [(n.run_id, n.parent_checkpoint_id) for n in root.children] == [
        (forked.run_id, start.checkpoint_id)
    ]


def test_an_unknown_thread_or_run_is_not_found(store: Store) -> None:
    with pytest.raises(NotFoundError):
        tree("nope", store=store)
