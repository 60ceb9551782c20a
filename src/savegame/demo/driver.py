"""``savegame demo``: an approval, a real crash mid-refund, a resume elsewhere, and the proof.

1. Process 1 starts the refund agent on a fresh SQLite store; the refund is over
   the limit, so the run pauses for approval and the process exits.
2. A person approves at the terminal (or the demo approves by itself).
3. Process 2 resumes the run; it is SIGKILLed inside ``issue_refund``, after the
   payment provider refunded and before savegame recorded the result.
4. Process 3 resumes from the store alone: the refund is in doubt, and the tool
   is idempotent, so it is retried with the same request id and the provider
   deduplicates it. The run then emails the customer and answers.
5. The same agent runs uninterrupted (approved too) against its own outside
   world, as a reference; the final states are compared byte for byte, and the
   outside world must hold exactly one refund and one email.

The store and the outside-world files are kept (in a temporary folder, whose
path the report gives) so the run ids the demo shows can be inspected with
``savegame history`` and friends; time spent waiting for the person's answer
is not counted as run time.

This module has no rich or typer import: it returns a :class:`DemoReport`
and the CLI renders it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass, field
from typing import Any

import savegame
from savegame.codec import canonical
from savegame.demo.processes import Child, DemoError, run_child
from savegame.demo.world import Summary, World
from savegame.effects import default_actor
from savegame.redaction import redact_url

#: The tool inside which process 2 is killed.
KILL_IN = "issue_refund"
#: The process that resumes after the crash, shown apart in the timeline.
AFTER_CRASH = "process 3"

Events = Callable[[str], None]
Ask = Callable[[str], bool]

_HERE = os.path.dirname(os.path.abspath(__file__))

#: Where the demo's code is, to read after watching it: what each file holds -> its path.
CODE: dict[str, str] = {
    "the refund agent: tools, model script, workflow": os.path.join(_HERE, "refund.py"),
    "its outside world: payment provider, mail server": os.path.join(_HERE, "world.py"),
    "the process that runs or resumes it": os.path.join(_HERE, "child.py"),
    "the demo: approve, SIGKILL, resume, compare": os.path.join(_HERE, "driver.py"),
}


@dataclass(frozen=True, slots=True)
class Entry:
    """One checkpoint of the crashed-and-resumed run."""

    step: int
    node: str | None
    checkpoint_id: str
    next: str | None
    status: str
    size: int
    write_ms: float | None
    """Commit time reported by the writing process (None when it reported none)."""
    process: str
    """``process 1``, ``process 2`` or ``process 3``."""
    pid: int | None


@dataclass(frozen=True, slots=True)
class Approval:
    """The pause for a person and how it was answered."""

    interrupt_id: str
    tool: str
    arguments: dict[str, Any]
    question: str
    how: str
    """``at the terminal``, ``automatically (--yes)`` ..."""
    by: str
    waited: float = 0.0
    """Seconds spent waiting for the person's answer (not run time)."""


@dataclass(frozen=True, slots=True)
class Kill:
    """Where process 2 died."""

    pid: int
    tool: str
    request_id: str
    journal_status: str
    """The status of that call's journal entry when the kill landed (``pending``: no result recorded)."""


@dataclass(frozen=True, slots=True)
class DemoReport:
    """Everything the demo did and found, for rendering."""

    store_url: str
    """The store's URL without its password (:func:`savegame.redaction.redact_url`)."""
    kept: str | None
    """The folder holding the database and the outside-world files when kept, else None."""
    run_id: str
    reference_run_id: str
    approval: Approval
    kill: Kill
    resumed_pid: int
    timeline: list[Entry]
    world: Summary
    """The crashed run's outside world: refunds, emails and every call received."""
    final: bytes
    """Canonical encoding of the resumed run's final state, read back from the store."""
    reference: bytes
    """Canonical encoding of the reference run's final state."""
    answer: str | None
    usage: savegame.model.Usage
    reference_usage: savegame.model.Usage
    seconds: dict[str, float] = field(default_factory=dict)
    """Wall time of each phase: processes, reference, total; the wait for the person's
    answer is left out of them and given as ``approval``."""
    code: dict[str, str] = field(default_factory=lambda: dict(CODE))
    """Where the demo's code is: what each file holds -> its path."""

    @property
    def same_state(self) -> bool:
        return self.final == self.reference and self.usage == self.reference_usage

    @property
    def once_each(self) -> bool:
        return len(self.world.refunds) == 1 and len(self.world.emails) == 1

    @property
    def verdict(self) -> bool:
        return self.same_state and self.once_each

    @property
    def final_sha(self) -> str:
        return hashlib.sha256(self.final).hexdigest()

    @property
    def reference_sha(self) -> str:
        return hashlib.sha256(self.reference).hexdigest()


def _timeline(store: savegame.Store, run_id: str, children: list[Child]) -> list[Entry]:
    written = {
        e["checkpoint_id"]: (child.label, e)
        for child in children
        for e in child.events
        if e["event"] == "checkpoint"
    }
    entries = []
    for h in reversed(savegame.client.history(run_id, store=store)):
        # The one checkpoint no child writes: the approval queues the run for whoever goes on.
        by = "the approval" if h.status is savegame.RunStatus.QUEUED else children[0].label
        process, event = written.get(h.checkpoint_id, (by, {}))
        entries.append(
            Entry(
                step=h.step,
                node=h.node,
                checkpoint_id=h.checkpoint_id,
                next=h.next,
                status=h.status.value,
                size=h.size,
                write_ms=event.get("ms"),
                process=process,
                pid=event.get("pid"),
            )
        )
    return entries


def _decide(
    store: savegame.Store, run_id: str, ask: Ask | None, auto: str, say: Events
) -> Approval:
    [waiting] = savegame.client.pending_interrupts(run_id, store=store)
    args = dict(waiting.payload)
    question = f"Approve refund of ${args['amount']} for order {args['order_id']}?"
    asked = time.perf_counter()
    if ask is None:
        how, by = f"automatically ({auto})", f"savegame demo ({auto})"
        say(f"{question} approved {how}")
    elif ask(question):
        how, by = "at the terminal", default_actor()
    else:
        savegame.reject(run_id, reason="declined at the demo prompt", store=store, resume=False)
        savegame.client.cancel(run_id, store=store)
        raise DemoError(
            f"demo: refund declined; run {run_id} is cancelled and nothing was refunded"
        )
    waited = time.perf_counter() - asked
    # Recorded only: the next process continues the run (and is killed in the refund).
    savegame.approve(run_id, interrupt_id=waiting.interrupt_id, by=by, store=store, resume=False)
    return Approval(waiting.interrupt_id, waiting.name, args, question, how, by, waited)


def _reference(store: savegame.Store, world: str, by: str) -> savegame.RunResult:
    from savegame.demo import refund

    refund.use_world(world)
    try:
        paused = savegame.run(refund.agent, {"input": refund.QUESTION}, store=store)
        decision = savegame.approve(paused.run_id, by=by, store=store, workflow=refund.agent)
        if decision.result is None:
            raise DemoError(f"demo: the reference run did not continue: {decision.error}")
        return decision.result
    finally:
        refund.use_world(None)


def _workspace(store: str | None) -> tuple[str, str]:
    """The store URL and the folder for the demo's files."""
    folder = tempfile.mkdtemp(prefix="savegame-demo-")
    return store or f"sqlite:///{os.path.join(folder, 'demo.db')}", folder


@dataclass(frozen=True, slots=True)
class _Crashed:
    """What the three processes did to the run."""

    run_id: str
    approval: Approval
    kill: Kill
    children: list[Child]
    """Processes 1, 2 and 3, in order."""


def _crash_and_resume(
    handle: savegame.Store, url: str, world: str, ask: Ask | None, auto: str, say: Events
) -> _Crashed:
    """Start the run until it pauses, approve, kill the resumed run mid-refund, resume it."""
    if not handle.capabilities.multi_process:
        raise DemoError(
            f"demo: store {redact_url(url)} cannot be shared between processes; use a sqlite:// URL"
        )
    common = ("--store", url, "--world", world)
    first = run_child("process 1", "start", *common)
    run_id = first.events[-1]["run_id"]
    if first.events[-1]["status"] != "interrupted":
        raise DemoError(f"demo: run {run_id} did not pause for approval")
    say(f"process 1 (pid {first.pid}) ran the refund agent until it paused for approval")
    approval = _decide(handle, run_id, ask, auto, say)
    second = run_child("process 2", "resume", run_id, *common, "--hang-in", KILL_IN, kill_on="hang")
    hang = second.events[-1]
    status = next(
        e.status.value for e in savegame.client.list_effects(run_id, store=handle)
        if e.request_id == hang["request_id"]
    )  # fmt: skip
    say(f"process 2 (pid {second.pid}) resumed; SIGKILL inside {KILL_IN} after the refund")
    third = run_child(AFTER_CRASH, "resume", run_id, *common)
    say(f"process 3 (pid {third.pid}) resumed run {run_id} from the store to its end")
    kill = Kill(second.pid, hang["tool"], hang["request_id"], status)
    return _Crashed(run_id, approval, kill, [first, second, third])


def run_demo(
    *,
    store: str | None = None,
    keep: bool = True,
    on_event: Events | None = None,
    ask: Ask | None = None,
    auto: str = "no terminal attached",
) -> DemoReport:
    """Pause the refund agent for approval, kill it mid-refund, resume it, compare with a clean run.

    Args:
        store: a store URL shared between processes (default: a new SQLite file
            in a temporary folder, kept unless ``keep`` is False).
        keep: keep the temporary folder (database and outside-world files), so the
            runs can be inspected afterwards; False deletes it at the end.
        on_event: called with a line of progress as each phase happens.
        ask: asks a person a yes/no question; None approves by itself.
        auto: why the demo approves by itself (shown when ``ask`` is None).

    Raises:
        DemoError: a child process failed, the store cannot be shared between
            processes, or the refund was declined.
    """
    say = on_event or (lambda _: None)
    url, folder = _workspace(store)
    world, ref_world = os.path.join(folder, "world.db"), os.path.join(folder, "reference-world.db")
    started = time.perf_counter()
    seconds: dict[str, float] = {}
    say(f"the refund agent is {CODE[next(iter(CODE))]}; its runs go to {redact_url(url)}")
    try:
        with closing(savegame.open_store(url)) as handle:
            crashed = _crash_and_resume(handle, url, world, ask, auto, say)
            seconds["approval"] = crashed.approval.waited
            seconds["processes"] = time.perf_counter() - started - crashed.approval.waited
            mark = time.perf_counter()
            say("reference: the same agent, uninterrupted and approved, on its own thread")
            reference = _reference(handle, ref_world, crashed.approval.by)
            seconds["reference"] = time.perf_counter() - mark
            final = savegame.client.get_checkpoint(crashed.run_id, store=handle)
            expected = savegame.client.get_checkpoint(reference.run_id, store=handle)
            timeline = _timeline(handle, crashed.run_id, crashed.children)
            summary = World(world).summary()
    finally:
        # An empty folder (the demo stopped before it wrote anything) is nothing to keep.
        if not keep or not os.listdir(folder):
            shutil.rmtree(folder, ignore_errors=True)
    seconds["total"] = time.perf_counter() - started - crashed.approval.waited
    return DemoReport(
        store_url=redact_url(url),
        kept=folder if keep else None,
        run_id=crashed.run_id,
        reference_run_id=reference.run_id,
        approval=crashed.approval,
        kill=crashed.kill,
        resumed_pid=crashed.children[-1].pid,
        timeline=timeline,
        world=summary,
        final=canonical(final.state),
        reference=canonical(expected.state),
        answer=final.state.get("answer"),
        usage=final.usage,
        reference_usage=expected.usage,
        seconds=seconds,
    )
