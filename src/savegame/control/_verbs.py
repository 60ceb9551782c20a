"""Acting on runs from outside: cancel, compensate, approve, reject, resolve, and reading the journal."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from savegame import codec
from savegame.codec import decode_value, open_entry
from savegame.codec.storage import StorageConfig
from savegame.control._decision import Decision, continue_after
from savegame.effects import decisions, parent_of, run_compensation
from savegame.errors import EffectSettledError, LeaseHeldError, RunStateError
from savegame.model import EffectKind, EffectStatus, Lease, RunInfo, RunResult, RunStatus
from savegame.runtime import (
    DEFAULT_TTL,
    Heartbeat,
    Observer,
    acquire_lease,
    children_of,
    events_for_parent,
    load,
)
from savegame.stores.base import ALL_EFFECTS, Store


@dataclass(frozen=True, slots=True)
class Effect:
    """A decoded journal entry, for people and tools."""

    run_id: str
    request_id: str
    kind: EffectKind
    name: str
    step: int
    node: str
    status: EffectStatus
    arguments: Any
    result: Any
    error: str | None
    metadata: dict[str, Any]
    created_at: datetime
    completed_at: datetime | None


def list_effects(
    run_id: str, *, store: Store, storage: StorageConfig | None = None
) -> list[Effect]:
    """A run's journal, oldest first, verified, decrypted and decoded.

    The operation behind :meth:`savegame.Savegame.effects`, which documents it, on the open
    ``store``.
    """
    store.get_run(run_id)
    entries = [open_entry(e, storage) for e in store.list_effects(run_id, limit=ALL_EFFECTS)]
    return [
        Effect(
            e.run_id,
            e.request_id,
            e.kind,
            e.name,
            e.step,
            e.node,
            e.status,
            decode_value(e.arguments),
            decode_value(e.result),
            e.error,
            dict(e.metadata),
            e.created_at,
            e.completed_at,
        )
        for e in entries
    ]


def pending_interrupts(
    run_id: str | None = None,
    *,
    store: Store,
    storage: StorageConfig | None = None,
) -> list[decisions.PendingInterrupt]:
    """Approvals and interrupts waiting for a person (of one run, or of every run).

    The operation behind :meth:`savegame.Savegame.pending`, which documents it, on the open
    ``store``.
    """
    return decisions.pending(store, run_id, storage=storage)


def _import_tools(info: RunInfo, storage: StorageConfig | None) -> None:
    # Compensating tools register themselves when their module is imported; the row is
    # checked first, so an edited reference is never imported.
    codec.verify_run(info, storage)
    if info.workflow_ref is not None:
        load(info.workflow_ref)


def compensate(
    run_id: str,
    *,
    store: Store,
    lease_ttl: float = DEFAULT_TTL,
    storage: StorageConfig | None = None,
) -> RunResult:
    """Undo the run's completed write effects that declared a compensation, newest first.

    The operation behind :meth:`savegame.Savegame.compensate`, which documents it, on the
    open ``store``.
    """
    _import_tools(store.get_run(run_id), storage)
    lease = acquire_lease(store, run_id, ttl=lease_ttl)
    try:
        with Heartbeat(store, lease, lease_ttl):
            return run_compensation(store, run_id, lease, storage=storage)
    finally:
        store.release_lease(run_id, lease.token)


def cancel(
    run_id: str,
    *,
    store: Store,
    compensate_effects: bool = False,
    wait: float = 30.0,
    by: str | None = None,
    authenticated_as: str | None = None,
    lease_ttl: float = DEFAULT_TTL,
    storage: StorageConfig | None = None,
) -> RunInfo:
    """Ask a run to stop; from any process.

    The operation behind :meth:`savegame.Savegame.cancel`, which documents it, on the open
    ``store``.
    """
    info = store.get_run(run_id)
    if info.status.finished and info.status is not RunStatus.CANCELLED:
        raise RunStateError(run_id, info.status.value, "cancel")
    store.request_cancel(run_id)
    deadline = time.monotonic() + wait
    while info.status is not RunStatus.CANCELLED:
        try:
            lease = acquire_lease(store, run_id, ttl=lease_ttl)
        except LeaseHeldError:
            if time.monotonic() > deadline:
                return store.get_run(run_id)
            time.sleep(0.05)  # the owner stops at its next boundary
            info = store.get_run(run_id)
            continue
        try:
            _mark_cancelled(store, run_id, lease, storage, by, authenticated_as)
        finally:
            store.release_lease(run_id, lease.token)
        info = store.get_run(run_id)
    # A cancelled run waits for nobody: close its open approvals and interrupts.
    for waiting in decisions.pending(store, run_id, storage=storage):
        try:
            decisions.close(
                store, run_id, waiting.interrupt_id, reason="run cancelled", by=by,
                authenticated_as=authenticated_as, storage=storage,
            )  # fmt: skip
        except EffectSettledError:
            continue  # decided meanwhile: the run is cancelled either way
    for child in children_of(store, run_id, storage):
        try:
            cancel(
                child, store=store, compensate_effects=compensate_effects, wait=wait, by=by,
                authenticated_as=authenticated_as, lease_ttl=lease_ttl, storage=storage,
            )  # fmt: skip
        except RunStateError:
            continue  # it had ended: it keeps its ending
    if compensate_effects:
        compensate(run_id, store=store, lease_ttl=lease_ttl, storage=storage)
    return store.get_run(run_id)


def _mark_cancelled(
    s: Store,
    run_id: str,
    lease: Lease,
    storage: StorageConfig | None,
    by: str | None,
    authenticated_as: str | None,
) -> None:
    """Mark a run that nobody executes cancelled, holding its ``lease``."""
    info = s.get_run(run_id)
    if info.status.finished and info.status is not RunStatus.CANCELLED:
        # Its owner ended it (the request came during the last step, after the
        # last boundary): a finished run keeps its own ending.
        raise RunStateError(run_id, info.status.value, "cancel")
    if info.status is not RunStatus.CANCELLED:
        head = s.latest_checkpoint(run_id)
        codec.check_head(info, head)
        said = {"cancelled_by": by or decisions.default_actor()}
        if authenticated_as:
            said[decisions.AUTHENTICATED_AS] = authenticated_as
        record = codec.marker(head, RunStatus.CANCELLED, said, storage)
        # A child's parent hears of it in the same write.
        told = events_for_parent(
            parent_of(info.metadata), run_id, RunStatus.CANCELLED, storage=storage
        )
        if told:
            s.put_checkpoint(record, lease_token=lease.token, events=told)
        else:
            s.put_checkpoint(record, lease_token=lease.token)


def approve(
    run_id: str,
    *,
    interrupt_id: str | None = None,
    edit: dict[str, Any] | None = None,
    by: str | None = None,
    authenticated_as: str | None = None,
    store: Store,
    storage: StorageConfig | None = None,
    resume: bool = True,
    workflow: Any = None,
    observer: Observer | None = None,
    lease_ttl: float = DEFAULT_TTL,
) -> Decision:
    """Record approval of a gated tool call (``edit`` replaces its arguments), then continue
    the run here if its workflow loads here.

    The operation behind :meth:`savegame.Savegame.approve`, which documents it, on the open
    ``store``.
    """
    if edit is not None:
        _import_tools(store.get_run(run_id), storage)
    entry = decisions.approve(
        store, run_id, interrupt_id=interrupt_id, edit=edit, by=by,
        authenticated_as=authenticated_as, storage=storage,
    )  # fmt: skip
    return continue_after(
        store, entry, resume_run=resume, workflow=workflow, observer=observer,
        lease_ttl=lease_ttl, storage=storage,
    )  # fmt: skip


def supply(
    run_id: str,
    value: Any,
    *,
    interrupt_id: str | None = None,
    by: str | None = None,
    authenticated_as: str | None = None,
    store: Store,
    storage: StorageConfig | None = None,
    resume: bool = True,
    workflow: Any = None,
    observer: Observer | None = None,
    lease_ttl: float = DEFAULT_TTL,
) -> Decision:
    """Give a run's pending ``ctx.interrupt`` its value (which the step's call returns),
    recorded with who gave it; then continue the run here if its workflow loads here.

    The operation behind :meth:`savegame.Savegame.supply`, which documents it, on the open
    ``store``.
    """
    entry = decisions.supply(
        store, run_id, value, interrupt_id=interrupt_id, by=by,
        authenticated_as=authenticated_as, storage=storage,
    )  # fmt: skip
    return continue_after(
        store, entry, resume_run=resume, workflow=workflow, observer=observer,
        lease_ttl=lease_ttl, storage=storage,
    )  # fmt: skip


def reject(
    run_id: str,
    *,
    reason: str,
    interrupt_id: str | None = None,
    by: str | None = None,
    authenticated_as: str | None = None,
    store: Store,
    storage: StorageConfig | None = None,
    resume: bool = True,
    workflow: Any = None,
    observer: Observer | None = None,
    lease_ttl: float = DEFAULT_TTL,
) -> Decision:
    """Record rejection of a gated tool call (its ``ctx.call`` raises ApprovalRejected), then
    continue the run here if its workflow loads here; ``resume`` and the rest as for
    :func:`approve`.

    The operation behind :meth:`savegame.Savegame.reject`, which documents it, on the open
    ``store``.
    """
    entry = decisions.reject(
        store, run_id, reason=reason, interrupt_id=interrupt_id, by=by,
        authenticated_as=authenticated_as, storage=storage,
    )  # fmt: skip
    return continue_after(
        store, entry, resume_run=resume, workflow=workflow, observer=observer,
        lease_ttl=lease_ttl, storage=storage,
    )  # fmt: skip


def resolve(
    run_id: str,
    request_id: str,
    *,
    done: bool,
    result: Any = decisions.NO_RESULT,
    by: str | None = None,
    authenticated_as: str | None = None,
    store: Store,
    storage: StorageConfig | None = None,
) -> decisions.EffectRecord:
    """Settle an in-doubt call: it happened (``done=True``, with its ``result``) or it did not.

    The operation behind :meth:`savegame.Savegame.resolve`, which documents it, on the open
    ``store``.
    """
    return decisions.resolve(
        store, run_id, request_id, done=done, result=result, by=by,
        authenticated_as=authenticated_as, storage=storage,
    )  # fmt: skip
