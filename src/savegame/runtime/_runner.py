"""The step loop: run steps, apply the checkpoint policy, write checkpoints, stop safely.

One loop serves both the sync and the async API. Store calls go through an
``io`` adapter (:mod:`savegame.runtime._bridge`): called inline for
``run``/``resume``, in a worker thread for ``arun``/``aresume`` so an event loop
is never blocked on disk or network. At each boundary the policy picks, the loop
asks the saver (:mod:`savegame.runtime._persist`) once to write the checkpoint.

Every way a run stops in this process (done, failed, paused for a person,
cancelled, stopped on an in-doubt effect, stopped by a Ctrl-C) writes a checkpoint
that says so and keeps the right resume point: the state before the step that did
not finish, and that step as ``next``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, NoReturn

from savegame.codec import open_entry
from savegame.effects import (
    Calls,
    Expired,
    Journal,
    Replay,
    aattempts,
    retry_wait,
    retryable,
    run_compensation,
    within,
)
from savegame.errors import (
    CheckpointWriteError,
    ConfigurationError,
    LeaseLostError,
    SavegameError,
    SerializationError,
    StepError,
    TimedOutError,
    describe,
)
from savegame.ids import new_id
from savegame.model import (
    TAKEOVER_KEY,
    WRITER_KEY,
    CheckpointHeader,
    CheckpointRecord,
    EffectRecord,
    Lease,
    RunResult,
    RunStatus,
    Usage,
    evolver,
    utcnow,
)
from savegame.runtime._children import ending, final_state
from savegame.runtime._context import StepContext
from savegame.runtime._execution import Execution
from savegame.runtime._lease import Heartbeat
from savegame.runtime._mutations import fingerprints, refuse_hidden_mutations
from savegame.runtime._persist import NOTHING, Beside, saver
from savegame.runtime._sigint import unless_stopped
from savegame.runtime._trace import TRACE_KEY, Span, run_span, step_span, usage_attributes
from savegame.runtime._workflow import END, StepSpec
from savegame.signals import Cancel, Halt, NeedsAttention, Pause, Suspend
from savegame.stores.base import ALL_EFFECTS, Store

# A checkpoint's header: the run's blank one with the fields each checkpoint sets.
_new_header = evolver(
    CheckpointHeader, "thread_id", "run_id", "checkpoint_id", "parent_id", "step", "node",
    "status", "next", "usage", "metadata", "created_at", "expires_at", "state_version",
)  # fmt: skip


def _check_result(out: Any, node: str) -> tuple[Mapping[str, Any], str]:
    if type(out) is tuple and len(out) == 2:
        # The usual result, checked without the ABC's isinstance and a generator (about
        # 6k instructions a step); anything else is checked (and refused) below.
        update, target = out
        if type(update) is dict and type(target) is str:
            for key in update:
                if type(key) is not str:
                    break
            else:
                return update, target
    if not (isinstance(out, tuple) and len(out) == 2):
        raise ConfigurationError(
            f"step {node!r} must return (update, next_step), not {type(out).__qualname__}"
        )
    update, target = out
    if update is None:
        update = {}
    if not isinstance(update, Mapping) or not all(isinstance(key, str) for key in update):
        raise ConfigurationError(
            f"step {node!r} returned an update of type {type(update).__qualname__}; "
            "it must be a dict of top-level state keys"
        )
    if not isinstance(target, str):
        raise ConfigurationError(
            f"step {node!r} returned next step {target!r}; it must be a step name or END"
        )
    return update, target


def _cancelled_from_outside(exc: BaseException) -> bool:
    """Whether ``exc`` is this task being cancelled (``arun`` cancelled by its caller),
    not a CancelledError a step raised on its own. Without ``Task.cancelling`` (Python
    3.10) every CancelledError counts as the caller's."""
    if not isinstance(exc, asyncio.CancelledError):
        return False
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)
    return task is None or cancelling is None or cancelling() > 0


class _Loop:
    """One execution of one run: steps, their boundaries, and the stop that ends it.

    Each boundary asks the saver once (:mod:`savegame.runtime._persist`), which gives
    its own commit notice and holds nothing of the loop's: a callback from the writer
    back into the loop that owns it was a reference cycle, and it kept a finished
    run's state and packs alive until the collector's next full pass.
    """

    def __init__(self, ex: Execution, span: Span) -> None:
        self.ex = ex
        start = ex.start
        self.run_id = start.run_id
        self.thread_id = start.thread_id
        self.state = dict(start.state)
        self.target = start.next
        self.step = start.step
        self.node = start.node
        self.usage = start.usage
        self.parent: str | None = start.checkpoint_id
        self.journal = Journal(ex.store, self.run_id, ex.lease.token, [], storage=ex.storage)
        self.replay: Replay | None = None
        self.saver = saver(ex, self.state)
        # Top-level keys set by steps since the last encoded record: all a delta looks at.
        self.dirty: set[str] = set()
        # Steps and time since the last checkpoint, for the policy (the clock starts with the loop).
        self.since_steps, self.since_time = 0, 0.0
        # The cancel flag as the last write read it, for the boundary right after it
        # only: it spares a read of the run per step (a round trip on a server store).
        self.cancel_seen: bool | None = None
        # Executions of the next step so far, when this run was stopped waiting to retry it.
        meta = start.header.metadata
        retried = meta.get("attempt") if meta.get("retrying") == start.next else None
        self.retried = retried if isinstance(retried, int) else 0
        self.attempt = 0
        # The first checkpoint of each execution names the process writing it (the
        # lease owner), so a reader sees where another process went on: after a
        # pause, or after the one before died (its last checkpoint still running).
        self.writer: str | None = ex.lease.owner or None
        # The run's trace, kept in every checkpoint so any checkpoint a resume starts from
        # continues it: the anchor its start span left, else (a run created untraced, a
        # fork) this execution's span.
        kept = meta.get(TRACE_KEY)
        own = span.traceparent
        self.traceparent = kept if isinstance(kept, str) else own
        # Steps are traced when the execution is: its span has a context.
        self.traced = own is not None
        # What _header copies: a header of this run, every field a copy does not set
        # (size, format, base, blobs: the encoder's) at CheckpointHeader's default.
        self.blank = CheckpointHeader(
            thread_id=self.thread_id, run_id=self.run_id, checkpoint_id="", parent_id=None,
            step=0, node=None, status=RunStatus.RUNNING, next=None,
        )  # fmt: skip

    async def run(self) -> RunResult:
        with Heartbeat(self.ex.store, self.ex.lease, self.ex.ttl) as heartbeat:
            try:
                result = await self.loop(heartbeat)
            finally:
                self.saver.close()
        await self.ex.io(_release, self.ex.store, self.ex.lease)
        return result

    async def loop(self, heartbeat: Heartbeat) -> RunResult:
        """Run steps until the run ends, pauses, is stopped, or fails."""
        ex = self.ex
        self.journal = Journal(
            ex.store,
            self.run_id,
            ex.lease.token,
            await ex.io(ex.store.list_effects, self.run_id, limit=ALL_EFFECTS),
            storage=ex.storage,
        )
        if ex.origin is not None:
            self.replay = await ex.io(self._replay_source)
        if ex.workspace is not None and not await ex.io(self.saver.restore_workspace, self.state):
            # A run's first workspace snapshot, before its first step writes a file.
            header = self._header(RunStatus.RUNNING, self.target, {})
            await self._boundary("(workspace)", header, self.state)
        self.since_time = time.monotonic()
        while self.target is not None:
            name = self.target
            if heartbeat.lost is not None:
                raise heartbeat.lost
            if ex.should_stop is not None and ex.should_stop():
                return await self._shut_down(name)
            if self._halting():
                return await self._halt(name)
            with step_span(self.run_id, self.step + 1, name, traced=self.traced) as span:
                try:
                    if await self._cancelled():
                        raise Cancel()
                    update, nxt, ctx, key = await self._attempts(name)
                except Suspend as suspend:
                    span.set({"savegame.outcome": "waiting"})
                    waiting = await self._suspend(name, suspend)
                    if ex.block is None or self._halting():
                        return waiting
                    # A caller that wants to block: the lease is kept (with its heartbeat)
                    # while the store says the run waits, then the step runs again.
                    await ex.block(suspend.waiting)
                    if self._halting():
                        return waiting  # a Ctrl-C ended the wait: the run stays waiting
                    continue
                except (Pause, Cancel, NeedsAttention, Halt) as signal:
                    result = await self._on_signal(name, signal)
                    span.set(
                        {
                            "savegame.outcome": result.status.value,
                            "savegame.checkpoint_id": result.checkpoint_id,
                        }
                    )
                    return result
                except LeaseLostError:
                    raise
                except Exception as exc:
                    if self._halting():
                        # A terminal's Ctrl-C reaches the whole process group, so a tool's
                        # own child process died of it too: the step is stopped with the
                        # run (its error noted), to run again on resume, not failed.
                        span.set({"savegame.outcome": RunStatus.INTERRUPTED.value})
                        return await self._halt(name, error=exc)
                    await self._fail(name, exc)
                except BaseException as exc:
                    # SystemExit from a library, a CancelledError the step raised itself:
                    # the step failed all the same, and a run must not be left running
                    # with no owner for a worker to claim again. Recorded, then raised.
                    if isinstance(exc, KeyboardInterrupt) or _cancelled_from_outside(exc):
                        raise
                    await self._stop(RunStatus.FAILED, name, error=exc)
                    raise
                before = self.parent
                await self._advance(name, update, nxt, ctx, key)
                saved = None if self.parent == before else self.parent
                span.set({"savegame.attempts": self.attempt, "savegame.checkpoint_id": saved})
        return self._result(await self.saver.flush())

    def _replay_source(self) -> Replay:
        """A fork's origin journal, each entry verified (a pruned origin has none)."""
        origin = self.ex.origin
        assert origin is not None
        recorded = self.ex.store.list_effects(origin.run_id, limit=ALL_EFFECTS)
        opened = [open_entry(e, self.ex.storage) for e in recorded]
        return Replay.of(origin, opened, self.journal.entries(), resumed_at=self.step)

    async def _attempts(self, name: str) -> tuple[Mapping[str, Any], str, StepContext, bool]:
        """Run step ``name`` once, or as often as its ``retries`` allow (stamina's waits).

        A failed execution that will be tried again is checkpointed first (running, the
        error and attempt number in its metadata; the state before the step), so a
        crash in the wait resumes counting from there."""
        spec = self.ex.workflow.get_step(name)
        done, self.retried = self.retried, 0
        self.attempt = done
        if not spec.retries:
            self.attempt += 1
            return await self._run_step(spec)

        def may_retry(error: Exception) -> bool:
            return retryable(error, spec.retry_on)

        def wait(error: Exception) -> bool | float:
            return retry_wait(error, spec.retry_on)

        retrying = aattempts(spec.retries, spec.backoff, done, wait).__aiter__()
        while True:
            # The wait before another attempt holds nothing unsaved (the failed attempt
            # was checkpointed): a Ctrl-C ends it at once rather than after the backoff.
            async with unless_stopped(self.ex.sigint):
                attempt = await anext(retrying, None)
            if attempt is None:
                break
            with attempt:
                self.attempt += 1
                if self.attempt > done + 1 and await self._cancelled():
                    raise Cancel()
                try:
                    return await self._run_step(spec)
                except Exception as exc:
                    if self.attempt <= spec.retries and may_retry(exc):
                        meta = {"attempt": self.attempt, "of": spec.retries + 1, "retrying": name}
                        await self._stop(RunStatus.RUNNING, name, error=exc, metadata=meta)
                    raise
        raise AssertionError("unreachable: stamina raises the last execution's error")

    async def _run_step(self, spec: StepSpec) -> tuple[Mapping[str, Any], str, StepContext, bool]:
        name = spec.name
        calls = Calls(
            self.journal, run_id=self.run_id, step=self.step + 1, node=name,
            cancelled=self._before_call, replay=self.replay,
        )  # fmt: skip
        ctx = StepContext(self.run_id, self.thread_id, name, self.step + 1, self.parent, calls)
        if self.ex.observer.on_step is not None:
            self.ex.observer.on_step(self.run_id, self.step + 1, name)
        before = fingerprints(self.state) if self.ex.workflow.check_mutations else None
        out = spec.fn(self.state, ctx)
        # A sync step's tuple is never awaitable: isawaitable's ABC check is skipped.
        if type(out) is not tuple and inspect.isawaitable(out):
            if spec.timeout is None:
                out = await out
            else:
                try:
                    out = await within(out, spec.timeout)
                except Expired:
                    raise TimedOutError(self.run_id, name, spec.timeout) from None
        update, nxt = _check_result(out, name)
        calls.finished()
        if before is not None:
            refuse_hidden_mutations(name, before, self.state, update)
        if nxt != END:
            self.ex.workflow.get_step(nxt)
        return update, nxt, ctx, spec.key

    async def _advance(
        self, name: str, update: Mapping[str, Any], nxt: str, ctx: StepContext, key: bool
    ) -> None:
        """Take a step's update; at a boundary the policy picks, checkpoint it first."""
        state = {**self.state, **update}
        self.dirty.update(update)
        target = None if nxt == END else nxt
        usage = self.usage + ctx.usage
        self.since_steps += 1
        due = self.ex.policy.due(
            steps_since=self.since_steps,
            seconds_since=time.monotonic() - self.since_time,
            node=name,
        )
        if target is None or due or ctx.forced or key:
            status = RunStatus.COMPLETED if target is None else RunStatus.RUNNING
            header = self._header(status, target, ctx.metadata, after=(self.step + 1, name, usage))
            await self._boundary(name, header, state, ending=target is None)
        self.state, self.step, self.node, self.usage, self.target = (
            state,
            self.step + 1,
            name,
            usage,
            target,
        )

    async def _boundary(
        self, name: str, header: CheckpointHeader, state: dict[str, Any], *, ending: bool = False
    ) -> None:
        """Checkpoint the state after step ``name``; a state that will not save fails the run.

        ``ending``: the run completes here (a child's parent is told, with its state)."""
        effects = self.journal.take_buffered()
        try:
            beside = NOTHING
            if ending and self.ex.parent is not None:
                done = final_state(state, self.ex.workflow.secrets)
                beside = Beside(events=self._ending(RunStatus.COMPLETED, state=done))
            saved = await self.saver.save(header, state, self.dirty, effects, beside)
        except (LeaseLostError, CheckpointWriteError):
            raise
        except Exception as exc:
            # The step counts as not done: the stop checkpoint keeps the state before
            # it. Any error (a field that will not read, say), so the run ends failed.
            located = (
                exc.located(run_id=self.run_id, step=name)
                if isinstance(exc, SerializationError)
                else exc
            )
            await self._stop(RunStatus.FAILED, name, error=located, effects=effects)
            raise located from None
        self.dirty = set()
        self.parent = saved.record.checkpoint_id
        self.cancel_seen = None if saved.written is None else saved.written.cancel_requested
        self.since_steps, self.since_time = 0, time.monotonic()

    async def _suspend(self, name: str, suspend: Suspend) -> RunResult:
        """A step waits for a timer, events or child runs: checkpoint the run waiting,
        ``name`` to run again when the store wakes it."""
        meta = {"waiting": {"for": suspend.reason, **suspend.waiting.to_metadata()}}
        record = await self._stop(
            RunStatus.WAITING, name, metadata=meta, beside=Beside(waiting=suspend.waiting)
        )
        return self._result(record)

    async def _on_signal(
        self, name: str, signal: Pause | Cancel | NeedsAttention | Halt
    ) -> RunResult:
        """A step paused for a person, a cancel was asked, an in-doubt effect needs a
        person, or a Ctrl-C stopped the step: write the checkpoint that says so, with
        ``name`` to run on resume."""
        if isinstance(signal, Pause):
            paused = await self._stop(
                RunStatus.INTERRUPTED, name, metadata={"interrupt": signal.interrupt_id}
            )
            return self._result(paused, signal.interrupt_id)
        if isinstance(signal, Cancel):
            return self._result(await self._stop(RunStatus.CANCELLED, None))
        if isinstance(signal, Halt):
            return await self._halt(name)
        await self._stop(RunStatus.NEEDS_ATTENTION, name, error=signal.error)
        raise signal.error from None

    async def _fail(self, name: str, exc: Exception) -> NoReturn:
        """Step ``name`` raised: write the failure checkpoint (and compensate, with a
        saga), then raise ``exc`` if it is ours, else a StepError around it."""
        ex = self.ex
        # With a saga, the failure checkpoint already says "compensating": a crash
        # before compensation finishes leaves a run that `compensate` continues,
        # never one that a resume would retry.
        saga = ex.workflow.compensate_on_failure
        tries = ex.workflow.get_step(name).retries if name in ex.workflow.steps else 0
        meta = {"attempt": self.attempt, "of": tries + 1} if tries else None
        status = RunStatus.COMPENSATING if saga else RunStatus.FAILED
        await self._stop(status, name, error=exc, metadata=meta)
        if saga:
            await ex.io(
                run_compensation,
                ex.store,
                self.run_id,
                ex.lease,
                self.saver.announce,
                storage=ex.storage,
            )
        if isinstance(exc, SavegameError):
            raise exc
        raise StepError(self.run_id, name, exc) from exc

    async def _halt(self, name: str, error: Exception | None = None) -> RunResult:
        """A Ctrl-C asked this process to stop: checkpoint the run interrupted, ``name``
        next. Not running (a worker would take it up at once): a person stopped it, and
        a person goes on with it (``resume``)."""
        meta = {"stopped": "ctrl-c"}
        return self._result(
            await self._stop(RunStatus.INTERRUPTED, name, error=error, metadata=meta)
        )

    async def _shut_down(self, name: str) -> RunResult:
        """A worker shuts down: checkpoint the steps since the last checkpoint, if any,
        still running with ``name`` next, so another worker continues from there."""
        if self.since_steps:
            return self._result(await self._stop(RunStatus.RUNNING, name))
        return self._result(await self.saver.flush())

    async def _stop(
        self,
        status: RunStatus,
        next_step: str | None,
        *,
        error: BaseException | None = None,
        metadata: Mapping[str, Any] | None = None,
        effects: Sequence[EffectRecord] = (),
        beside: Beside = NOTHING,
    ) -> CheckpointRecord:
        """Write the checkpoint that ends this process's work on the run.

        ``effects``: buffered journal entries already taken for a save that failed;
        ``beside``: what a waiting record waits for, events for other runs."""
        meta = dict(metadata or {})
        if error is not None:
            meta["error"] = describe(error)
        told = self._ending(status, error=None if error is None else describe(error))
        if told:
            beside = Beside(beside.waiting, (*beside.events, *told))
        header = self._header(status, next_step, meta)
        record = await self.saver.stop(
            header,
            self.state,
            self.dirty,
            [*effects, *self.journal.take_buffered()],
            error=None if error is None else describe(error, with_type=False),
            beside=beside,
        )
        self.parent = record.checkpoint_id
        return record

    def _ending(
        self, status: RunStatus, *, state: Any = None, error: str | None = None
    ) -> tuple[EffectRecord, ...]:
        """A child run's end, for its parent (none for a run without one, or not ending)."""
        return ending(
            self.ex.parent, self.run_id, status, state=state, error=error, storage=self.ex.storage
        )

    def _cancel_requested(self) -> bool:
        return self.ex.store.get_run(self.run_id).cancel_requested

    def _halting(self) -> bool:
        return self.ex.sigint is not None and self.ex.sigint()

    def _before_call(self) -> bool:
        """Asked before each call a step makes: a Ctrl-C stops the step there (Halt, the
        call not made); otherwise, whether a cancel was asked."""
        if self._halting():
            raise Halt()
        return self._cancel_requested()

    async def _cancelled(self) -> bool:
        """Whether a cancel is requested, as the write just before this boundary read it
        (sync durability) or else as the run row says now."""
        seen, self.cancel_seen = self.cancel_seen, None
        if seen is not None:
            return seen
        cancelled: bool = await self.ex.io(self._cancel_requested)
        return cancelled

    def _header(
        self,
        status: RunStatus,
        next_step: str | None,
        metadata: Mapping[str, Any],
        after: tuple[int, str, Usage] | None = None,
    ) -> CheckpointHeader:
        """``after``: (step, node, usage) of a step just run; by default the loop's own."""
        now = utcnow()
        ttl = self.ex.policy.ttl
        step, node, usage = (self.step, self.node, self.usage) if after is None else after
        if self.writer is not None:
            metadata = {**metadata, WRITER_KEY: self.writer}
            if self.ex.took_over is not None:
                metadata[TAKEOVER_KEY] = self.ex.took_over
            self.writer = None
        if self.traceparent is not None:
            metadata = {**metadata, TRACE_KEY: self.traceparent}
        # The run's blank header copied with this checkpoint's fields: the header that
        # CheckpointHeader(...) would build, whose keywords reach __init__ through a
        # dict (13.4k instructions against the copy's 7k).
        return _new_header(
            self.blank,
            thread_id=self.thread_id,
            run_id=self.run_id,
            checkpoint_id=new_id(),
            parent_id=self.parent,
            step=step,
            node=node,
            status=status,
            next=next_step,
            usage=usage,
            metadata=dict(metadata),
            created_at=now,
            expires_at=None if ttl is None else now + timedelta(seconds=ttl),
            state_version=self.ex.workflow.state_version,
        )

    def _result(self, record: CheckpointRecord, interrupt_id: str | None = None) -> RunResult:
        return RunResult(
            run_id=self.run_id,
            thread_id=self.thread_id,
            status=record.header.status,
            state=self.state,
            checkpoint_id=record.checkpoint_id,
            step=record.header.step,
            usage=self.usage,
            interrupt_id=interrupt_id,
        )


def _release(store: Store, lease: Lease) -> None:
    store.release_lease(lease.run_id, lease.token)


async def execute(ex: Execution) -> RunResult:
    """Drive a run from ``ex.start`` until it ends or pauses; the lease is released on every exit."""
    start = ex.start
    with run_span(
        run_id=start.run_id,
        thread_id=start.thread_id,
        workflow=ex.workflow.name,
        step=start.step,
        checkpoint_id=start.checkpoint_id,
        parent=start.header.metadata.get(TRACE_KEY),
    ) as span:
        span.set({"savegame.took_over": ex.took_over})
        try:
            result = await _Loop(ex, span).run()
        except BaseException:
            # Best effort: a stale token makes this a no-op, a dead store makes it moot
            # (the lease then expires, or a same-host resume sees this process is gone).
            with contextlib.suppress(Exception):
                await ex.io(_release, ex.store, ex.lease)
            raise
        span.set(
            {
                "savegame.status": result.status.value,
                "savegame.step": result.step,
                "savegame.checkpoint_id": result.checkpoint_id,
                **usage_attributes(result.usage),
            }
        )
        return result


__all__ = ["execute"]
