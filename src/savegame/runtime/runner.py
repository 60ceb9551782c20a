"""The step loop: run steps, apply the checkpoint policy, write checkpoints, fail safely.

One loop serves both the sync and the async API. Store calls go through an
``io`` adapter: called inline for ``run``/``resume``, in a worker thread for
``arun``/``aresume`` so an event loop is never blocked on disk or network.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from savegame import codec
from savegame.errors import (
    CheckpointWriteError,
    ConfigurationError,
    LeaseLostError,
    SavegameError,
    SerializationError,
    StepError,
)
from savegame.ids import new_id
from savegame.model import (
    Checkpoint,
    CheckpointHeader,
    CheckpointRecord,
    Lease,
    RunResult,
    RunStatus,
    utcnow,
)
from savegame.runtime.context import StepContext
from savegame.runtime.lease import Heartbeat
from savegame.runtime.policy import CheckpointPolicy, Durability
from savegame.runtime.workflow import END, Workflow
from savegame.runtime.writer import AsyncWriter, SyncWriter, Writer
from savegame.stores.base import Store

T = TypeVar("T")
Io = Callable[..., Awaitable[Any]]


async def direct_io(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return fn(*args, **kwargs)


async def threaded_io(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await asyncio.to_thread(fn, *args, **kwargs)


@dataclass
class Observer:
    """Optional callbacks for timelines, progress bars and tests. They must not raise."""

    on_step: Callable[[str, int, str], None] | None = None
    """Called with (run_id, step index, step name) before a step runs."""
    on_checkpoint: Callable[[CheckpointHeader, float], None] | None = None
    """Called with the header and the write time in seconds once a checkpoint is committed."""


@dataclass
class Execution:
    """Everything the loop needs to drive one run from one checkpoint."""

    workflow: Workflow
    store: Store
    lease: Lease
    start: Checkpoint
    """Where to continue from, decoded and migrated."""
    start_record: CheckpointRecord
    """The stored record of ``start`` (its payload backs a failure checkpoint)."""
    policy: CheckpointPolicy
    durability: Durability
    ttl: float
    io: Io = direct_io
    observer: Observer = field(default_factory=Observer)


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


class _Loop:
    def __init__(self, ex: Execution) -> None:
        self.ex = ex
        self.run_id = ex.start.run_id
        self.last_record = ex.start_record
        self.writer: Writer
        kind = AsyncWriter if ex.durability == "async" else SyncWriter
        self.writer = kind(ex.store, ex.lease.token, self._committed)

    def _committed(self, record: CheckpointRecord, seconds: float) -> None:
        self.last_record = record
        if self.ex.observer.on_checkpoint is not None:
            self.ex.observer.on_checkpoint(record.header, seconds)

    async def _write(self, record: CheckpointRecord, *, error: str | None = None) -> None:
        try:
            await self.ex.io(self.writer.write, record, error=error)
        except LeaseLostError:
            raise
        except Exception as exc:
            raise CheckpointWriteError(self.run_id, record.header.step, exc) from exc

    async def _fail(self, error: BaseException) -> None:
        """Record the failure as a checkpoint that keeps the last good state and resume point."""
        await self.ex.io(self.writer.flush)
        last = self.last_record.header
        header = replace(
            last,
            checkpoint_id=new_id(),
            parent_id=last.checkpoint_id,
            status=RunStatus.FAILED,
            created_at=utcnow(),
            metadata={"error": f"{type(error).__name__}: {error}"},
        )
        await self._write(codec.rewrap(self.last_record, header), error=str(error))
        await self.ex.io(self.writer.flush)

    async def run(self) -> RunResult:
        ex = self.ex
        start = ex.start
        state = dict(start.state)
        target = start.next
        step = start.step
        usage = start.usage
        parent: str | None = start.checkpoint_id
        since_steps, since_time = 0, time.monotonic()
        final: CheckpointRecord | None = None
        with Heartbeat(ex.store, ex.lease, ex.ttl) as heartbeat:
            try:
                while target is not None:
                    if heartbeat.lost is not None:
                        raise heartbeat.lost
                    try:
                        spec = ex.workflow.get_step(target)
                    except ConfigurationError as exc:
                        await self._fail(exc)
                        raise
                    ctx = StepContext(self.run_id, start.thread_id, spec.name, step + 1, parent)
                    if ex.observer.on_step is not None:
                        ex.observer.on_step(self.run_id, step + 1, spec.name)
                    try:
                        out = spec.fn(state, ctx)
                        if inspect.isawaitable(out):
                            out = await out
                        update, nxt = _check_result(out, spec.name)
                        if nxt != END:
                            ex.workflow.get_step(nxt)
                    except Exception as exc:
                        await self._fail(exc)
                        if isinstance(exc, SavegameError):
                            raise
                        raise StepError(self.run_id, spec.name, exc) from exc
                    state = {**state, **update}
                    step += 1
                    usage = usage + ctx.usage
                    target = None if nxt == END else nxt
                    since_steps += 1
                    due = ex.policy.due(
                        steps_since=since_steps,
                        seconds_since=time.monotonic() - since_time,
                        node=spec.name,
                    )
                    if not (target is None or due or ctx.forced or spec.key):
                        continue
                    header = CheckpointHeader(
                        thread_id=start.thread_id,
                        run_id=self.run_id,
                        checkpoint_id=new_id(),
                        parent_id=parent,
                        step=step,
                        node=spec.name,
                        status=RunStatus.COMPLETED if target is None else RunStatus.RUNNING,
                        next=target,
                        usage=usage,
                        metadata=dict(ctx.metadata),
                        state_version=ex.workflow.state_version,
                    )
                    try:
                        record = codec.encode(header, state)
                    except SerializationError as exc:
                        located = exc.located(run_id=self.run_id, step=spec.name)
                        await self._fail(located)
                        raise located from None
                    await self._write(record)
                    final, parent = record, record.checkpoint_id
                    since_steps, since_time = 0, time.monotonic()
                await ex.io(self.writer.flush)
            finally:
                self.writer.close()
        await ex.io(_release, ex.store, ex.lease)
        last = final or self.last_record
        return RunResult(
            run_id=self.run_id,
            thread_id=start.thread_id,
            status=last.header.status,
            state=state,
            checkpoint_id=last.checkpoint_id,
            step=last.header.step,
            usage=usage,
        )


def _release(store: Store, lease: Lease) -> None:
    store.release_lease(lease.run_id, lease.token)


async def execute(ex: Execution) -> RunResult:
    """Drive a run from ``ex.start`` until it ends; the lease is released on every exit."""
    try:
        return await _Loop(ex).run()
    except BaseException:
        # Best effort: a stale token makes this a no-op, a dead store makes it moot
        # (the lease then expires, or a same-host resume sees this process is gone).
        with contextlib.suppress(Exception):
            await ex.io(_release, ex.store, ex.lease)
        raise


__all__ = ["Execution", "Observer", "direct_io", "execute", "threaded_io"]
