"""What a LangGraph thread waits for, and the status savegame shows for each of its runs.

One answer, computed here and nowhere else, for every place savegame shows runs
(``savegame runs`` and its ``--json`` and ``--status``, the UI's runs page and run
page, the approvals inbox and ``savegame approvals``). A LangGraph run is stored
``completed`` so no worker claims it (the package docstring); what it is, is read
from the latest checkpoint of each of the thread's namespaces:

* **waiting** (``interrupted``): a task still to run holds an ``interrupt()`` nobody
  answered. A subgraph's interrupt shows in its own namespace and, with the same id,
  in the parent's task that runs the subgraph; it is one question, asked by the task
  of the deepest namespace that holds it (the one a resume reaches);
* **answered** (``queued``): every such interrupt has an answer recorded through
  savegame (:mod:`._answer`); the graph takes it when the application runs it again
  (``graph.invoke(None, config)``), as a savegame run decided from elsewhere is queued;
* ``running`` (tasks left and no outcome recorded: a step under way, a static
  breakpoint, a process that died), ``failed`` (a task raised), ``completed``.

An answer is a ``__resume__`` pending write of the asking task holding the answers
its ``interrupt()`` calls return in order (what LangGraph stores for a task once it
consumed a resume, also one given by interrupt id), marked with the interrupt it
answers and who gave it when: the interrupt is answered when its task's resume write
carries that mark. A resume written for every task (``NULL_TASK_ID``) is not taken as
an answer: LangGraph leaves one in the checkpoint after its task consumed it, and
would hand it to that task's next interrupt too.

Without LangGraph installed nothing decodes: a run shows its stored status.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from savegame.codec import decode_value, open_entry, placeholders
from savegame.codec.storage import StorageConfig
from savegame.effects.decisions import AUTHENTICATED_AS
from savegame.errors import NotFoundError
from savegame.integrations.langgraph._lines import NS_KEY, Lines
from savegame.integrations.langgraph._reading import LangGraphCheckpoint, ThreadLine, load
from savegame.integrations.langgraph._view import RESUME, PendingWrite
from savegame.model import EffectRecord, RunInfo, RunStatus
from savegame.stores import Store

#: The fixed index of a task's ``__resume__`` write (LangGraph's ``WRITES_IDX_MAP``): a
#: reserved channel, so a task has one, overwritten with each answer.
RESUME_INDEX = -4
#: The metadata of a resume write savegame recorded: the interrupt it answers.
ANSWERS = "answers"
#: LangGraph's status word of a checkpoint (``Reading.status``) as a run's status.
STATUS = {
    "done": RunStatus.COMPLETED,
    "interrupted": RunStatus.INTERRUPTED,
    "error": RunStatus.FAILED,
    "pending": RunStatus.RUNNING,
}


@dataclass(frozen=True, slots=True)
class Answered:
    """An answer recorded through savegame."""

    value: Any
    by: str | None
    at: str | None
    """When, ISO 8601 (UTC)."""
    authenticated_as: str | None = None
    """The identity a front end checked (the web UI's ``ui-token:NAME``); None on an
    answer recorded without one (or before savegame recorded it)."""


@dataclass(frozen=True, slots=True)
class Ask:
    """An ``interrupt()`` a LangGraph thread waits on."""

    interrupt_id: str
    """LangGraph's id (``Interrupt.id``, what ``Command(resume={id: value})`` takes)."""
    value: Any
    """What the node asked (``interrupt(value)``)."""
    line: ThreadLine
    """The namespace whose task asked."""
    head: LangGraphCheckpoint
    """That namespace's latest checkpoint, which the task runs from."""
    task_id: str
    task_path: str
    node: str
    answered: Answered | None
    resume: EffectRecord | None
    """The task's ``__resume__`` write as stored (an answer replaces it, if unchanged)."""

    @property
    def nodes(self) -> tuple[str, ...]:
        """The subgraph nodes it nests in, then the node that asked."""
        return (*self.line.subgraph, self.node)


@dataclass(frozen=True, slots=True)
class ThreadWaits:
    """A LangGraph thread's namespaces at their latest checkpoints, and what they ask."""

    thread_id: str
    runs: tuple[RunInfo, ...]
    """The run of each namespace, the root's first."""
    heads: Mapping[str, LangGraphCheckpoint]
    """The latest checkpoint of each namespace, by run id."""
    asks: tuple[Ask, ...]

    @property
    def root(self) -> RunInfo | None:
        return next((r for r in self.runs if not r.metadata.get(NS_KEY)), None)

    @property
    def pending(self) -> tuple[Ask, ...]:
        """The interrupts nobody answered yet."""
        return tuple(a for a in self.asks if a.answered is None)

    def ask(self, interrupt_id: str) -> Ask | None:
        """The interrupt of that id the thread waits on (answered or not), or None."""
        return next((a for a in self.asks if a.interrupt_id == interrupt_id), None)

    def status(self, run: RunInfo) -> RunStatus:
        """The status savegame shows for ``run`` (one of the thread's)."""
        return shown_status(run, self.heads.get(run.run_id), self.asks)


def shown_status(
    run: RunInfo, head: LangGraphCheckpoint | None, asks: Iterable[Ask] = ()
) -> RunStatus:
    """``run``'s status as savegame shows it: a LangGraph run's is its latest checkpoint's
    (``head``), waiting while one of its interrupts (``asks``, its thread's) is unanswered."""
    if head is None or head.reading is None:
        return run.status
    word = head.reading.status
    if word != "interrupted":
        return STATUS[word]
    ids = {i for w in head.reading.asking for i, _ in interrupts(w)}
    mine = [a for a in asks if a.interrupt_id in ids]
    answered = bool(mine) and all(a.answered is not None for a in mine)
    return RunStatus.QUEUED if answered else RunStatus.INTERRUPTED


def interrupts(write: PendingWrite) -> list[tuple[str, Any]]:
    """(id, value) of each ``Interrupt`` an ``__interrupt__`` write holds."""
    found = write.value if isinstance(write.value, list | tuple) else [write.value]
    return [(str(getattr(i, "id", "")), getattr(i, "value", i)) for i in found]


def thread_waits(
    s: Store,
    thread_id: str,
    storage: StorageConfig | None,
    known: Mapping[str, LangGraphCheckpoint] | None = None,
) -> ThreadWaits:
    """The thread's namespaces and what they ask; ``known``: heads already read, by run id."""
    runs = namespace_runs(s, thread_id, storage)
    heads = {
        r.run_id: (known or {}).get(r.run_id) or load(s, r, s.latest_checkpoint(r.run_id), storage)
        for r in runs
    }
    return ThreadWaits(thread_id, runs, heads, tuple(_asks(s, heads.values(), storage)))


def namespace_runs(s: Store, thread_id: str, storage: StorageConfig | None) -> tuple[RunInfo, ...]:
    """The run each namespace of a LangGraph thread is read from, the root's first."""
    newest: dict[str, RunInfo] = {}
    for run in Lines(s, storage).runs(thread_id):
        newest.setdefault(str(run.metadata.get(NS_KEY, "")), run)
    return tuple(newest[ns] for ns in sorted(newest, key=len))


def _asks(
    s: Store, heads: Iterable[LangGraphCheckpoint], storage: StorageConfig | None
) -> list[Ask]:
    asked: dict[str, tuple[LangGraphCheckpoint, PendingWrite, Any]] = {}
    for head in heads:
        if head.reading is None:
            continue
        for write in head.reading.asking:
            for ident, value in interrupts(write):
                seen = asked.get(ident)
                # The deepest namespace holding it is where the interrupt() was called.
                if seen is None or len(head.line.subgraph) > len(seen[0].line.subgraph):
                    asked[ident] = (head, write, value)
    found = []
    for ident, (head, write, value) in asked.items():
        resume = _resume_of(s, head, write.task_id)
        found.append(
            Ask(
                interrupt_id=ident,
                value=value,
                line=head.line,
                head=head,
                task_id=write.task_id,
                task_path=write.task_path,
                node=write.node or "?",
                answered=_answer_in(resume, ident, storage),
                resume=resume,
            )
        )
    found.sort(key=lambda a: (a.head.header.created_at, a.interrupt_id))
    return found


def _resume_of(s: Store, head: LangGraphCheckpoint, task_id: str) -> EffectRecord | None:
    try:
        return s.get_effect(head.line.run_id, f"{head.lg_id}|{task_id}|{RESUME_INDEX}")
    except NotFoundError:
        return None


def _answer_in(
    resume: EffectRecord | None, ident: str, storage: StorageConfig | None
) -> Answered | None:
    if resume is None or resume.name != RESUME or resume.metadata.get(ANSWERS) != ident:
        return None
    with placeholders():
        answers = decode_value(open_entry(resume, storage).result)
    value = answers[-1] if isinstance(answers, list) and answers else answers
    by, at = resume.metadata.get("by"), resume.metadata.get("at")
    checked = resume.metadata.get(AUTHENTICATED_AS)
    return Answered(
        value, str(by) if by else None, str(at) if at else None, str(checked) if checked else None
    )
