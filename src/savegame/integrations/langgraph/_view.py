"""A LangGraph checkpoint as a person reads it, from the stored state alone (no graph).

What SavegameSaver stores (the package docstring): ``lg:checkpoint`` (the checkpoint
without its values: ``channel_versions``, ``versions_seen`` ...), ``lg:metadata``,
``lg:parent`` and ``c:<channel>`` per channel that holds a value; pending writes are
journal entries. From these, without importing the graph:

* **channels**: the ``c:`` keys that are the graph's state; LangGraph's own
  bookkeeping channels (``branch:to:<node>``, ``join:...``, ``__start__``,
  ``__pregel_tasks``) are kept apart, and a ``DeltaChannel`` (no value in the
  checkpoint: LangGraph replays ancestors' writes through its reducer) is named as one;
* **next**: the tasks LangGraph schedules from this checkpoint, as
  ``prepare_next_tasks`` finds them: a node is pulled when one of its trigger
  channels holds a value whose version is newer than the one the node last saw
  (LangGraph 1.x triggers node ``X`` by ``branch:to:X``, a join by
  ``join:<a+b>:X`` once every name has arrived, the graph's entry by
  ``__start__``), and each ``Send`` in ``__pregel_tasks`` is pushed. This is what
  ``graph.get_state_history()`` reports as ``next``; ``to_run`` leaves out the tasks
  whose writes are already stored, which is what ``graph.get_state(thread)`` reports
  for the latest checkpoint (a superstep stopped half-way: one task done, one
  interrupted);
* **pending writes**: each with the node of its task (read from LangGraph's task
  path), interrupts and errors marked.

Edges LangGraph 1.x does not build this way (a graph compiled by an older LangGraph,
the functional API's calls) are not seen as triggers: ``next`` then lists only what
it can read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from savegame.integrations.langgraph._lines import CHANNEL, CHECKPOINT, METADATA, PARENT, Write

NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"
"""The task id of writes that are input to a step (``update_state``, a resume for all)."""
INTERRUPT, ERROR, RESUME = "__interrupt__", "__error__", "__resume__"
#: Writes that say how a task went rather than what it produced (LangGraph's CONTROL_WRITES).
CONTROL = frozenset((INTERRUPT, ERROR, RESUME, "__error_source_node__", "__scheduled__"))
START, TASKS, BRANCH, JOIN = "__start__", "__pregel_tasks", "branch:to:", "join:"
PULL, PUSH = "__pregel_pull", "__pregel_push"


def internal(channel: str) -> bool:
    """LangGraph's bookkeeping, not the graph's state (a user channel cannot start with ``__``)."""
    return channel.startswith((BRANCH, JOIN, "__"))


@dataclass(frozen=True, slots=True)
class Task:
    """A task LangGraph runs from a checkpoint: a node pulled by a channel, or a ``Send``."""

    name: str
    push: int | None = None
    """The ``Send``'s position in ``__pregel_tasks``; None for a pulled node."""


@dataclass(frozen=True, slots=True)
class PendingWrite:
    """One write a task made from a checkpoint (stored before the next checkpoint)."""

    task_id: str
    task_path: str
    node: str | None
    """The task's node; None for input writes (``update_state``, a resume for all tasks)."""
    channel: str
    value: Any
    index: int

    @property
    def interrupt(self) -> bool:
        return self.channel == INTERRUPT

    @property
    def error(self) -> bool:
        return self.channel == ERROR


@dataclass(frozen=True, slots=True)
class Reading:
    """What a stored LangGraph checkpoint says, read without the graph."""

    lg_id: str
    """LangGraph's checkpoint id (what ``config["configurable"]["checkpoint_id"]`` takes)."""
    parent_lg_id: str | None
    step: int | None
    """LangGraph's step (-1 for the input checkpoint)."""
    source: str | None
    """``input``, ``loop``, ``update`` or ``fork``."""
    metadata: Mapping[str, Any]
    channels: Mapping[str, Any]
    """The graph's channels that hold a value, by name."""
    delta_channels: tuple[str, ...]
    """``DeltaChannel``s: no value here, LangGraph rebuilds them from ancestors' writes."""
    versions: Mapping[str, Any]
    next: tuple[Task, ...]
    writes: tuple[PendingWrite, ...]

    @property
    def to_run(self) -> tuple[Task, ...]:
        """``next`` without the tasks that finished (their writes are stored)."""
        done = {_task_of(w) for w in self.writes if w.node is not None and w.channel not in CONTROL}
        return tuple(t for t in self.next if (t.name, t.push) not in done)

    @property
    def interrupts(self) -> tuple[PendingWrite, ...]:
        return tuple(w for w in self.writes if w.interrupt)

    @property
    def asking(self) -> tuple[PendingWrite, ...]:
        """The interrupt writes of tasks still to run: what this checkpoint waits on (an
        interrupted task whose superstep went on without it is not one of them)."""
        left = {(t.name, t.push) for t in self.to_run}
        return tuple(w for w in self.interrupts if w.node is not None and _task_of(w) in left)

    @property
    def status(self) -> str:
        """``done`` (nothing left to run), ``interrupted`` (a task waits for a person),
        ``error`` (a task raised) or ``pending`` (tasks left: stopped at a breakpoint,
        or the process died)."""
        left = {(t.name, t.push) for t in self.to_run}
        if not left:
            return "done"
        if self.asking:
            return "interrupted"
        failed = any(w.error and w.node is not None and _task_of(w) in left for w in self.writes)
        return "error" if failed else "pending"


def read(state: Mapping[str, Any], writes: Sequence[Write]) -> Reading:
    """The reading of a decoded SavegameSaver state and its pending writes."""
    checkpoint = state[CHECKPOINT]
    metadata = state[METADATA] if isinstance(state[METADATA], Mapping) else {}
    versions = dict(checkpoint.get("channel_versions", {}))
    values = {k[len(CHANNEL) :]: v for k, v in state.items() if k.startswith(CHANNEL)}
    deltas = set(metadata.get("counters_since_delta_snapshot") or ())
    # A user channel with a version and no value is kept elsewhere: a DeltaChannel.
    deltas |= {name for name in versions if not internal(name) and name not in values}
    sends = values.get(TASKS) or []
    step = metadata.get("step")
    return Reading(
        lg_id=checkpoint["id"],
        parent_lg_id=state[PARENT],
        step=step if isinstance(step, int) else None,
        source=metadata.get("source") if isinstance(metadata.get("source"), str) else None,
        metadata=metadata,
        channels={name: values[name] for name in sorted(values) if not internal(name)},
        delta_channels=tuple(sorted(deltas - values.keys())),
        versions=versions,
        next=scheduled(checkpoint, values),
        writes=tuple(pending(writes, sends)),
    )


def scheduled(checkpoint: Mapping[str, Any], values: Mapping[str, Any]) -> tuple[Task, ...]:
    """The tasks LangGraph prepares from this checkpoint: Sends first, then pulled nodes."""
    tasks = [Task(_send_node(send), i) for i, send in enumerate(values.get(TASKS) or [])]
    versions = checkpoint.get("channel_versions", {})
    seen_all = checkpoint.get("versions_seen", {})
    pulled: set[str] = set()
    for channel, version in versions.items():
        node = _triggered(channel, values)
        if node is None or node in pulled:
            continue
        seen = seen_all.get(node)
        if seen is None or _newer(version, seen.get(channel)):
            pulled.add(node)
    return (*tasks, *(Task(name) for name in sorted(pulled)))


def _triggered(channel: str, values: Mapping[str, Any]) -> str | None:
    """The node ``channel`` triggers when it holds a value (is available), or None."""
    if channel not in values:
        return None
    if channel == START:
        return START
    if channel.startswith(BRANCH):
        return channel[len(BRANCH) :]
    if channel.startswith(JOIN):
        # join:<a+b>:<node> is a barrier: available once every name has written.
        parts = channel.split(":")
        arrived = values[channel]
        if len(parts) == 3 and isinstance(arrived, set | frozenset | list | tuple):
            return parts[2] if set(arrived) >= set(parts[1].split("+")) else None
    return None


def _newer(version: Any, seen: Any) -> bool:
    if seen is None:
        return True
    if type(version) is not type(seen):
        return str(version) > str(seen)
    return bool(version > seen)


def _send_node(send: Any) -> str:
    node = getattr(send, "node", None)
    return node if isinstance(node, str) else "?"


def pending(writes: Sequence[Write], sends: Sequence[Any]) -> list[PendingWrite]:
    return [
        PendingWrite(
            w.task_id, w.task_path, _node_of(w.task_id, w.task_path, sends), w.channel, w.value,
            w.index,
        )
        for w in writes
    ]  # fmt: skip


def _node_of(task_id: str, task_path: str, sends: Sequence[Any]) -> str | None:
    """The node of a task from LangGraph's task path: ``~__pregel_pull, ask`` is node
    ``ask``; ``~__pregel_push, 0000000001, False`` is the second ``Send``'s node."""
    if task_id == NULL_TASK_ID:
        return None
    parts = task_path.removeprefix("~").split(", ")
    if len(parts) >= 2 and parts[0] == PULL:
        return parts[1]
    if len(parts) >= 2 and parts[0] == PUSH and parts[1].isdigit():
        index = int(parts[1])
        return _send_node(sends[index]) if index < len(sends) else f"send[{index}]"
    return task_path or "?"


def _task_of(write: PendingWrite) -> tuple[str | None, int | None]:
    parts = write.task_path.removeprefix("~").split(", ")
    push = int(parts[1]) if len(parts) >= 2 and parts[0] == PUSH and parts[1].isdigit() else None
    return write.node, push


def subgraph(ns: str) -> tuple[str, ...]:
    """The nodes a namespace nests in: ``outer:<task>|inner:<task>`` is (outer, inner)."""
    return tuple(part.partition(":")[0] for part in ns.split("|")) if ns else ()


def message_line(value: Any) -> str | None:
    """A LangChain message as ``ai: text`` (tool calls named), or None for other values.

    Read by its fields, so the caller need not import LangChain."""
    kind, content = getattr(value, "type", None), getattr(value, "content", None)
    if not isinstance(kind, str) or content is None or not hasattr(value, "additional_kwargs"):
        return None
    if isinstance(content, list):
        content = " ".join(
            str(part.get("text", f"[{part.get('type', '?')}]"))
            if isinstance(part, dict)
            else str(part)
            for part in content
        )
    text = f"{kind}: {content}"
    calls = getattr(value, "tool_calls", None) or []
    if calls:
        named = ", ".join(str(c.get("name", "?")) for c in calls if isinstance(c, dict))
        text += f" [calls {named}]"
    return text
