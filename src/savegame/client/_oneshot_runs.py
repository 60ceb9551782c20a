"""The module functions that start, continue, stop and decide runs: each is one call of a
:class:`Savegame` method on a handle opened for it (``savegame.run(wf, store=URL)`` is
``with connect(URL) as sg: sg.run(wf)``).

They take the method's parameters plus ``store`` (and ``storage`` where the operation
reads or writes records), as they always did; the methods document what they do. As
before the handle, those that start something (run, submit, fork) make a missing SQLite
store; the others refuse it. tests/client/test_parity.py keeps each function's
parameters equal to its method's; _oneshot_store.py has the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from savegame.client._handle import connect
from savegame.codec.storage import StorageConfig
from savegame.control import Decision, ForkResult, Sent
from savegame.effects import Mode, PendingInterrupt, decisions
from savegame.model import (
    EffectRecord,
    RunInfo,
    RunResult,
)
from savegame.runtime import (
    DEFAULT_TTL,
    NO_VALUE,
    CheckpointPolicy,
    Durability,
    Observer,
    OnExists,
    OnThreadBusy,
)
from savegame.stores import Store


def run(
    workflow: Any,
    input: Mapping[str, Any] | None = None,
    *,
    thread_id: str | None = None,
    run_id: str | None = None,
    store: Store | str | None = None,
    metadata: Mapping[str, Any] | None = None,
    policy: CheckpointPolicy | None = None,
    durability: Durability | None = None,
    observer: Observer | None = None,
    lease_ttl: float = DEFAULT_TTL,
    storage: StorageConfig | None = None,
    on_exists: OnExists = "continue",
    on_thread_busy: OnThreadBusy = "reject",
    wait: bool = False,
) -> RunResult:
    """Start a run of ``workflow`` (or continue the one ``run_id`` names) and drive it until it
    ends.

    One call of :meth:`Savegame.run` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is created.
    """
    with connect(store, storage=storage) as sg:
        return sg.run(
            workflow,
            input,
            thread_id=thread_id,
            run_id=run_id,
            metadata=metadata,
            policy=policy,
            durability=durability,
            observer=observer,
            lease_ttl=lease_ttl,
            on_exists=on_exists,
            on_thread_busy=on_thread_busy,
            wait=wait,
        )


async def arun(
    workflow: Any,
    input: Mapping[str, Any] | None = None,
    *,
    thread_id: str | None = None,
    run_id: str | None = None,
    store: Store | str | None = None,
    metadata: Mapping[str, Any] | None = None,
    policy: CheckpointPolicy | None = None,
    durability: Durability | None = None,
    observer: Observer | None = None,
    lease_ttl: float = DEFAULT_TTL,
    storage: StorageConfig | None = None,
    on_exists: OnExists = "continue",
    on_thread_busy: OnThreadBusy = "reject",
    wait: bool = False,
) -> RunResult:
    """Async twin of :meth:`Savegame.run`; store calls run in a worker thread. A Ctrl-C is
    handled as :meth:`Savegame.run` says when the event loop runs in the main thread
    (``asyncio.run``'s own handler stands aside while the run executes).

    One call of :meth:`Savegame.arun` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is created.
    """
    with connect(store, storage=storage) as sg:
        return await sg.arun(
            workflow,
            input,
            thread_id=thread_id,
            run_id=run_id,
            metadata=metadata,
            policy=policy,
            durability=durability,
            observer=observer,
            lease_ttl=lease_ttl,
            on_exists=on_exists,
            on_thread_busy=on_thread_busy,
            wait=wait,
        )


def resume(
    run_id: str,
    *,
    value: Any = NO_VALUE,
    interrupt_id: str | None = None,
    store: Store | str | None = None,
    workflow: Any = None,
    from_checkpoint: str | None = None,
    policy: CheckpointPolicy | None = None,
    durability: Durability | None = None,
    observer: Observer | None = None,
    lease_ttl: float = DEFAULT_TTL,
    storage: StorageConfig | None = None,
    wait: bool = False,
) -> RunResult:
    """Continue a run from its latest checkpoint (or ``from_checkpoint``), loaded from the
    store only.

    One call of :meth:`Savegame.resume` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is refused.
    """
    with connect(store, storage=storage, create=False) as sg:
        return sg.resume(
            run_id,
            value=value,
            interrupt_id=interrupt_id,
            workflow=workflow,
            from_checkpoint=from_checkpoint,
            policy=policy,
            durability=durability,
            observer=observer,
            lease_ttl=lease_ttl,
            wait=wait,
        )


async def aresume(
    run_id: str,
    *,
    value: Any = NO_VALUE,
    interrupt_id: str | None = None,
    store: Store | str | None = None,
    workflow: Any = None,
    from_checkpoint: str | None = None,
    policy: CheckpointPolicy | None = None,
    durability: Durability | None = None,
    observer: Observer | None = None,
    lease_ttl: float = DEFAULT_TTL,
    storage: StorageConfig | None = None,
    wait: bool = False,
) -> RunResult:
    """Async twin of :meth:`Savegame.resume` (a Ctrl-C as :meth:`Savegame.arun` says).

    One call of :meth:`Savegame.aresume` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is refused.
    """
    with connect(store, storage=storage, create=False) as sg:
        return await sg.aresume(
            run_id,
            value=value,
            interrupt_id=interrupt_id,
            workflow=workflow,
            from_checkpoint=from_checkpoint,
            policy=policy,
            durability=durability,
            observer=observer,
            lease_ttl=lease_ttl,
            wait=wait,
        )


def submit(
    workflow: Any,
    input: Mapping[str, Any] | None = None,
    *,
    thread_id: str | None = None,
    run_id: str | None = None,
    store: Store | str | None = None,
    metadata: Mapping[str, Any] | None = None,
    storage: StorageConfig | None = None,
    on_exists: OnExists = "continue",
    on_thread_busy: OnThreadBusy = "reject",
    observer: Observer | None = None,
    queue: str | None = None,
    priority: int = 0,
    dedup_key: str | None = None,
) -> RunInfo:
    """Queue a run for the worker fleet (``savegame worker``) instead of running it here.

    One call of :meth:`Savegame.submit` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is created.
    """
    with connect(store, storage=storage) as sg:
        return sg.submit(
            workflow,
            input,
            thread_id=thread_id,
            run_id=run_id,
            metadata=metadata,
            on_exists=on_exists,
            on_thread_busy=on_thread_busy,
            observer=observer,
            queue=queue,
            priority=priority,
            dedup_key=dedup_key,
        )


def fork(
    checkpoint_id: str,
    *,
    update: Mapping[str, Any] | None = None,
    set: Mapping[str, Any] | None = None,
    reason: str | None = None,
    by: str | None = None,
    authenticated_as: str | None = None,
    mode: Mode = "replay",
    run: bool = True,
    store: Store | str | None = None,
    workflow: Any = None,
    observer: Observer | None = None,
    lease_ttl: float = DEFAULT_TTL,
    storage: StorageConfig | None = None,
) -> ForkResult:
    """Start a new run of the same thread from ``checkpoint_id``, optionally edited, and run
    it.

    One call of :meth:`Savegame.fork` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is created.
    """
    with connect(store, storage=storage) as sg:
        return sg.fork(
            checkpoint_id,
            update=update,
            set=set,
            reason=reason,
            by=by,
            authenticated_as=authenticated_as,
            mode=mode,
            run=run,
            workflow=workflow,
            observer=observer,
            lease_ttl=lease_ttl,
        )


def send(
    run_id: str,
    topic: str,
    value: Any = None,
    *,
    key: str | None = None,
    store: Store | str | None = None,
    storage: StorageConfig | None = None,
    by: str | None = None,
) -> Sent:
    """Send ``value`` to run ``run_id`` on ``topic``, exactly once per ``key``.

    One call of :meth:`Savegame.send` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is refused.
    """
    with connect(store, storage=storage, create=False) as sg:
        return sg.send(run_id, topic, value, key=key, by=by)


def cancel(
    run_id: str,
    *,
    store: Store | str | None = None,
    compensate_effects: bool = False,
    wait: float = 30.0,
    by: str | None = None,
    authenticated_as: str | None = None,
    lease_ttl: float = DEFAULT_TTL,
    storage: StorageConfig | None = None,
) -> RunInfo:
    """Ask a run to stop; from any process.

    One call of :meth:`Savegame.cancel` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is refused.
    """
    with connect(store, storage=storage, create=False) as sg:
        return sg.cancel(
            run_id,
            compensate_effects=compensate_effects,
            wait=wait,
            by=by,
            authenticated_as=authenticated_as,
            lease_ttl=lease_ttl,
        )


def compensate(
    run_id: str,
    *,
    store: Store | str | None = None,
    lease_ttl: float = DEFAULT_TTL,
    storage: StorageConfig | None = None,
) -> RunResult:
    """Undo the run's completed write effects that declared a compensation, newest first.

    One call of :meth:`Savegame.compensate` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is refused.
    """
    with connect(store, storage=storage, create=False) as sg:
        return sg.compensate(run_id, lease_ttl=lease_ttl)


def pending_interrupts(
    run_id: str | None = None,
    *,
    store: Store | str | None = None,
    storage: StorageConfig | None = None,
) -> list[PendingInterrupt]:
    """Approvals and interrupts waiting for a person (of one run, or of every run).

    One call of :meth:`Savegame.pending` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is refused.
    """
    with connect(store, storage=storage, create=False) as sg:
        return sg.pending(run_id)


def approve(
    run_id: str,
    *,
    interrupt_id: str | None = None,
    edit: dict[str, Any] | None = None,
    by: str | None = None,
    authenticated_as: str | None = None,
    store: Store | str | None = None,
    storage: StorageConfig | None = None,
    resume: bool = True,
    workflow: Any = None,
    observer: Observer | None = None,
    lease_ttl: float = DEFAULT_TTL,
) -> Decision:
    """Record approval of a gated tool call (``edit`` replaces its arguments), then continue
    the run here if its workflow loads here.

    One call of :meth:`Savegame.approve` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is refused.
    """
    with connect(store, storage=storage, create=False) as sg:
        return sg.approve(
            run_id,
            interrupt_id=interrupt_id,
            edit=edit,
            by=by,
            authenticated_as=authenticated_as,
            resume=resume,
            workflow=workflow,
            observer=observer,
            lease_ttl=lease_ttl,
        )


def reject(
    run_id: str,
    *,
    reason: str,
    interrupt_id: str | None = None,
    by: str | None = None,
    authenticated_as: str | None = None,
    store: Store | str | None = None,
    storage: StorageConfig | None = None,
    resume: bool = True,
    workflow: Any = None,
    observer: Observer | None = None,
    lease_ttl: float = DEFAULT_TTL,
) -> Decision:
    """Record rejection of a gated tool call (its ``ctx.call`` raises ApprovalRejected), then
    continue the run here if its workflow loads here; ``resume`` and the rest as for
    :meth:`Savegame.approve`.

    One call of :meth:`Savegame.reject` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is refused.
    """
    with connect(store, storage=storage, create=False) as sg:
        return sg.reject(
            run_id,
            reason=reason,
            interrupt_id=interrupt_id,
            by=by,
            authenticated_as=authenticated_as,
            resume=resume,
            workflow=workflow,
            observer=observer,
            lease_ttl=lease_ttl,
        )


def supply(
    run_id: str,
    value: Any,
    *,
    interrupt_id: str | None = None,
    by: str | None = None,
    authenticated_as: str | None = None,
    store: Store | str | None = None,
    storage: StorageConfig | None = None,
    resume: bool = True,
    workflow: Any = None,
    observer: Observer | None = None,
    lease_ttl: float = DEFAULT_TTL,
) -> Decision:
    """Give a run's pending ``ctx.interrupt`` its value (which the step's call returns),
    recorded with who gave it; then continue the run here if its workflow loads here.

    One call of :meth:`Savegame.supply` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is refused.
    """
    with connect(store, storage=storage, create=False) as sg:
        return sg.supply(
            run_id,
            value,
            interrupt_id=interrupt_id,
            by=by,
            authenticated_as=authenticated_as,
            resume=resume,
            workflow=workflow,
            observer=observer,
            lease_ttl=lease_ttl,
        )


def resolve(
    run_id: str,
    request_id: str,
    *,
    done: bool,
    result: Any = decisions.NO_RESULT,
    by: str | None = None,
    authenticated_as: str | None = None,
    store: Store | str | None = None,
    storage: StorageConfig | None = None,
) -> EffectRecord:
    """Settle an in-doubt call: it happened (``done=True``, with its ``result``) or it did not.

    One call of :meth:`Savegame.resolve` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is refused.
    """
    with connect(store, storage=storage, create=False) as sg:
        return sg.resolve(
            run_id, request_id, done=done, result=result, by=by, authenticated_as=authenticated_as
        )
