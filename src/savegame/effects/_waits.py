"""What a step waits for without holding a process: events (``ctx.wait_for``) and timers
(``ctx.sleep``); and the events themselves (``savegame send``, a child run's end).

An event is a journal entry of the run it is sent to (kind event), written by whoever
sends it, outside any lease: pending until a wait takes it, then done, naming the wait
that took it (``taken_by``). Its request id is ``event:<len>:<topic>:<key>``, so a second
send with the same key is the same entry, which the store's insert-if-absent drops.

A child run (``ctx.start_child``) is an entry at its position naming the child's id,
journaled before the child is created; the child's end reaches the parent as an event on
``$child:<id>`` (keyed ``end``), delivered with the child's last checkpoint, so waiting for
children is waiting for events.

A wait is an entry at its call position (kind wait) holding its topic and its due time,
both recorded the first time: done with the event it took (its value and request id), or
failed once its due time passed first. Until one of these happened, the step raises
Suspend: the runner checkpoints the run waiting, the store wakes it when an event for the
topic is there or the time has come, and the step runs again from its start, its calls
replayed, this wait answered. A sleep is the same without events: its end, computed once.

Taking an event is two writes, both fenced by the run's lease: the event settled as
taken by the wait, then the wait settled with the event's value. A crash between leaves
the event naming its taker, and the next execution finishes that wait from it: an event
is taken once, by one wait, and a replay gets the same answer.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from savegame.codec import decode_value, encode_value, register, seal_entry
from savegame.codec.storage import StorageConfig
from savegame.effects._calls import Calls
from savegame.errors import ConfigurationError, NonDeterminismError, WaitTimedOutError
from savegame.ids import new_id
from savegame.model import EffectKind, EffectRecord, EffectStatus, Waiting, utcnow
from savegame.signals import Cancel, Suspend

EVENT_NODE = "(event)"
"""The node an event entry names: it belongs to no step of the run it is sent to."""
MAX_TOPIC = 200
"""The longest topic (it is part of a request id, a log line, a table cell)."""
TIMED_OUT = "timed out"


PARENT_KEY = "parent"
"""A child run's row metadata: ``{"run": the parent run, "call": the request id that
started it}`` (under the run row's check, like a fork's origin)."""
CHILD_TOPIC = "$child:"
"""The topic of a child run's end, in its parent's journal: ``$child:<child run id>``."""
END_KEY = "end"
"""The key of a child's end event: a run ends once for its parent (a failed child that is
resumed and completes later does not tell it again)."""


# Here, not in the runtime that starts children: a planner's state holds these, and the
# readers (savegame.inspect: get_checkpoint, diff) import effects, never the runtime.
@register(name="savegame.ChildRun")
@dataclass(frozen=True, slots=True)
class ChildRun:
    """A child run a step started (``ctx.start_child``); pure data, so a state may keep it."""

    run_id: str
    workflow: str
    """Its workflow's name."""


def child_topic(child_run_id: str) -> str:
    return CHILD_TOPIC + child_run_id


def parent_of(metadata: Mapping[str, Any]) -> str | None:
    """The parent run a child run's metadata names, or None for a run that is no child."""
    data = metadata.get(PARENT_KEY)
    run = data.get("run") if isinstance(data, Mapping) else None
    return run if isinstance(run, str) else None


def end_event(
    parent_run_id: str,
    child_run_id: str,
    status: str,
    *,
    state: Any = None,
    error: str | None = None,
    storage: StorageConfig | None,
) -> EffectRecord:
    """The event that tells a parent how its child ended: its status, and its final state
    (completed) or its error."""
    value = {"status": status, "state": state, "error": error}
    return event_entry(
        parent_run_id, child_topic(child_run_id), value, key=END_KEY,
        by=f"run {child_run_id}", storage=storage, internal=True,
    )  # fmt: skip


def check_topic(topic: Any, *, internal: bool = False) -> str:
    """``topic`` if it can name events: a non-empty string without control characters.

    Raises:
        ConfigurationError: naming what is wrong; a topic starting with ``$`` is
            savegame's own (a child run's end) unless ``internal``.
    """
    if not isinstance(topic, str) or not topic:
        raise ConfigurationError(f"an event topic must be a non-empty string, not {topic!r}")
    if len(topic) > MAX_TOPIC and not internal:
        raise ConfigurationError(f"event topic {topic[:40]!r}... is longer than {MAX_TOPIC}")
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Cs") for ch in topic):
        raise ConfigurationError(f"event topic {topic!r} holds a control or invisible character")
    if topic.startswith("$") and not internal:
        raise ConfigurationError(
            f"event topic {topic!r}: topics starting with '$' are savegame's own (child runs)"
        )
    return topic


def event_request_id(topic: str, key: str) -> str:
    """An event's request id; the topic's length keeps ``("a:b", "c")`` and ``("a", "b:c")`` apart."""
    return f"event:{len(topic)}:{topic}:{key}"


def event_entry(
    run_id: str,
    topic: str,
    value: Any,
    *,
    key: str | None,
    by: str,
    storage: StorageConfig | None,
    internal: bool = False,
) -> EffectRecord:
    """The sealed, pending event entry that sends ``value`` to ``run_id`` on ``topic``.

    ``key``: the idempotency key (a second send with it is dropped); None: a new one.

    Raises:
        ConfigurationError: a bad topic or key.
        SerializationError: ``value`` is not pure data.
    """
    check_topic(topic, internal=internal)
    if key is not None and (not isinstance(key, str) or not key or len(key) > MAX_TOPIC):
        raise ConfigurationError(f"an event key must be a non-empty string, not {key!r}")
    meta: dict[str, Any] = {"by": by}
    if key is not None:
        meta["key"] = key
    entry = EffectRecord(
        run_id=run_id,
        request_id=event_request_id(topic, key or new_id()),
        kind=EffectKind.EVENT,
        name=topic,
        step=0,
        node=EVENT_NODE,
        call_index=0,
        status=EffectStatus.PENDING,
        arguments=encode_value(value, f"event {topic!r}"),
        metadata=meta,
    )
    return seal_entry(entry, storage)


def as_delta(value: Any, what: str) -> timedelta:
    """A timedelta, or a number of seconds, as a timedelta.

    Raises:
        ConfigurationError: anything else.
    """
    if isinstance(value, timedelta):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return timedelta(seconds=value)
    raise ConfigurationError(f"{what} must be a timedelta or seconds, not {value!r}")


def _iso(when: datetime | None) -> str | None:
    return None if when is None else when.isoformat()


def _when(text: Any) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


class Waits:
    """The waits of one step execution, at the positions its :class:`Calls` numbers."""

    def __init__(self, calls: Calls, now: Callable[[], datetime] = utcnow) -> None:
        self.calls = calls
        self.now = now

    def _position(
        self,
        kind: EffectKind,
        name: str,
        asked: Mapping[str, Any] | None = None,
        same: Callable[[EffectRecord], bool] | None = None,
    ) -> tuple[int, str, EffectRecord | None]:
        """The next call position of the step: its index, request id and journal entry (a
        strict replay's: the recording's, copied, for a wait of this kind and name, and
        that ``same`` accepts: a child run of the same input, ``asked``)."""
        calls = self.calls
        if calls._cancelled():
            raise Cancel()
        index, request_id = calls._next_id()
        entry = calls.journal.get(request_id)
        if entry is None and calls.replay is not None and calls.replay.strict:
            at = (calls.position(request_id), calls.node)
            entry = calls.replay.reuse_wait(
                calls.journal, at, request_id, kind, name, asked=asked, same=same
            )
        return index, request_id, entry

    # -- events -------------------------------------------------------------------------
    def events(self, topics: Sequence[str], timeout: timedelta | None) -> list[Any]:
        """The value of one event on each of ``topics`` (each wait at its own position),
        once every one has come; WaitTimedOutError when ``timeout`` passes first.

        Raises:
            Suspend: some have not come yet; the run waits for the rest.
            WaitTimedOutError: the due time passed first (journaled: raised again on replay).
            NonDeterminismError: the journal holds another call at one of the positions.
        """
        until = None if timeout is None else self.now() + timeout
        waits = [self._wait_entry(topic, until) for topic in topics]
        if any(w.status is EffectStatus.PENDING for w in waits):
            waits = self._take(waits)
        open_ = [w for w in waits if w.status is EffectStatus.PENDING]
        if open_:
            due = _when(decode_value(open_[0].arguments).get("until"))
            if due is None or self.now() < due:
                names = tuple(w.name for w in open_)
                shown = repr(names[0]) if len(names) == 1 else f"{len(names)} events"
                raise Suspend(
                    Waiting(until=due, topics=names, need=len(names)),
                    f"event {shown}" + ("" if due is None else f" until {due.isoformat()}"),
                )
            journal = self.calls.journal
            waits = [
                journal.settle(w, EffectStatus.FAILED, error=TIMED_OUT)
                if w.status is EffectStatus.PENDING
                else w
                for w in waits
            ]
        return [self._answer(w) for w in waits]

    def _wait_entry(self, topic: str, until: datetime | None) -> EffectRecord:
        calls = self.calls
        index, request_id, existing = self._position(EffectKind.WAIT, topic)
        if existing is None:
            arguments = encode_value({"topic": topic, "until": _iso(until)}, "wait")
            entry = calls._entry(request_id, index, EffectKind.WAIT, topic, arguments, {})
            return calls.journal.intent(entry)
        # The due time recorded the first time stands (the step computes a new one each
        # execution); the topic must be the same.
        if existing.kind is not EffectKind.WAIT or existing.name != topic:
            raise NonDeterminismError(
                calls.run_id,
                request_id,
                f"{existing.kind.value} {existing.name!r}",
                f"wait for {topic!r}",
            )
        return existing

    def _take(self, waits: list[EffectRecord]) -> list[EffectRecord]:
        """Settle each open wait with the event it took before (a crash between the two
        writes), or with the oldest event of its topic nobody took; the waits afterwards."""
        journal = self.calls.journal
        events = journal.fetch([EffectKind.EVENT])
        taken = {e.metadata.get("taken_by"): e for e in events if e.status is EffectStatus.DONE}
        free = [e for e in events if e.status is EffectStatus.PENDING]
        out = []
        for wait in waits:
            if wait.status is not EffectStatus.PENDING:
                out.append(wait)
                continue
            event = taken.get(wait.request_id)
            if event is None:
                event = next((e for e in free if e.name == wait.name), None)
                if event is None:
                    out.append(wait)
                    continue
                free.remove(event)
                event = journal.settle(
                    event, EffectStatus.DONE, metadata={"taken_by": wait.request_id}
                )
            answer = {"value": decode_value(event.arguments), "event": event.request_id}
            out.append(journal.settle(wait, EffectStatus.DONE, result=encode_value(answer, "wait")))
        return out

    def _answer(self, wait: EffectRecord) -> Any:
        if wait.status is EffectStatus.DONE:
            return decode_value(wait.result)["value"]
        until = decode_value(wait.arguments).get("until") or "?"
        raise WaitTimedOutError(self.calls.run_id, self.calls.node, wait.name, until)

    # -- child runs ---------------------------------------------------------------------
    def child(
        self,
        workflow: str,
        run_id: str | None,
        input_digest: str,
        create: Callable[[str, str], None],
    ) -> str:
        """The id of the child run this position starts, created once across crashes.

        The intent (the child's id: ``run_id``, else this call's request id, so it is
        derived from the position) is journaled before ``create(child_id, request_id)``
        makes the run, which must find it made when a crash came between; the entry is
        settled done after. A step that starts another workflow, another input or
        another id at this position is refused.

        Raises:
            NonDeterminismError: the journal holds another call at this position.
        """
        calls = self.calls

        def same(entry: EffectRecord) -> bool:  # a strict replay's: the child recorded here
            recorded = decode_value(entry.arguments)
            return (
                isinstance(recorded, Mapping)
                and recorded.get("input") == input_digest
                and (run_id is None or recorded.get("run_id") == run_id)
            )

        asked = {"workflow": workflow, "run_id": run_id, "input": input_digest}
        index, request_id, entry = self._position(EffectKind.CHILD, workflow, asked, same)
        if entry is None:
            child_id = run_id or request_id
            arguments = encode_value(
                {"workflow": workflow, "run_id": child_id, "input": input_digest}, "child"
            )
            # The child's id in metadata too: plain (never encrypted), so a tree of runs
            # is drawn without a key.
            meta = {"child": child_id}
            entry = calls.journal.intent(
                calls._entry(request_id, index, EffectKind.CHILD, workflow, arguments, meta)
            )
        else:
            recorded = decode_value(entry.arguments) if entry.kind is EffectKind.CHILD else {}
            child_id = recorded.get("run_id", "")
            if (
                entry.kind is not EffectKind.CHILD
                or entry.name != workflow
                or recorded.get("input") != input_digest
                or (run_id is not None and run_id != child_id)
            ):
                raise NonDeterminismError(
                    calls.run_id,
                    request_id,
                    f"{entry.kind.value} {entry.name!r} {recorded or ''}".rstrip(),
                    f"child {workflow!r} {run_id or '(derived id)'}",
                )
        if entry.status is not EffectStatus.DONE:
            create(child_id, request_id)
            calls.journal.settle(
                entry, EffectStatus.DONE, result=encode_value({"run_id": child_id}, "child")
            )
        return child_id

    # -- timers -------------------------------------------------------------------------
    def sleep(self, until_of: Callable[[datetime], datetime]) -> None:
        """Return once the wake-up time is past: ``until_of(now)`` the first time, then
        the one recorded, whatever the clock says when the step runs again.

        Raises:
            Suspend: the time has not come; the run waits until it.
        """
        calls = self.calls
        index, request_id, entry = self._position(EffectKind.SLEEP, "sleep")
        if entry is None:
            until = until_of(self.now())
            if until.tzinfo is None or until.utcoffset() is None:
                raise ConfigurationError(f"sleep until {until!r}: a naive datetime (give a tz)")
            arguments = encode_value({"until": _iso(until)}, "sleep")
            entry = calls.journal.intent(
                calls._entry(request_id, index, EffectKind.SLEEP, "sleep", arguments, {})
            )
        elif entry.kind is not EffectKind.SLEEP:
            raise NonDeterminismError(
                calls.run_id, request_id, f"{entry.kind.value} {entry.name!r}", "sleep"
            )
        if entry.status is EffectStatus.DONE:
            return
        due = _when(decode_value(entry.arguments)["until"])
        assert due is not None
        now = self.now()
        if now < due:
            raise Suspend(Waiting(until=due), f"its wake-up time {due.isoformat()}")
        calls.journal.settle(
            entry, EffectStatus.DONE, result=encode_value({"woke": _iso(now)}, "sleep")
        )
