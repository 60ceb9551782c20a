"""run / resume and their async twins: set up an Execution and drive it."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import Any

from savegame.codec.storage import StorageConfig
from savegame.effects import decisions
from savegame.errors import LeaseHeldError, RunStateError, describe
from savegame.model import RunResult, RunStatus, Waiting
from savegame.runtime import _lease as leases
from savegame.runtime._bridge import Io, direct_io, run_sync, store_io, threaded_io
from savegame.runtime._children import awaited
from savegame.runtime._execution import Observer
from savegame.runtime._loader import as_workflow, reference_of
from savegame.runtime._policy import CheckpointPolicy, Durability
from savegame.runtime._runner import execute
from savegame.runtime._setup import prepare_resume
from savegame.runtime._sigint import current, holding_sigint
from savegame.runtime._start import OnExists, OnThreadBusy, StartOptions, begin_run
from savegame.runtime._waiting import blocker
from savegame.stores import Store

log = logging.getLogger("savegame")

#: Marks "no value given" so that ``resume(run_id, value=None)`` can supply None.
NO_VALUE: Any = object()


async def _arun(
    workflow: Any,
    input: Mapping[str, Any] | None,
    *,
    store: Store,
    start: StartOptions,
    policy: CheckpointPolicy | None,
    durability: Durability | None,
    io: Io,
    wait: bool = False,
) -> RunResult:
    wf = as_workflow(workflow)
    io = store_io(store, io)
    began = time.perf_counter()
    ready = await io(begin_run, wf, store, input, start)
    if isinstance(ready, RunResult):
        if not (wait and ready.status is RunStatus.WAITING):
            return ready  # it exists and there is nothing to execute
        # It waits, and so does the caller: until it is woken, then on from there.
        await _hold(store, ready.run_id, io, start.ttl, start.storage)
        ready = await io(
            partial(
                prepare_resume,
                from_checkpoint=None,
                ttl=start.ttl,
                storage=start.storage,
            ),
            ready.run_id,
            store,
            wf,
        )
    observer = start.observer
    if ready.created and observer.on_checkpoint is not None:
        observer.on_checkpoint(ready.record.header, time.perf_counter() - began)
    ex = ready.execution(
        store,
        ttl=start.ttl,
        storage=start.storage,
        io=io,
        observer=observer,
        policy=policy,
        durability=durability,
        block=_blocker(store, ready.start.run_id, io, start.ttl, start.storage) if wait else None,
        sigint=current(),
    )
    return await execute(ex)


async def _aresume(
    run_id: str,
    *,
    value: Any,
    interrupt_id: str | None,
    store: Store,
    workflow: Any,
    from_checkpoint: str | None,
    policy: CheckpointPolicy | None,
    durability: Durability | None,
    observer: Observer | None,
    lease_ttl: float,
    io: Io,
    storage: StorageConfig | None,
    wait: bool = False,
) -> RunResult:
    io = store_io(store, io)
    if value is not NO_VALUE:
        await io(decisions.supply, store, run_id, value, interrupt_id=interrupt_id, storage=storage)
    if wait:
        await _hold(store, run_id, io, lease_ttl, storage)
    ready = await io(
        partial(prepare_resume, from_checkpoint=from_checkpoint, ttl=lease_ttl, storage=storage),
        run_id,
        store,
        workflow,
    )
    ex = ready.execution(
        store,
        ttl=lease_ttl,
        storage=storage,
        io=io,
        observer=observer,
        policy=policy,
        durability=durability,
        block=_blocker(store, run_id, io, lease_ttl, storage) if wait else None,
        sigint=current(),
    )
    return await execute(ex)


async def _hold(
    s: Store, run_id: str, io: Io, lease_ttl: float, storage: StorageConfig | None
) -> None:
    """Block until a run checkpointed waiting is woken (at once when it is not waiting).

    Its children run here meanwhile, as for a run that starts waiting here: a parent
    waiting since an earlier process (which stopped, or died while it ran them) has no
    one else to run them without a worker, and would wait for ever."""
    waiting = await io(awaited, s, run_id, storage)
    if waiting is not None:
        await _blocker(s, run_id, io, lease_ttl, storage)(waiting)
        sigint = current()
        if sigint is not None and sigint():
            raise KeyboardInterrupt  # nothing ran here: the run waits as it did


def _blocker(
    s: Store, run_id: str, io: Io, lease_ttl: float, storage: StorageConfig | None
) -> Callable[[Waiting], Awaitable[None]]:
    """Where a run that waits blocks (``wait=True``): until it is woken (or a Ctrl-C), its
    child runs that nobody executes run here meanwhile, each waiting here too."""

    async def drive(child: str) -> None:
        try:
            await _aresume(
                child, value=NO_VALUE, interrupt_id=None, store=s, workflow=None,
                from_checkpoint=None, policy=None, durability=None, observer=None,
                lease_ttl=lease_ttl, io=io, storage=storage, wait=True,
            )  # fmt: skip
        except (LeaseHeldError, RunStateError):
            return  # a worker took it meanwhile, or it waits for a person
        except Exception as exc:
            # The child's failure is the child's (recorded there, and its parent is told).
            log.warning("child run %s stopped: %s", child, describe(exc))

    return blocker(s, run_id, io, drive=drive, stop=current())


@holding_sigint
def run(
    workflow: Any,
    input: Mapping[str, Any] | None = None,
    *,
    thread_id: str | None = None,
    run_id: str | None = None,
    store: Store,
    metadata: Mapping[str, Any] | None = None,
    policy: CheckpointPolicy | None = None,
    durability: Durability | None = None,
    observer: Observer | None = None,
    lease_ttl: float = leases.DEFAULT_TTL,
    storage: StorageConfig | None = None,
    on_exists: OnExists = "continue",
    on_thread_busy: OnThreadBusy = "reject",
    wait: bool = False,
) -> RunResult:
    """Start a run of ``workflow`` (or continue the one ``run_id`` names) and drive it until it
    ends.

    The operation behind :meth:`savegame.Savegame.run`, which documents it, on the open
    ``store``.
    """
    return run_sync(
        _arun(
            workflow,
            input,
            store=store,
            start=_start(
                workflow,
                thread_id,
                run_id,
                metadata,
                observer,
                lease_ttl,
                storage,
                on_exists,
                on_thread_busy,
            ),
            policy=policy,
            durability=durability,
            io=direct_io,
            wait=wait,
        )
    )


def _start(
    workflow: Any,
    thread_id: str | None,
    run_id: str | None,
    metadata: Mapping[str, Any] | None,
    observer: Observer | None,
    lease_ttl: float,
    storage: StorageConfig | None,
    on_exists: OnExists,
    on_thread_busy: OnThreadBusy,
) -> StartOptions:
    return StartOptions(
        thread_id=thread_id,
        run_id=run_id,
        metadata=metadata,
        ttl=lease_ttl,
        ref=reference_of(workflow),
        storage=storage,
        on_exists=on_exists,
        on_thread_busy=on_thread_busy,
        observer=observer or Observer(),
    )


@holding_sigint
async def arun(
    workflow: Any,
    input: Mapping[str, Any] | None = None,
    *,
    thread_id: str | None = None,
    run_id: str | None = None,
    store: Store,
    metadata: Mapping[str, Any] | None = None,
    policy: CheckpointPolicy | None = None,
    durability: Durability | None = None,
    observer: Observer | None = None,
    lease_ttl: float = leases.DEFAULT_TTL,
    storage: StorageConfig | None = None,
    on_exists: OnExists = "continue",
    on_thread_busy: OnThreadBusy = "reject",
    wait: bool = False,
) -> RunResult:
    """Async twin of :func:`run`; store calls run in a worker thread. A Ctrl-C is handled as
    :func:`run` says when the event loop runs in the main thread (``asyncio.run``'s own
    handler stands aside while the run executes).

    The operation behind :meth:`savegame.Savegame.arun`, which documents it, on the open
    ``store``.
    """
    return await _arun(
        workflow,
        input,
        store=store,
        start=_start(
            workflow,
            thread_id,
            run_id,
            metadata,
            observer,
            lease_ttl,
            storage,
            on_exists,
            on_thread_busy,
        ),
        policy=policy,
        durability=durability,
        io=threaded_io,
        wait=wait,
    )


@holding_sigint
def resume(
    run_id: str,
    *,
    value: Any = NO_VALUE,
    interrupt_id: str | None = None,
    store: Store,
    workflow: Any = None,
    from_checkpoint: str | None = None,
    policy: CheckpointPolicy | None = None,
    durability: Durability | None = None,
    observer: Observer | None = None,
    lease_ttl: float = leases.DEFAULT_TTL,
    storage: StorageConfig | None = None,
    wait: bool = False,
) -> RunResult:
    """Continue a run from its latest checkpoint (or ``from_checkpoint``), loaded from the
    store only.

    The operation behind :meth:`savegame.Savegame.resume`, which documents it, on the open
    ``store``.
    """
    return run_sync(
        _aresume(
            run_id,
            value=value,
            interrupt_id=interrupt_id,
            store=store,
            workflow=workflow,
            from_checkpoint=from_checkpoint,
            policy=policy,
            durability=durability,
            observer=observer,
            lease_ttl=lease_ttl,
            io=direct_io,
            storage=storage,
            wait=wait,
        )
    )


@holding_sigint
async def aresume(
    run_id: str,
    *,
    value: Any = NO_VALUE,
    interrupt_id: str | None = None,
    store: Store,
    workflow: Any = None,
    from_checkpoint: str | None = None,
    policy: CheckpointPolicy | None = None,
    durability: Durability | None = None,
    observer: Observer | None = None,
    lease_ttl: float = leases.DEFAULT_TTL,
    storage: StorageConfig | None = None,
    wait: bool = False,
) -> RunResult:
    """Async twin of :func:`resume` (a Ctrl-C as :func:`arun` says).

    The operation behind :meth:`savegame.Savegame.aresume`, which documents it, on the open
    ``store``.
    """
    return await _aresume(
        run_id,
        value=value,
        interrupt_id=interrupt_id,
        store=store,
        workflow=workflow,
        from_checkpoint=from_checkpoint,
        policy=policy,
        durability=durability,
        observer=observer,
        lease_ttl=lease_ttl,
        io=threaded_io,
        storage=storage,
        wait=wait,
    )
