"""Answer an ``interrupt()`` a LangGraph thread waits on, without the graph's code.

What ``savegame answer``, the UI's answer form and a person's own service call. The
answer is stored the way LangGraph stores it for a task that consumed a resume: the
asking task's ``__resume__`` pending write, the list of values its ``interrupt()``
calls return in order, this one appended (``Command(resume={id: value})`` hands a
value to one interrupt by id the same way, through the task's resume list). The
application continues the graph with ``graph.invoke(None, config)`` (or ``stream``)
whenever it likes, in any process with the graph: the task runs again and its
``interrupt()`` returns the value.

The write carries who answered and when (``by``, ``at``) and the interrupt's id, as
savegame's own decisions keep theirs (:mod:`savegame.effects.decisions`), and is made
once: a task's first answer is inserted if absent, a later one replaces the resume
write only if it is still the one read, so of two people answering at once one
wins and the other is told. The line's lease is taken for the write; a live saver
takes it back at its next write (:class:`~._lines.Lines`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from savegame.codec import decode_value, open_entry, placeholders, seal_entry
from savegame.codec.storage import StorageConfig
from savegame.effects.decisions import AUTHENTICATED_AS, who
from savegame.errors import (
    ConfigurationError,
    EffectSettledError,
    NotFoundError,
    RunStateError,
)
from savegame.integrations.langgraph._lines import WORKFLOW, Lines, Write, write_record
from savegame.integrations.langgraph._reading import line_of, opened
from savegame.integrations.langgraph._view import RESUME
from savegame.integrations.langgraph._waits import (
    ANSWERS,
    RESUME_INDEX,
    Ask,
    ThreadWaits,
    thread_waits,
)
from savegame.model import EffectStatus, utcnow
from savegame.stores import Store


@dataclass(frozen=True, slots=True)
class Answer:
    """An answer recorded: to which interrupt, by whom, and how the graph takes it."""

    thread_id: str
    run_id: str
    """The run of the namespace whose task asked."""
    interrupt_id: str
    node: str
    value: Any
    by: str
    at: str
    """When, ISO 8601 (UTC)."""
    authenticated_as: str | None = None
    """The identity a front end checked (the web UI's ``ui-token:NAME``), if any."""

    @property
    def config(self) -> dict[str, Any]:
        """What ``graph.invoke(None, config)`` takes to continue the thread."""
        return {"configurable": {"thread_id": self.thread_id}}


def find_thread(s: Store, ident: str, storage: StorageConfig | None) -> ThreadWaits | None:
    """The LangGraph thread ``ident`` names (one of its runs, or the thread id), or None."""
    try:
        run = s.get_run(ident)
    except NotFoundError:
        run = None
    if run is not None:
        line = line_of(run)
        return None if line is None else thread_waits(s, line.thread_id, storage)
    if not any(r.workflow == WORKFLOW for r in s.list_runs(thread_id=ident, limit=1_000_000)):
        return None
    return thread_waits(s, ident, storage)


def thread_of(
    ident: str, *, store: Store | str | None = None, storage: StorageConfig | None = None
) -> ThreadWaits | None:
    """What LangGraph thread ``ident`` (a thread id, or one of its runs) waits on, or None
    when ``ident`` names no LangGraph thread."""
    with opened(store) as s:
        return find_thread(s, ident, storage)


def answer(
    ident: str,
    value: Any,
    *,
    interrupt_id: str | None = None,
    by: str | None = None,
    authenticated_as: str | None = None,
    store: Store | str | None = None,
    storage: StorageConfig | None = None,
) -> Answer:
    """Answer the ``interrupt()`` LangGraph thread ``ident`` waits on (a thread id, or one
    of its runs); ``interrupt_id`` names one when it waits on several.

    ``by`` (default: user@host) is recorded with the answer, and ``authenticated_as``
    beside it: the identity a front end checked (the web UI's ``ui-token:NAME``).

    Raises:
        NotFoundError: no LangGraph thread or run ``ident``, or it does not wait on
            ``interrupt_id`` (the graph went on, or the id is wrong).
        RunStateError: it waits on nothing, or the interrupt was answered already.
        ConfigurationError: it waits on several interrupts and none was named.
        EffectSettledError: someone answered it (or the graph ran on) meanwhile.
        SerializationError: ``value`` is not pure data.
    """
    with opened(store) as s:
        waits = find_thread(s, ident, storage)
        if waits is None:
            raise NotFoundError("LangGraph thread or run", ident)
        ask = pick(waits, interrupt_id)
        said, at = who(by, authenticated_as), utcnow().isoformat()
        _write(s, ask, value, {ANSWERS: ask.interrupt_id, **said, "at": at}, storage)
        return Answer(
            waits.thread_id, ask.line.run_id, ask.interrupt_id, ask.node, value, said["by"], at,
            said.get(AUTHENTICATED_AS),
        )  # fmt: skip


def pick(waits: ThreadWaits, interrupt_id: str | None) -> Ask:
    """The interrupt to answer: the one named, or the only one waiting."""
    face = waits.root.run_id if waits.root is not None else waits.thread_id
    if interrupt_id is not None:
        ask = waits.ask(interrupt_id)
        if ask is None:
            raise NotFoundError(
                "pending interrupt", f"{interrupt_id} in LangGraph thread {waits.thread_id}"
            )
        if ask.answered is not None:
            raise RunStateError(face, _answered(ask), f"answer interrupt {interrupt_id} of")
        return ask
    pending = waits.pending
    if len(pending) > 1:
        ids = ", ".join(a.interrupt_id for a in pending)
        raise ConfigurationError(
            f"LangGraph thread {waits.thread_id!r} waits on {len(pending)} interrupts ({ids}): "
            "name one (--interrupt ID)"
        )
    if pending:
        return pending[0]
    if waits.asks:
        raise RunStateError(face, _answered(waits.asks[0]), "answer")
    raise RunStateError(face, "not waiting on an interrupt()", "answer")


def _answered(ask: Ask) -> str:
    assert ask.answered is not None
    return (
        f"answered already (by {ask.answered.by} at {ask.answered.at}); the graph takes "
        "that answer when it runs again: graph.invoke(None, config)"
    )


def _write(
    s: Store, ask: Ask, value: Any, mark: dict[str, str], storage: StorageConfig | None
) -> None:
    before: list[Any] = []
    if ask.resume is not None:
        with placeholders():
            found = decode_value(open_entry(ask.resume, storage).result)
        before = list(found) if isinstance(found, list | tuple) else [found]
    write = Write(ask.task_id, RESUME, [*before, value], ask.task_path, RESUME_INDEX)
    plain = write_record(ask.line.run_id, ask.head.lg_id, write, storage)
    lines = Lines(s, storage)
    line = lines.find(ask.line.thread_id, ask.line.ns)
    if line is None:
        raise NotFoundError(f"namespace {ask.line.ns!r} of LangGraph thread", ask.line.thread_id)
    token = lines.token(line)
    if ask.resume is None:
        sealed = seal_entry(replace(plain, metadata={**plain.metadata, **mark}), storage)
        stored = s.record_intent(sealed, lease_token=token)
        if stored.checksum != sealed.checksum:
            raise _raced(ask)
        return
    # The stored entry keeps its sealed arguments; only the result and the mark change.
    metadata = {**ask.resume.metadata, **plain.metadata, **mark}
    done = seal_entry(replace(ask.resume, result=plain.result, metadata=metadata), storage)
    try:
        s.record_result(
            ask.line.run_id, ask.resume.request_id, status=EffectStatus.DONE,
            result=done.result, metadata=metadata, checksum=done.checksum,
            lease_token=token, expect_checksum=ask.resume.checksum,
        )  # fmt: skip
    except EffectSettledError:
        raise _raced(ask) from None


def _raced(ask: Ask) -> EffectSettledError:
    return EffectSettledError(
        ask.line.run_id,
        f"{ask.head.lg_id}|{ask.task_id}|{RESUME_INDEX}",
        "written",
        "unchanged",
        why=f"(the answer to interrupt {ask.interrupt_id}) was written by someone else first "
        "(another answer, or the graph ran on)",
    )
