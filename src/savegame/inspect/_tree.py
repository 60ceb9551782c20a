"""A thread's runs as a tree: which run each one started from, and at which checkpoint.

Lineage is read, never stored twice. A fork names its origin in its first
checkpoint's metadata, which ``create_run`` copies to the run row (covered by the
run's check, and kept when retention prunes checkpoints). Any other run on a thread
continues from the thread's latest state: its first checkpoint's ``parent_id`` is that
checkpoint, of an earlier run. A run whose first checkpoint was pruned (or whose
parent run was deleted) shows as a root.

Child runs (``ctx.start_child``) live on threads of their own; a node names the run that
started it (``spawned_by``, from its row's metadata) and holds the children it started
(``spawned``, from its journal's child entries), each with theirs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from savegame.codec import reveal_run_metadata
from savegame.codec.storage import StorageConfig
from savegame.effects import Origin, parent_of
from savegame.effects.decisions import AUTHENTICATED_AS
from savegame.errors import NotFoundError
from savegame.model import CheckpointHeader, EffectKind, RunInfo
from savegame.stores import Store
from savegame.stores.base import ALL_EFFECTS

#: How many runs of one thread a tree reads.
MAX_RUNS = 10_000


@dataclass(frozen=True, slots=True)
class RunNode:
    """One run in its thread's tree."""

    run: RunInfo
    parent_run_id: str | None
    """The run this one started from; None for a root."""
    parent_checkpoint_id: str | None
    """The checkpoint it started from (its first checkpoint's parent)."""
    parent_step: int | None
    """That checkpoint's step."""
    forked: bool
    """A fork (``savegame fork``), not a continuation of the thread's latest state."""
    mode: str | None = None
    """How a fork replays: ``replay`` or ``redo``."""
    by: str | None = None
    reason: str | None = None
    edited: tuple[str, ...] = ()
    """What the fork's edit changed (state keys and paths)."""
    children: list[RunNode] = field(default_factory=list)
    """Runs started from this one, oldest first."""
    spawned_by: str | None = None
    """When this is a child run: the run whose step started it."""
    spawned: list[RunNode] = field(default_factory=list)
    """The child runs this one started (on threads of their own), oldest first."""
    authenticated_as: str | None = None
    """For a fork: the identity a front end checked for it (``ui-token:NAME``), beside ``by``."""

    @property
    def run_id(self) -> str:
        return self.run.run_id


@dataclass(frozen=True, slots=True)
class Tree:
    """A thread's runs, each under the run it started from."""

    thread_id: str
    roots: list[RunNode]
    """Runs started from nothing (or from what is gone), oldest first."""

    def walk(self) -> list[RunNode]:
        """Every node, depth first, oldest first."""
        out: list[RunNode] = []
        todo = list(reversed(self.roots))
        while todo:
            node = todo.pop()
            out.append(node)
            todo.extend(reversed(node.children))
        return out

    def node(self, run_id: str) -> RunNode:
        for node in self.walk():
            if node.run_id == run_id:
                return node
        raise NotFoundError("run", run_id)

    def forks_at(self, run_id: str) -> dict[str, list[RunNode]]:
        """The runs started from each checkpoint of ``run_id``, by checkpoint id."""
        out: dict[str, list[RunNode]] = {}
        for child in self.node(run_id).children:
            if child.parent_checkpoint_id is not None:
                out.setdefault(child.parent_checkpoint_id, []).append(child)
        return out


def _node(
    info: RunInfo, first: CheckpointHeader | None, owner: dict[str, CheckpointHeader]
) -> RunNode:
    origin = Origin.of(info.metadata)
    meta: dict[str, Any] = dict(info.metadata)
    if origin is not None:
        fork = meta.get("fork") or {}
        edited = fork.get("edited") if isinstance(fork, dict) else None
        return RunNode(
            info,
            parent_run_id=origin.run_id,
            parent_checkpoint_id=origin.checkpoint_id,
            parent_step=origin.step,
            forked=True,
            mode=origin.mode,
            by=_text(meta.get("by")),
            reason=_text(meta.get("reason")),
            edited=tuple(str(e) for e in edited) if isinstance(edited, list) else (),
            authenticated_as=_text(meta.get(AUTHENTICATED_AS)),
        )
    parent_id = None if first is None else first.parent_id
    parent = None if parent_id is None else owner.get(parent_id)
    if parent is None or parent.run_id == info.run_id:
        return RunNode(
            info, parent_run_id=None, parent_checkpoint_id=parent_id, parent_step=None, forked=False
        )
    return RunNode(
        info,
        parent_run_id=parent.run_id,
        parent_checkpoint_id=parent_id,
        parent_step=parent.step,
        forked=False,
    )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _first(headers: list[CheckpointHeader]) -> CheckpointHeader | None:
    return headers[-1] if headers else None


def _spawned(s: Store, run_id: str, seen: set[str]) -> list[RunNode]:
    """The child runs ``run_id`` started, each with its own (a cycle of edited rows stops)."""
    out: list[RunNode] = []
    for entry in s.list_effects(run_id, kinds=[EffectKind.CHILD], limit=ALL_EFFECTS):
        child = entry.metadata.get("child")
        if not isinstance(child, str) or child in seen:
            continue
        seen.add(child)
        try:
            info = s.get_run(child)
        except NotFoundError:
            continue  # pruned: the entry stays in the parent's journal
        out.append(
            RunNode(
                info,
                parent_run_id=None,
                parent_checkpoint_id=None,
                parent_step=None,
                forked=False,
                spawned_by=run_id,
            )
        )
        out[-1].spawned.extend(_spawned(s, child, seen))
    return out


def build(s: Store, thread_id: str, storage: StorageConfig | None = None) -> Tree:
    """The tree of ``thread_id``'s runs (reads every run's checkpoint headers)."""
    runs = sorted(
        (reveal_run_metadata(r, storage) for r in s.list_runs(thread_id=thread_id, limit=MAX_RUNS)),
        key=lambda r: (r.created_at, r.run_id),
    )
    histories = {r.run_id: s.list_checkpoints(r.run_id) for r in runs}
    owner = {h.checkpoint_id: h for headers in histories.values() for h in headers}
    nodes = {r.run_id: _node(r, _first(histories[r.run_id]), owner) for r in runs}
    seen = set(nodes)
    for run_id, node in list(nodes.items()):
        nodes[run_id] = replace(node, spawned_by=parent_of(node.run.metadata))
        nodes[run_id].spawned.extend(_spawned(s, run_id, seen))
    roots: list[RunNode] = []
    for node in nodes.values():
        parent = nodes.get(node.parent_run_id) if node.parent_run_id else None
        (parent.children if parent is not None else roots).append(node)
    return Tree(thread_id, roots)


def tree(ident: str, *, store: Store, storage: StorageConfig | None = None) -> Tree:
    """The tree of runs of a thread, given the thread id or the id of one of its runs.

    The operation behind :meth:`savegame.Savegame.tree`, which documents it, on the open
    ``store``.
    """
    try:
        thread_id = store.get_run(ident).thread_id
    except NotFoundError:
        thread_id = ident
    found = build(store, thread_id, storage)
    if not found.roots:
        raise NotFoundError("run or thread", ident)
    return found
