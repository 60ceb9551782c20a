"""Runs, what waits for a person, and journals as savegame shows them to people, with
LangGraph threads among them: what ``savegame runs``, ``approvals`` and ``effects``
print and the UI's runs page, inbox and run pages list. One implementation for both,
importable without LangGraph.

* **Runs**: a LangGraph run's status is the one :mod:`._waits` computes; ``status=``
  filters on it, and pages follow each other by keyset as ``savegame.client.list_runs``'s do
  (a status filter reads savegame's runs by their stored status and LangGraph's by
  theirs, merged in the list's order). Bookkeeping runs (a migration's marker per
  thread) are left out; read by id they are there.
* **Waiting**: savegame's pending approvals and interrupts, and each LangGraph
  thread's unanswered ``interrupt()``s, shown on the thread's root run. A LangGraph
  thread is read only when the latest checkpoint of one of its namespaces has an
  ``__interrupt__`` write (its journal's request ids name it: one small read per run).
* **Journals**: a LangGraph run keeps its pending writes and its rebuild marker in its
  journal beside the calls of its durable tools; the internal entries are left out
  unless asked for. A thread id names the journals of all its namespaces.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from savegame.codec import placeholders
from savegame.codec.storage import StorageConfig
from savegame.control import Effect, list_effects, pending_interrupts
from savegame.effects import PendingInterrupt
from savegame.errors import NotFoundError
from savegame.inspect import get_run, list_runs
from savegame.integrations.langgraph._answer import find_thread
from savegame.integrations.langgraph._claims import WORKFLOW as MIGRATION
from savegame.integrations.langgraph._lines import WORKFLOW, lg_id_of
from savegame.integrations.langgraph._reading import LangGraphCheckpoint, line_of, load, opened
from savegame.integrations.langgraph._view import INTERRUPT
from savegame.integrations.langgraph._waits import (
    ThreadWaits,
    namespace_runs,
    shown_status,
    thread_waits,
)
from savegame.model import BOOKKEEPING_KEY, EffectKind, RunInfo, RunStatus
from savegame.stores import Store

#: Runs read from the store at a time while a list is filled.
PAGE = 100
#: What a LangGraph run's journal holds besides its durable tools' calls (the entries'
#: ``metadata["langgraph"]``): pending writes, the marker of a rebuilt line.
INTERNAL = frozenset({"write", "finished"})


def bookkeeping(run: RunInfo) -> bool:
    """A run savegame keeps for itself: marked so (:data:`~savegame.model.BOOKKEEPING_KEY`);
    a migration marker written before the mark existed is known by its workflow."""
    return BOOKKEEPING_KEY in run.metadata or run.workflow == MIGRATION


@dataclass(frozen=True, slots=True)
class ShownRun:
    """A run as savegame lists it."""

    info: RunInfo
    """The run, its ``status`` the one shown (a LangGraph run's: :mod:`._waits`)."""
    stored: RunStatus
    """The status the store keeps (``completed`` for every LangGraph run)."""
    head: LangGraphCheckpoint | None
    """A LangGraph run's latest checkpoint, read; None for other runs."""


class _Reader:
    """One listing's reads: each LangGraph thread is read once, however many of its runs."""

    def __init__(self, s: Store, storage: StorageConfig | None) -> None:
        self.s, self.storage = s, storage
        self.threads: dict[str, ThreadWaits] = {}

    def shown(self, info: RunInfo) -> ShownRun:
        if line_of(info) is None or info.head_checkpoint_id is None:
            return ShownRun(info, info.status, head=None)
        waits = self.threads.get(info.thread_id)
        head = waits.heads.get(info.run_id) if waits is not None else None
        if head is None:
            head = load(self.s, info, self.s.latest_checkpoint(info.run_id), self.storage)
        status = shown_status(info, head)
        if status is RunStatus.INTERRUPTED:  # answered or not: its thread's resume writes say
            if waits is None:
                waits = thread_waits(self.s, info.thread_id, self.storage, {info.run_id: head})
                self.threads[info.thread_id] = waits
            status = shown_status(info, head, waits.asks)
        return ShownRun(info.with_status(status), info.status, head=head)


def shown_runs(
    *,
    thread_id: str | None = None,
    status: RunStatus | str | None = None,
    limit: int = 100,
    workflow: str | None = None,
    search: str | None = None,
    before: str | None = None,
    store: Store | str | None = None,
    storage: StorageConfig | None = None,
) -> list[ShownRun]:
    """Runs, newest first, as savegame lists them for people (the module docstring);
    the arguments as :func:`savegame.client.list_runs` takes them.

    Raises:
        NotFoundError: ``before`` names no run.
    """
    wanted = None if status is None else RunStatus(status)
    with opened(store) as s:
        reader = _Reader(s, storage)
        common: dict[str, Any] = {"thread_id": thread_id, "search": search, "before": before}

        def stream(**filters: Any) -> Iterator[ShownRun]:
            page = dict(common, **filters)
            while True:
                found = list_runs(limit=PAGE, store=s, storage=storage, **page)
                for info in found:
                    if bookkeeping(info):
                        continue
                    if wanted is not None and filters.get("status") and line_of(info):
                        continue  # its stored status says nothing: the other stream has it
                    shown = reader.shown(info)
                    if wanted is None or shown.info.status is wanted:
                        yield shown
                if len(found) < PAGE:
                    return
                page["before"] = found[-1].run_id

        if wanted is None:
            merged: Iterator[ShownRun] = stream(workflow=workflow)
        else:
            streams = [stream(workflow=workflow, status=wanted)]
            if workflow in (None, WORKFLOW):
                streams.append(stream(workflow=WORKFLOW))
            merged = heapq.merge(
                *streams, key=lambda r: (r.info.created_at, r.info.run_id), reverse=True
            )
        return list(itertools.islice(merged, limit))


def shown_run(
    run_id: str, *, store: Store | str | None = None, storage: StorageConfig | None = None
) -> ShownRun:
    """One run as the lists show it (:func:`shown_runs`), by id (a bookkeeping run too).

    Raises:
        NotFoundError: no run ``run_id``.
    """
    with opened(store) as s:
        return _Reader(s, storage).shown(get_run(run_id, store=s, storage=storage))


def waiting(
    ident: str | None = None,
    *,
    store: Store | str | None = None,
    storage: StorageConfig | None = None,
) -> list[PendingInterrupt]:
    """What waits for a person, oldest first: of every run, or of one run (a LangGraph
    thread id, or one of its runs: the thread's)."""
    with opened(store) as s:
        if ident is not None:
            waits = find_thread(s, ident, storage)
            if waits is not None:
                return pending_of(waits)
            return pending_interrupts(ident, store=s, storage=storage)
        found = pending_interrupts(store=s, storage=storage)
        for thread_id in _asking_threads(s):
            found.extend(pending_of(thread_waits(s, thread_id, storage)))
        return sorted(found, key=lambda p: p.created_at)


def _asking_threads(s: Store) -> list[str]:
    """The LangGraph threads a namespace of which has an interrupt in its latest checkpoint."""
    threads: dict[str, None] = {}
    for run in list_runs(workflow=WORKFLOW, limit=1_000_000, store=s):
        if run.head_checkpoint_id is None or run.thread_id in threads:
            continue
        prefix = f"{lg_id_of(run.head_checkpoint_id)}|"
        entries = s.list_effects(run.run_id, kinds=[EffectKind.READ], request_prefix=prefix)
        if any(e.name == INTERRUPT for e in entries):
            threads[run.thread_id] = None
    return list(threads)


def pending_of(waits: ThreadWaits) -> list[PendingInterrupt]:
    """The thread's unanswered interrupts as the inbox lists them: on its root run."""
    face = waits.root
    return [
        PendingInterrupt(
            run_id=face.run_id if face is not None else ask.line.run_id,
            interrupt_id=ask.interrupt_id,
            kind=EffectKind.INTERRUPT,
            name=ask.node,
            payload=ask.value,
            step=ask.head.step if ask.head.step is not None else 0,
            node=" > ".join(ask.nodes),
            created_at=ask.head.header.created_at,
        )
        for ask in waits.pending
    ]


@dataclass(frozen=True, slots=True)
class LangGraphEffects:
    """The journals of a LangGraph run, or of every namespace of a thread."""

    thread_id: str
    runs: tuple[RunInfo, ...]
    """The runs read, the root namespace's first."""
    effects: list[Effect]
    """Their entries, each run's oldest first."""
    hidden: int
    """Internal entries left out (pending writes, markers)."""


def internal(effect: Effect) -> bool:
    """A LangGraph run's own entry: a pending write, a rebuild's marker."""
    return effect.metadata.get("langgraph") in INTERNAL


def line_effects(
    ident: str,
    *,
    everything: bool = False,
    store: Store | str | None = None,
    storage: StorageConfig | None = None,
) -> LangGraphEffects | None:
    """The journal of LangGraph run ``ident``, or of every namespace of LangGraph thread
    ``ident``, without the internal entries unless ``everything``; None when ``ident``
    is neither (a savegame run: :func:`savegame.client.list_effects`)."""
    with opened(store) as s:
        try:
            run: RunInfo | None = s.get_run(ident)
        except NotFoundError:
            run = None
        if run is not None:
            if line_of(run) is None:
                return None
            runs: tuple[RunInfo, ...] = (run,)
        else:
            runs = namespace_runs(s, ident, storage)
            if not runs:
                return None
        with placeholders():
            effects = [e for r in runs for e in list_effects(r.run_id, store=s, storage=storage)]
        shown = effects if everything else [e for e in effects if not internal(e)]
        return LangGraphEffects(runs[0].thread_id, runs, shown, len(effects) - len(shown))
