"""LangGraph threads found and loaded from a store, read-only: what ``savegame show``,
``history``, ``diff`` and ``runs`` ask when a run was written by SavegameSaver.

Each function returns None when the id is not LangGraph's, so a caller falls back to
savegame's own reading. Ids accepted wherever a checkpoint id is: a run id (its latest
checkpoint), a stored id (``<langgraph id>@<run id>``), a LangGraph thread id (its root
namespace's latest checkpoint) and a LangGraph checkpoint id, looked up in ``thread``
when given, else in every LangGraph run (refused when two threads hold it, as
``copy_thread`` makes them).

Without LangGraph installed nothing decodes (the channels hold LangChain's types): a
checkpoint is still found, named and dated, with ``missing`` saying why it has no
reading.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from savegame.client import connect
from savegame.codec import load_state, placeholders, reveal_metadata
from savegame.codec.storage import StorageConfig
from savegame.errors import ConfigurationError, NotFoundError
from savegame.inspect import StateDiff, compare
from savegame.integrations.langgraph._lines import NS_KEY, WORKFLOW, Lines, lg_id_of, stored_id
from savegame.integrations.langgraph._view import Reading, read, subgraph
from savegame.model import Checkpoint, CheckpointHeader, CheckpointRecord, RunInfo
from savegame.stores import Store, naming

UNDECODED = "install savegame[langgraph] to decode its channels (langgraph is not installed)"
#: LangGraph's ids are uuid6: only an id of that shape is looked up in every LangGraph run.
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_ALL = 1_000_000


@dataclass(frozen=True, slots=True)
class ThreadLine:
    """A savegame run that holds one (thread, namespace) of a LangGraph thread."""

    run_id: str
    thread_id: str
    ns: str
    """LangGraph's ``checkpoint_ns``: empty for the root graph, ``node:<task id>`` (joined
    by ``|``) for a subgraph."""

    @property
    def root(self) -> bool:
        return self.ns == ""

    @property
    def subgraph(self) -> tuple[str, ...]:
        """The nodes the namespace nests in, outermost first (empty for the root)."""
        return subgraph(self.ns)

    @property
    def where(self) -> str:
        """``root``, or ``subgraph outer > inner``."""
        return "root" if self.root else "subgraph " + " > ".join(self.subgraph)


def line_of(run: RunInfo) -> ThreadLine | None:
    """The LangGraph line a run holds, or None when SavegameSaver did not write it."""
    if run.workflow != WORKFLOW:
        return None
    return ThreadLine(run.run_id, run.thread_id, str(run.metadata.get(NS_KEY, "")))


@dataclass(frozen=True, slots=True)
class LangGraphCheckpoint:
    """A stored LangGraph checkpoint: where it is, and what it says when it decodes."""

    line: ThreadLine
    header: CheckpointHeader
    reading: Reading | None
    """None when the state could not be decoded (``missing`` says why)."""
    missing: str | None = None

    @property
    def lg_id(self) -> str:
        return lg_id_of(self.header.checkpoint_id)

    @property
    def parent_lg_id(self) -> str | None:
        parent = self.header.parent_id
        return None if parent is None else lg_id_of(parent)

    @property
    def step(self) -> int | None:
        if self.reading is not None:
            return self.reading.step
        step = self.header.metadata.get("step")
        return step if isinstance(step, int) else None

    @property
    def source(self) -> str | None:
        if self.reading is not None:
            return self.reading.source
        source = self.header.metadata.get("source")
        return source if isinstance(source, str) else None


@dataclass(frozen=True, slots=True)
class LangGraphDiff:
    """Two LangGraph checkpoints compared channel by channel."""

    a: LangGraphCheckpoint
    b: LangGraphCheckpoint
    channels: StateDiff
    """The diff of the graph's channels (paths start at the channel's name)."""


def decodable() -> str | None:
    """None when LangGraph's types can be decoded in this process, else why not."""
    try:
        from savegame.integrations.langgraph._types import register_langgraph_types

        register_langgraph_types()
    except ImportError:
        return UNDECODED
    return None


@contextmanager
def opened(store: Store | str | None) -> Iterator[Store]:
    """``store`` for one reader: a URL (or None) opened through a handle
    (:func:`savegame.connect`; a missing store refused, closed after), a Store used as
    it is; a NotFoundError raised inside names it."""
    with connect(store, create=False) as sg, naming(sg.store) as s:
        yield s


def find_checkpoint(
    ident: str,
    *,
    thread: str | None = None,
    store: Store | str | None = None,
    storage: StorageConfig | None = None,
) -> LangGraphCheckpoint | None:
    """The LangGraph checkpoint ``ident`` names (see the module docstring), or None."""
    with opened(store) as s:
        found = _locate(s, ident, thread)
        return None if found is None else load(s, *found, storage)


def line_history(
    ident: str,
    *,
    limit: int | None = None,
    store: Store | str | None = None,
    storage: StorageConfig | None = None,
) -> tuple[ThreadLine, list[LangGraphCheckpoint]] | None:
    """A LangGraph run's checkpoints, newest first (a thread id: its root namespace), or None."""
    with opened(store) as s:
        run = _run(s, ident) or _root(s, ident)
        line = None if run is None else line_of(run)
        if run is None or line is None:
            return None
        headers = s.list_checkpoints(run.run_id, limit=limit)
        missing = decodable()
        with placeholders():
            writes = {} if missing else Lines(s, storage).writes(run.run_id)
        rows = [
            load(s, run, s.get_checkpoint(h.checkpoint_id), storage, writes, missing)
            for h in headers
        ]
        return line, rows


def diff_checkpoints(
    a: str,
    b: str,
    *,
    thread: str | None = None,
    context: int = 0,
    store: Store | str | None = None,
    storage: StorageConfig | None = None,
) -> LangGraphDiff | None:
    """The channels of two LangGraph checkpoints compared, or None when neither is one.

    Raises:
        ConfigurationError: only one of them is a LangGraph checkpoint, or LangGraph
            is not installed (nothing decodes).
    """
    with opened(store) as s:
        left, right = _locate(s, a, thread), _locate(s, b, thread)
        if left is None and right is None:
            return None
        if left is None or right is None:
            lg, other = (b, a) if left is None else (a, b)
            raise ConfigurationError(
                f"{lg!r} is a LangGraph checkpoint and {other!r} is not: "
                "compare two checkpoints of the same kind"
            )
        one, two = load(s, *left, storage), load(s, *right, storage)
    if one.reading is None or two.reading is None:
        raise ConfigurationError(f"cannot compare LangGraph checkpoints: {UNDECODED}")
    channels = compare(
        Checkpoint(one.header, dict(one.reading.channels)),
        Checkpoint(two.header, dict(two.reading.channels)),
        context=context,
    )
    return LangGraphDiff(one, two, channels)


# -- finding ------------------------------------------------------------------------
def _run(s: Store, ident: str) -> RunInfo | None:
    try:
        return s.get_run(ident)
    except NotFoundError:
        return None


def _lg_runs(s: Store, thread: str | None) -> list[RunInfo]:
    return [r for r in s.list_runs(thread_id=thread, limit=_ALL) if r.workflow == WORKFLOW]


def _root(s: Store, thread: str) -> RunInfo | None:
    """The run of a LangGraph thread's root namespace (the newest, should there be two)."""
    return next((r for r in _lg_runs(s, thread) if not r.metadata.get(NS_KEY)), None)


def _locate(s: Store, ident: str, thread: str | None) -> tuple[RunInfo, CheckpointRecord] | None:
    if thread is not None and "@" in ident:
        ident = lg_id_of(ident)  # a stored id: its LangGraph id, looked up in the thread
    if thread is None:
        run = _run(s, ident)
        if run is not None:
            return (run, s.latest_checkpoint(run.run_id)) if line_of(run) else None
        try:
            record = s.get_checkpoint(ident)
        except NotFoundError:
            pass
        else:
            owner = s.get_run(record.run_id)
            return (owner, record) if line_of(owner) else None
        root = _root(s, ident)
        if root is not None:
            return root, s.latest_checkpoint(root.run_id)
        if not _UUID.fullmatch(ident):
            return None
    found: list[tuple[RunInfo, CheckpointRecord]] = []
    for run in _lg_runs(s, thread):
        try:
            found.append((run, s.get_checkpoint(stored_id(ident, run.run_id))))
        except NotFoundError:
            continue
    if len(found) > 1:
        threads = sorted({run.thread_id for run, _ in found})
        raise ConfigurationError(
            f"LangGraph checkpoint {ident!r} is in {len(threads)} threads "
            f"({', '.join(threads)}): name the thread (--thread)"
        )
    if not found and thread is not None:
        raise NotFoundError(f"checkpoint of LangGraph thread {thread!r}", ident)
    return found[0] if found else None


def load(
    s: Store,
    run: RunInfo,
    record: CheckpointRecord,
    storage: StorageConfig | None,
    writes: dict[str, Any] | None = None,
    missing: str | None = None,
) -> LangGraphCheckpoint:
    """``record`` read; ``writes`` (the run's, by LangGraph id) are read for it when None.

    A value of a type this process does not have (the graph's own classes, where the
    reader does not import them) reads as a :class:`~savegame.codec.Unregistered`
    placeholder: showing a thread never fails on a type."""
    line = line_of(run)
    assert line is not None
    missing = missing or decodable()
    if missing:
        return LangGraphCheckpoint(
            line, reveal_metadata(record.header, storage), reading=None, missing=missing
        )
    lg_id = lg_id_of(record.checkpoint_id)
    with placeholders():
        cp = load_state(s, record, storage)
        if writes is None:
            writes = Lines(s, storage).writes(run.run_id, lg_id)
    return LangGraphCheckpoint(line, cp.header, reading=read(cp.state, writes.get(lg_id, [])))
