"""The step loop: run steps, apply the checkpoint policy, write checkpoints, stop safely.

One loop serves both the sync and the async API. Store calls go through an
``io`` adapter: called inline for ``run``/``resume``, in a worker thread for
``arun``/``aresume`` so an event loop is never blocked on disk or network.

Every way a run stops in this process (done, failed, paused for a person,
cancelled, stopped on an in-doubt effect) writes a checkpoint that says so and
keeps the right resume point: the state before the step that did not finish,
and that step as ``next``.
"""

from __future__ import annotations

import contextlib
import inspect
import time
from collections.abc import Mapping
from dataclasses import replace
from datetime import timedelta
from typing import Any

from savegame import codec, secrets
from savegame.codec.blobs import known
from savegame.codec.engine import Encoded, Encoder
from savegame.codec.envelope import seal_error
from savegame.effects.calls import Calls
from savegame.effects.compensation import run_compensation
from savegame.effects.journal import Journal
from savegame.errors import (
    CheckpointWriteError,
    ConfigurationError,
    LeaseLostError,
    MissingBlobsError,
    SavegameError,
    SerializationError,
    StepError,
    describe,
)
from savegame.ids import new_id
from savegame.model import (
    CheckpointHeader,
    CheckpointRecord,
    Lease,
    RunResult,
    RunStatus,
    Usage,
    utcnow,
)
from savegame.runtime.context import StepContext
from savegame.runtime.execution import Execution
from savegame.runtime.lease import Heartbeat
from savegame.runtime.mutations import fingerprints, refuse_hidden_mutations
from savegame.runtime.workflow import END
from savegame.runtime.writer import AsyncWriter, SyncWriter, Writer
from savegame.signals import Cancel, NeedsAttention, Pause
from savegame.stores.base import ALL_EFFECTS, Store


def _check_result(out: Any, node: str) -> tuple[Mapping[str, Any], str]:
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


class _Commits:
    """What follows a durable record: the loop's last record, the encoder's notice and
    the observer. The writer calls it after each commit. It is apart from the loop so
    that callback does not point back at the loop that owns the writer: that cycle
    kept a finished run's state and packs alive until the collector's next full pass."""

    __slots__ = ("encoder", "ex", "last_record")

    def __init__(self, ex: Execution, encoder: Encoder) -> None:
        self.ex, self.encoder, self.last_record = ex, encoder, ex.start_record

    def __call__(self, record: CheckpointRecord, seconds: float) -> None:
        self.last_record = record
        self.encoder.committed(self.ex.store, record)
        if self.ex.observer.on_checkpoint is not None:
            self.ex.observer.on_checkpoint(record.header, seconds)

    def announce(self, record: CheckpointRecord) -> None:
        self(record, 0.0)


class _Loop:
    def __init__(self, ex: Execution) -> None:
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
        self.encoder = (
            Encoder(ex.storage, base=ex.start_record, state=self.state, chain=ex.chain)
            if ex.chain is not None
            else Encoder(ex.storage)
        )
        # Top-level keys set by steps since the last encoded record: all a delta looks at.
        self.dirty: set[str] = set()
        kind = AsyncWriter if ex.durability == "async" else SyncWriter
        self.commits = _Commits(ex, self.encoder)
        self.writer: Writer = kind(ex.store, ex.lease.token, self.commits)
        # The cancel flag as the last write read it, for the boundary right after it
        # only: it spares a read of the run per step (a round trip on a server store).
        self.cancel_seen: bool | None = None

    def _cancel_requested(self) -> bool:
        return self.ex.store.get_run(self.run_id).cancel_requested

    async def _cancelled(self) -> bool:
        """Whether a cancel is requested, as the write just before this boundary read it
        (sync durability) or else as the run row says now."""
        seen, self.cancel_seen = self.cancel_seen, None
        if seen is not None:
            return seen
        cancelled: bool = await self.ex.io(self._cancel_requested)
        return cancelled

    async def _write(self, encoded: Encoded, *, error: str | None = None) -> None:
        record = encoded.record
        error = seal_error(self.run_id, error, self.ex.storage)
        effects = self.journal.take_buffered()
        try:
            blobs = await self.ex.io(self.encoder.to_upload, self.ex.store, encoded)
            try:
                written = await self.ex.io(
                    self.writer.write, record, error=error, effects=effects, blobs=blobs
                )
            except MissingBlobsError:
                # A prune elsewhere removed blobs this process believed stored: ask again, re-send.
                known.forget(self.ex.store)
                blobs = await self.ex.io(self.encoder.to_upload, self.ex.store, encoded)
                written = await self.ex.io(
                    self.writer.write, record, error=error, effects=effects, blobs=blobs
                )
            # Good for the boundary right after this write only, and only if no user code
            # ran since the transaction read it: an on_checkpoint observer may ask to cancel
            # (a budget guard, say), and that must stop the run before its next step.
            if written is None or self.ex.observer.on_checkpoint is not None:
                self.cancel_seen = None
            else:
                self.cancel_seen = written.cancel_requested
        except (LeaseLostError, CheckpointWriteError):
            raise  # an async writer's error names the step whose write failed
        except Exception as exc:
            raise CheckpointWriteError(self.run_id, record.header.step, exc) from exc

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
        return CheckpointHeader(
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

    async def _stop(
        self,
        status: RunStatus,
        next_step: str | None,
        *,
        error: BaseException | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> CheckpointRecord:
        """Write the checkpoint that ends this process's work on the run."""
        await self.ex.io(self.writer.flush)
        meta = dict(metadata or {})
        if error is not None:
            meta["error"] = describe(error)
        header = self._header(status, next_step, meta)
        try:
            encoded = self.encoder.encode(header, self._saveable(self.state), self.dirty)
        except Exception:
            # Steps since the last checkpoint left something unsaveable in the
            # state: fall back to the last committed state and its resume point.
            # Any error, not only SerializationError: the stop checkpoint must be
            # written, or the run stays running with no owner and is claimed again.
            last = self.commits.last_record.header
            header = replace(
                header, step=last.step, node=last.node, usage=last.usage,
                next=last.next if next_step is not None else None,
                state_version=last.state_version,
            )  # fmt: skip
            encoded = Encoded(codec.rewrap(self.commits.last_record, header, self.ex.storage))
        record = encoded.record
        await self._write(
            encoded, error=None if error is None else describe(error, with_type=False)
        )
        await self.ex.io(self.writer.flush)
        self.parent = record.checkpoint_id
        return record

    def _saveable(self, state: dict[str, Any]) -> dict[str, Any]:
        """The state as saved: declared secret fields become references to their names."""
        fields = self.ex.workflow.secrets
        return secrets.redact(state, fields) if fields else state

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

    async def _run_step(self, name: str) -> tuple[Mapping[str, Any], str, StepContext, bool]:
        spec = self.ex.workflow.get_step(name)
        calls = Calls(
            self.journal, run_id=self.run_id, step=self.step + 1, node=name,
            cancelled=self._cancel_requested,
        )  # fmt: skip
        ctx = StepContext(self.run_id, self.thread_id, name, self.step + 1, self.parent, calls)
        if self.ex.observer.on_step is not None:
            self.ex.observer.on_step(self.run_id, self.step + 1, name)
        before = fingerprints(self.state) if self.ex.workflow.check_mutations else None
        out = spec.fn(self.state, ctx)
        if inspect.isawaitable(out):
            out = await out
        update, nxt = _check_result(out, name)
        if before is not None:
            refuse_hidden_mutations(name, before, self.state, update)
        if nxt != END:
            self.ex.workflow.get_step(nxt)
        return update, nxt, ctx, spec.key

    async def loop(self, heartbeat: Heartbeat) -> RunResult:
        ex = self.ex
        self.journal = Journal(
            ex.store,
            self.run_id,
            ex.lease.token,
            await ex.io(ex.store.list_effects, self.run_id, limit=ALL_EFFECTS),
            storage=ex.storage,
        )
        since_steps, since_time = 0, time.monotonic()
        final: CheckpointRecord | None = None
        while self.target is not None:
            name = self.target
            if heartbeat.lost is not None:
                raise heartbeat.lost
            if ex.should_stop is not None and ex.should_stop():
                if since_steps:
                    return self._result(await self._stop(RunStatus.RUNNING, name))
                await ex.io(self.writer.flush)
                return self._result(final or self.commits.last_record)
            try:
                if await self._cancelled():
                    raise Cancel()
                update, nxt, ctx, key = await self._run_step(name)
            except Pause as pause:
                paused = await self._stop(
                    RunStatus.INTERRUPTED, name, metadata={"interrupt": pause.interrupt_id}
                )
                return self._result(paused, pause.interrupt_id)
            except Cancel:
                return self._result(await self._stop(RunStatus.CANCELLED, None))
            except NeedsAttention as attention:
                await self._stop(RunStatus.NEEDS_ATTENTION, name, error=attention.error)
                raise attention.error from None
            except LeaseLostError:
                raise
            except Exception as exc:
                # With a saga, the failure checkpoint already says "compensating": a crash
                # before compensation finishes leaves a run that `compensate` continues,
                # never one that a resume would retry.
                saga = ex.workflow.compensate_on_failure
                await self._stop(
                    RunStatus.COMPENSATING if saga else RunStatus.FAILED, name, error=exc
                )
                if saga:
                    await ex.io(
                        run_compensation,
                        ex.store,
                        self.run_id,
                        ex.lease,
                        self.commits.announce,
                        storage=ex.storage,
                    )
                if isinstance(exc, SavegameError):
                    raise
                raise StepError(self.run_id, name, exc) from exc
            new_state = {**self.state, **update}
            self.dirty.update(update)
            target = None if nxt == END else nxt
            usage = self.usage + ctx.usage
            since_steps += 1
            due = ex.policy.due(
                steps_since=since_steps, seconds_since=time.monotonic() - since_time, node=name
            )
            if target is None or due or ctx.forced or key:
                status = RunStatus.COMPLETED if target is None else RunStatus.RUNNING
                header = self._header(
                    status, target, ctx.metadata, after=(self.step + 1, name, usage)
                )
                try:
                    encoded: Encoded | None = self.encoder.encode(
                        header, self._saveable(new_state), self.dirty
                    )
                except Exception as exc:
                    # The step counts as not done: the stop checkpoint keeps the state before
                    # it. Any error (a field that will not read, say), so the run ends failed.
                    located = (
                        exc.located(run_id=self.run_id, step=name)
                        if isinstance(exc, SerializationError)
                        else exc
                    )
                    await self._stop(RunStatus.FAILED, name, error=located)
                    raise located from None
            else:
                encoded = None
            self.state, self.step, self.node, self.usage, self.target = (
                new_state,
                self.step + 1,
                name,
                usage,
                target,
            )
            if encoded is None:
                continue
            self.dirty = set()
            await self._write(encoded)
            final, self.parent = encoded.record, encoded.record.checkpoint_id
            since_steps, since_time = 0, time.monotonic()
        await ex.io(self.writer.flush)
        return self._result(final or self.commits.last_record)

    async def run(self) -> RunResult:
        with Heartbeat(self.ex.store, self.ex.lease, self.ex.ttl) as heartbeat:
            try:
                result = await self.loop(heartbeat)
            finally:
                self.writer.close()
        await self.ex.io(_release, self.ex.store, self.ex.lease)
        return result


def _release(store: Store, lease: Lease) -> None:
    store.release_lease(lease.run_id, lease.token)


async def execute(ex: Execution) -> RunResult:
    """Drive a run from ``ex.start`` until it ends or pauses; the lease is released on every exit."""
    try:
        return await _Loop(ex).run()
    except BaseException:
        # Best effort: a stale token makes this a no-op, a dead store makes it moot
        # (the lease then expires, or a same-host resume sees this process is gone).
        with contextlib.suppress(Exception):
            await ex.io(_release, ex.store, ex.lease)
        raise


__all__ = ["execute"]
