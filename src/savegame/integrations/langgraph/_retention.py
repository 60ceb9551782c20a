"""LangGraph's rules for ``savegame prune``: what a LangGraph thread needs kept.

savegame's own rules read run headers, and a SavegameSaver run's header says little:
every line is stored ``completed``, one thread is several runs (one per namespace).
Applied as they are, ``--finished-for`` would delete a thread waiting at an
``interrupt()``, or a subgraph's line without its parent's. So, per thread, from the
latest checkpoint of its root namespace (decoded, as ``savegame show`` reads it):

* a thread with tasks left to run (interrupted, stopped at a breakpoint, or whose
  process died) waits for a person: all its runs are exempt unless
  ``include_waiting``, as a waiting savegame run is;
* a finished thread (nothing left to run, or a task raised) idle for longer than
  ``finished_for`` (its newest checkpoint, in any namespace) goes whole;
* otherwise ``keep_last``, ``ttl`` and ``expires_at`` apply to each namespace's line,
  in place: the latest checkpoint and every delta base stay (savegame's rule), and so
  do the ancestors a kept checkpoint's ``DeltaChannel`` values are rebuilt from
  (LangGraph replays their writes), found by walking parents until each such
  channel holds a value.

In place, not rebuilt as ``SavegameSaver.prune`` does: a graph still writing to the
thread keeps appending to the same run. Pending writes of deleted checkpoints stay in
the journal (no store call deletes single entries); LangGraph never reads them.
Without LangGraph installed nothing decodes: LangGraph runs are skipped, and said so.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from savegame.codec.storage import StorageConfig
from savegame.integrations.langgraph._reading import decodable, line_of, load
from savegame.maintenance import ForeignRun, RetentionPolicy, RetentionRules, Verdict
from savegame.stores import Store

#: The root's status when its thread waits (see ``Reading.status``).
WAITING = ("interrupted", "pending")


def retention(storage: StorageConfig | None = None) -> RetentionRules:
    """LangGraph's rules for ``savegame.client.prune(policy, rules={"langgraph": retention()})``;
    ``storage`` holds the keys the threads' checkpoints are read with."""

    def rules(
        store: Store, runs: Sequence[ForeignRun], policy: RetentionPolicy, now: datetime
    ) -> Verdict:
        return _verdict(store, runs, policy, now, storage)

    return rules


def _verdict(
    store: Store,
    runs: Sequence[ForeignRun],
    policy: RetentionPolicy,
    now: datetime,
    storage: StorageConfig | None,
) -> Verdict:
    missing = decodable()
    if missing:
        return Verdict(skipped={f.run.run_id: f"a LangGraph thread: {missing}" for f in runs})
    threads: dict[str, list[ForeignRun]] = {}
    for f in runs:
        threads.setdefault(f.run.thread_id, []).append(f)
    delete: set[str] = set()
    exempt: set[str] = set()
    keep: dict[str, frozenset[str]] = {}
    for group in threads.values():
        ids = {f.run.run_id for f in group}
        status = _status(store, group, storage)
        if status in WAITING and not policy.include_waiting:
            exempt |= ids
            continue
        newest = max((h.created_at for f in group for h in f.headers), default=None)
        idle = newest is None or (
            policy.finished_for is not None and newest < now - policy.finished_for
        )
        if status not in WAITING and policy.finished_for is not None and idle:
            delete |= ids
            continue
        for f in group:
            needed = _rebuilt_from(store, f, storage)
            if needed:
                keep[f.run.run_id] = frozenset(needed)
    return Verdict(delete=frozenset(delete), exempt=frozenset(exempt), keep=keep)


def _status(store: Store, group: list[ForeignRun], storage: StorageConfig | None) -> str:
    """The thread's status: its root line's latest checkpoint's (any line's, lacking a root)."""
    lines = [f for f in group if f.run.head_checkpoint_id is not None]
    roots = [f for f in lines if (line := line_of(f.run)) is not None and line.root]
    statuses = []
    for f in roots or lines:
        head = load(store, f.run, store.latest_checkpoint(f.run.run_id), storage)
        assert head.reading is not None
        statuses.append(head.reading.status)
    waiting = [s for s in statuses if s in WAITING]
    return waiting[0] if waiting else (statuses[0] if statuses else "done")


def _rebuilt_from(store: Store, f: ForeignRun, storage: StorageConfig | None) -> set[str]:
    """Doomed checkpoints of the line that kept ones rebuild a DeltaChannel from.

    A walk starts at each kept checkpoint whose parent is doomed: one whose parent is
    kept needs nothing its parent's walk does not find."""
    by_id = {h.checkpoint_id: h for h in f.headers}
    needed: set[str] = set()
    for header in f.headers:
        cid = header.checkpoint_id
        if cid in f.doomed or header.parent_id not in f.doomed:
            continue
        reading = load(store, f.run, store.get_checkpoint(cid), storage, {}).reading
        assert reading is not None
        wanted = set(reading.delta_channels)
        parent: str | None = header.parent_id
        # Up to a kept ancestor at most: its own walk (if its parent is doomed) goes on.
        while wanted and parent is not None and parent in f.doomed and parent not in needed:
            needed.add(parent)
            above = load(store, f.run, store.get_checkpoint(parent), storage, {}).reading
            assert above is not None
            wanted -= set(above.channels)
            parent = by_id[parent].parent_id
    return needed
