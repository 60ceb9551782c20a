"""A LangGraph checkpointer over any savegame store (``savegame[langgraph]``).

``graph.compile(checkpointer=SavegameSaver("sqlite:///agent.db"))``.

The mapping, and why:

* One savegame **run per (thread_id, checkpoint_ns)**, thread id kept, the namespace in
  the run's metadata (``checkpoint_ns``) and the run's workflow named ``langgraph``. A
  namespace is one linear-ish line of checkpoints, which is what savegame's storage
  engine chains deltas along; a subgraph's checkpoints get their own chain, so
  deleting or pruning one namespace never touches another's bases. Runs are stored
  ``completed``: no savegame worker ever claims one.
* **Checkpoint ids kept**: the stored id is ``<langgraph id>@<run id>``. LangGraph ids
  (uuid6) are unique per thread only (``copy_thread`` copies them to another thread),
  savegame's are unique per store; the LangGraph id first keeps savegame's order
  (lexicographic = creation order) equal to LangGraph's.
* The **state** of a savegame checkpoint holds ``lg:checkpoint`` (the LangGraph checkpoint
  without its values), ``lg:metadata``, ``lg:parent`` and one key ``c:<channel>`` per
  channel. Only channels whose version changed are written as changed, so a delta
  holds what a step wrote (a ``messages`` list appended to is an append), through the
  same encoder, blobs, zstd and envelopes (checksums, encryption) as a workflow's state.
  Three scalars of LangGraph's metadata (``source``, ``step``, ``run_id``: identifiers,
  as savegame's own step and ids are) are also in the header, authenticated under keys
  and sealed when listed in ``StorageConfig.sensitive_metadata``, so ``delete_for_runs``
  asks the store which lines hold a run instead of decoding every checkpoint.
* **Pending writes** are journal entries of that run (kind ``read``, status ``done``),
  request id ``<langgraph id>|<task id>|<index>``: the journal's insert-if-absent is
  LangGraph's "a normal write is stored once"; a reserved channel (error, interrupt,
  resume, scheduled) has a fixed negative index and its entry is re-settled with the
  new value, i.e. overwritten. Entries are sealed like every journal entry; a value of
  512 bytes or more (an appended message) is stored as a zstd frame of its JSON, which
  ``codec.decode_value`` reads like any value, and one checkpoint's writes are read as
  a request-id prefix (``Store.list_effects(request_prefix=...)``), not the whole journal.
  A task's writes are one store write (``record_intents``); when LangGraph's loop hands
  them over, they wait a few milliseconds for the step's checkpoint and are committed in
  its transaction (``_rides``): a step pays one commit, where SqliteSaver pays two.
* ``prune``, ``delete_for_runs`` and ``copy_thread`` **rebuild** a namespace's run:
  the kept checkpoints are re-encoded into a new run (a keyframe, then deltas) with
  their writes, then the old run is deleted. A savegame delta needs its bases, so
  deleting records out of the middle of a chain in place would break the load of the
  kept ones.
* **Durable tools** (:func:`durable_tool`) journal their calls in the same run, under
  ``tool:<checkpoint>:<task>:<call>``; a rebuild copies the calls of the checkpoints it
  keeps. See :mod:`savegame.integrations.langgraph._tools` for the naming and why.
* LangGraph has no owner for a thread; every SavegameSaver holds the run's lease under
  one owner name and takes it over when another process moved the token.
* **Reading without the graph** (``_view``, ``_reading``): what ``savegame show``,
  ``history``, ``diff`` and ``runs`` print for a LangGraph thread (channels, next nodes,
  pending writes), and the rules ``savegame prune`` applies to its runs
  (``_retention``: a thread is one unit, a waiting one is exempt); importable without
  LangGraph, which only decoding needs. A type the reading process lacks reads as a
  named placeholder (:class:`savegame.codec.Unregistered`), never as a failure.
* **Status and waiting** (``_waits``): the status savegame shows for a LangGraph run
  (stored ``completed``, it is what its latest checkpoint says: ``interrupted`` while an
  ``interrupt()`` is unanswered, ``queued`` once answered ...), computed in one place
  for every list (``_shown``: ``savegame runs``, ``approvals``, ``effects``, the UI).
* **Answering** (``_answer``): a person answers an ``interrupt()`` from the CLI or the
  UI without the graph: the asking task's ``__resume__`` write, with who and when; the
  application continues with ``graph.invoke(None, config)``.

:func:`migrate` (``savegame migrate langgraph``) moves threads from LangGraph's own
SqliteSaver and PostgresSaver into a store through SavegameSaver, resumable and
verified; how it keeps each thread whole is in its module, ``_migrate``.

The saver is imported on first use, so the readers (and ``savegame`` on a machine
without ``savegame[langgraph]``) do not import LangGraph.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from savegame.integrations.langgraph._answer import Answer, answer, thread_of
from savegame.integrations.langgraph._reading import (
    UNDECODED,
    LangGraphCheckpoint,
    LangGraphDiff,
    ThreadLine,
    decodable,
    diff_checkpoints,
    find_checkpoint,
    line_history,
    line_of,
)
from savegame.integrations.langgraph._retention import retention
from savegame.integrations.langgraph._shown import (
    LangGraphEffects,
    ShownRun,
    bookkeeping,
    internal,
    line_effects,
    pending_of,
    shown_run,
    shown_runs,
    waiting,
)
from savegame.integrations.langgraph._view import PendingWrite, Reading, Task, message_line
from savegame.integrations.langgraph._waits import Answered, Ask, ThreadWaits

if TYPE_CHECKING:
    from savegame.integrations.langgraph._migrate import MigrationReport, ThreadResult, migrate
    from savegame.integrations.langgraph._saver import SavegameSaver
    from savegame.integrations.langgraph._tools import durable_tool

#: Names that need LangGraph installed, and the module that holds each.
_LAZY = {
    "MigrationReport": "_migrate",
    "SavegameSaver": "_saver",
    "ThreadResult": "_migrate",
    "durable_tool": "_tools",
    "migrate": "_migrate",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module = importlib.import_module(f"{__name__}.{_LAZY[name]}")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "UNDECODED",
    "Answer",
    "Answered",
    "Ask",
    "LangGraphCheckpoint",
    "LangGraphDiff",
    "LangGraphEffects",
    "MigrationReport",
    "PendingWrite",
    "Reading",
    "SavegameSaver",
    "ShownRun",
    "Task",
    "ThreadLine",
    "ThreadResult",
    "ThreadWaits",
    "answer",
    "bookkeeping",
    "decodable",
    "diff_checkpoints",
    "durable_tool",
    "find_checkpoint",
    "internal",
    "line_effects",
    "line_history",
    "line_of",
    "message_line",
    "migrate",
    "pending_of",
    "retention",
    "shown_run",
    "shown_runs",
    "thread_of",
    "waiting",
]
