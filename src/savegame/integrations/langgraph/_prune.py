"""What ``SavegameSaver.prune(strategy="keep_latest")`` keeps of a thread: LangGraph's rules.

As LangGraph's PostgresSaver prunes, read once from the thread's heads before anything
is deleted:

* each namespace keeps its latest checkpoint (what ``get_tuple`` loads) with its
  pending writes; one written before checkpoint format 4 also keeps its parent when the
  parent holds pending sends (LangGraph moves those into the child on load);
* and, where LangGraph's PostgresSaver refuses the thread instead, the ancestors a
  ``DeltaChannel``'s value is rebuilt from: such a channel keeps no value in a
  checkpoint, LangGraph replays the writes of the parent chain down to the nearest
  checkpoint that holds one;
* a subgraph **call** (a namespace with the calling task's id after a ``:``) goes whole
  once the root checkpoint it started from is saved and is not the root's kept one: the
  call is over. One started from the kept root checkpoint (an interrupted subgraph) keeps
  its latest, and so does a ``checkpointer=True`` subgraph (no ``:``), whose state
  outlives each call;
* a kept checkpoint whose parent is not kept is left without a parent, so no
  ``parent_config`` names a checkpoint that is gone.
"""

from __future__ import annotations

from typing import Any

from savegame.integrations.langgraph._lines import (
    CHANNEL,
    CHECKPOINT,
    METADATA,
    PARENT,
    Lines,
    stored_id,
)

#: LangGraph's channel of pending sends (``langgraph._internal._constants.TASKS``).
TASKS = "__pregel_tasks"
#: The checkpoint format from which pending sends live in the checkpoint's own channel.
SENDS_IN_CHECKPOINT = 4


def keep_latest(lines: Lines, thread_id: str) -> dict[str, set[str] | None]:
    """The stored ids each namespace's run keeps (its run id -> them), None for a
    namespace that goes whole."""
    runs = lines.namespaces(thread_id)
    heads = {ns: _head(lines, run_id) for ns, run_id in runs.items()}
    root = heads.get("")
    root_head = None if root is None else root[CHECKPOINT]["id"]
    plan: dict[str, set[str] | None] = {}
    for ns, run_id in runs.items():
        head = heads[ns]
        if head is None:
            continue
        started = _parents(head).get("")
        if (
            ":" in ns
            and isinstance(started, str)
            and started != root_head
            and "" in runs
            and lines.has(stored_id(started, runs[""]))
        ):
            plan[run_id] = None
        else:
            plan[run_id] = _needed(lines, run_id, head)
    return plan


def _head(lines: Lines, run_id: str) -> dict[str, Any] | None:
    latest = lines.store.list_checkpoints(run_id, limit=1)
    return None if not latest else lines.load(latest[0].checkpoint_id)


def _parents(state: dict[str, Any]) -> dict[str, Any]:
    parents = state[METADATA].get("parents") if isinstance(state[METADATA], dict) else None
    return parents if isinstance(parents, dict) else {}


def _needed(lines: Lines, run_id: str, head: dict[str, Any]) -> set[str]:
    """The head, and the ancestors its values are rebuilt from (module docstring)."""
    keep = {stored_id(head[CHECKPOINT]["id"], run_id)}
    parent = head[PARENT]
    if parent is not None and _sends_in_parent(lines, run_id, head):
        keep.add(stored_id(parent, run_id))
    versions = head[CHECKPOINT].get("channel_versions", {})
    missing = {name for name in versions if CHANNEL + name not in head and not _trigger(name)}
    state = head
    while missing and parent is not None:
        ancestor = stored_id(parent, run_id)
        found = lines.load(ancestor)
        if found is None:
            break
        state = found
        keep.add(ancestor)
        missing = {name for name in missing if CHANNEL + name not in state}
        parent = state[PARENT]
    return keep


def _sends_in_parent(lines: Lines, run_id: str, head: dict[str, Any]) -> bool:
    version = head[CHECKPOINT].get("v")
    if not isinstance(version, int) or version >= SENDS_IN_CHECKPOINT:
        return False
    writes = lines.writes(run_id, head[PARENT]).get(head[PARENT], [])
    return any(write.channel == TASKS for write in writes)


def _trigger(channel: str) -> bool:
    """LangGraph's own trigger channels (the input, a node's ``branch:to:``): one without a
    value in a checkpoint was consumed, never a ``DeltaChannel`` to rebuild from its parents."""
    return channel == "__start__" or channel.startswith("branch:to:")


def cut_parents(kept: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``kept`` with the parent of each whose parent is not kept removed."""
    ids = {state[CHECKPOINT]["id"] for state in kept}
    return [
        state if state[PARENT] is None or state[PARENT] in ids else {**state, PARENT: None}
        for state in kept
    ]
