"""Acting on runs from outside: cancel, compensate, approve, reject, resolve, and reading the journal."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from savegame import codec
from savegame.codec import decode_value, open_entry
from savegame.codec.storage import StorageConfig
from savegame.effects import decisions, parent_of, run_compensation
from savegame.errors import EffectSettledError, LeaseHeldError, RunStateError
from savegame.model import EffectKind, EffectStatus, Lease, RunInfo, RunResult, RunStatus
from savegame.runtime import _lease as leases
from savegame.runtime._children import children_of, ending
from savegame.runtime._decision import Decision, continue_after
from savegame.runtime._execution import Observer
from savegame.runtime._loader import load
from savegame.stores import opened_store
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
    run_id: str, *, store: Store | str | None = None, storage: StorageConfig | None = None
) -> list[Effect]:
    """A run's journal, oldest first, verified, decrypted and decoded."""
    with opened_store(store, create=False) as s:
        s.get_run(run_id)
        entries = [open_entry(e, storage) for e in s.list_effects(run_id, limit=ALL_EFFECTS)]
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
    store: Store | str | None = None,
    storage: StorageConfig | None = None,
) -> list[decisions.PendingInterrupt]:
    """Approvals and interrupts waiting for a person (of one run, or of every run)."""
    with opened_store(store, create=False) as s:
        return decisions.pending(s, run_id, storage=storage)


def _import_tools(info: RunInfo, storage: StorageConfig | None) -> None:
    # Compensating tools register themselves when their module is imported; the row is
    # checked first, so an edited reference is never imported.
    codec.verify_run(info, storage)
    if info.workflow_ref is not None:
        load(info.workflow_ref)


def compensate(
    run_id: str,
    *,
    store: Store | str | None = None,
    lease_ttl: float = leases.DEFAULT_TTL,
    storage: StorageConfig | None = None,
) -> RunResult:
    """Undo the run's completed write effects that declared a compensation, newest first.

    Exactly once across crashes: run it again after a crash and it continues.

    Raises:
        CompensationError: a compensation failed; the run is compensation_failed.
        LeaseHeldError: a live process is executing the run (cancel it first).
    """
    with opened_store(store, create=False) as s:
        _import_tools(s.get_run(run_id), storage)
        lease = leases.acquire(s, run_id, ttl=lease_ttl)
        try:
            with leases.Heartbeat(s, lease, lease_ttl):
                return run_compensation(s, run_id, lease, storage=storage)
        finally:
            s.release_lease(run_id, lease.token)


def cancel(
    run_id: str,
    *,
    store: Store | str | None = None,
    compensate_effects: bool = False,
    wait: float = 30.0,
    by: str | None = None,
    authenticated_as: str | None = None,
    lease_ttl: float = leases.DEFAULT_TTL,
    storage: StorageConfig | None = None,
) -> RunInfo:
    """Ask a run to stop; from any process.

    A run being executed stops at its next step boundary or ``ctx.call`` and
    writes a ``cancelled`` checkpoint; a run that nobody executes (interrupted,
    waiting, failed, orphaned) is marked cancelled here and now. The child runs it
    started are cancelled the same way, theirs too, and with ``compensate_effects``
    each one's completed writes are then compensated, the children's first.

    Args:
        by: who asks (default: user@host): the ``cancelled`` checkpoint written here
            names them (``metadata["cancelled_by"]``), and so do the approvals and
            interrupts it closes. A run a live process executes writes its own
            ``cancelled`` checkpoint, which cannot know who asked.
        authenticated_as: the identity a front end checked for the request (the web
            UI's ``ui-token:NAME``), recorded beside ``by`` wherever ``by`` is.

    Returns:
        The run's row afterwards (``cancel_requested`` stays set if a live
        owner did not stop within ``wait`` seconds).

    Raises:
        RunStateError: the run has finished, or its owner finished it while this
            call waited (the request came during its last step).
    """
    with opened_store(store, create=False) as s:
        info = s.get_run(run_id)
        if info.status.finished and info.status is not RunStatus.CANCELLED:
            raise RunStateError(run_id, info.status.value, "cancel")
        s.request_cancel(run_id)
        deadline = time.monotonic() + wait
        while info.status is not RunStatus.CANCELLED:
            try:
                lease = leases.acquire(s, run_id, ttl=lease_ttl)
            except LeaseHeldError:
                if time.monotonic() > deadline:
                    return s.get_run(run_id)
                time.sleep(0.05)  # the owner stops at its next boundary
                info = s.get_run(run_id)
                continue
            try:
                _mark_cancelled(s, run_id, lease, storage, by, authenticated_as)
            finally:
                s.release_lease(run_id, lease.token)
            info = s.get_run(run_id)
        # A cancelled run waits for nobody: close its open approvals and interrupts.
        for waiting in decisions.pending(s, run_id, storage=storage):
            try:
                decisions.close(
                    s, run_id, waiting.interrupt_id, reason="run cancelled", by=by,
                    authenticated_as=authenticated_as, storage=storage,
                )  # fmt: skip
            except EffectSettledError:
                continue  # decided meanwhile: the run is cancelled either way
        for child in children_of(s, run_id, storage):
            try:
                cancel(
                    child, store=s, compensate_effects=compensate_effects, wait=wait, by=by,
                    authenticated_as=authenticated_as, lease_ttl=lease_ttl, storage=storage,
                )  # fmt: skip
            except RunStateError:
                continue  # it had ended: it keeps its ending
        if compensate_effects:
            compensate(run_id, store=s, lease_ttl=lease_ttl, storage=storage)
        return s.get_run(run_id)


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
        told = ending(parent_of(info.metadata), run_id, RunStatus.CANCELLED, storage=storage)
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
    store: Store | str | None = None,
    storage: StorageConfig | None = None,
    resume: bool = True,
    workflow: Any = None,
    observer: Observer | None = None,
    lease_ttl: float = leases.DEFAULT_TTL,
) -> Decision:
    """Record approval of a gated tool call (``edit`` replaces its arguments), then
    continue the run here if its workflow loads here.

    An edit is checked against the tool's signature first (the workflow's module is
    imported from the run's reference to find the tool), so it cannot leave the run stuck.

    Args:
        by: who decides, as they say (default: user@host), recorded with the decision.
        authenticated_as: the identity a front end checked for the request (the web
            UI's ``ui-token:NAME``), recorded beside ``by``; None: nothing was checked.
        resume: continue the run in this process once the decision is recorded, where
            its workflow loads (``workflow``, or its stored reference imports here).
            Where it does not, or with ``resume=False``, the run is queued for the
            worker fleet instead; a ``savegame worker`` or :func:`resume` continues it.
        workflow: the Workflow or Agent to continue with (default: imported from the
            reference stored with the run).
        observer: callbacks while the run continues here.

    Returns:
        The decision as recorded, and where the run ended if it was continued here
        (or the error that stopped it, or why it was not continued).

    Raises:
        NotFoundError, RunStateError, EffectSettledError: the decision was not recorded
            (no such run or pending approval; someone decided first).
    """
    with opened_store(store, create=False) as s:
        if edit is not None:
            _import_tools(s.get_run(run_id), storage)
        entry = decisions.approve(
            s, run_id, interrupt_id=interrupt_id, edit=edit, by=by,
            authenticated_as=authenticated_as, storage=storage,
        )  # fmt: skip
        return continue_after(
            s, entry, resume_run=resume, workflow=workflow, observer=observer,
            lease_ttl=lease_ttl, storage=storage,
        )  # fmt: skip


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
    lease_ttl: float = leases.DEFAULT_TTL,
) -> Decision:
    """Give a run's pending ``ctx.interrupt`` its value (which the step's call returns),
    recorded with who gave it; then continue the run here if its workflow loads here.

    ``resume(run_id, value=...)`` does the same in one call where the workflow is at
    hand; this one is for a person answering from elsewhere (the web UI, an approval
    service), like :func:`approve`: ``resume`` and the rest as there.

    Raises:
        NotFoundError, RunStateError, EffectSettledError: the value was not recorded
            (no such run, or it waits for no interrupt; someone answered first).
        SerializationError: ``value`` is not pure data.
    """
    with opened_store(store, create=False) as s:
        entry = decisions.supply(
            s, run_id, value, interrupt_id=interrupt_id, by=by,
            authenticated_as=authenticated_as, storage=storage,
        )  # fmt: skip
        return continue_after(
            s, entry, resume_run=resume, workflow=workflow, observer=observer,
            lease_ttl=lease_ttl, storage=storage,
        )  # fmt: skip


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
    lease_ttl: float = leases.DEFAULT_TTL,
) -> Decision:
    """Record rejection of a gated tool call (its ``ctx.call`` raises ApprovalRejected), then
    continue the run here if its workflow loads here; ``resume`` and the rest as for
    :func:`approve`."""
    with opened_store(store, create=False) as s:
        entry = decisions.reject(
            s, run_id, reason=reason, interrupt_id=interrupt_id, by=by,
            authenticated_as=authenticated_as, storage=storage,
        )  # fmt: skip
        return continue_after(
            s, entry, resume_run=resume, workflow=workflow, observer=observer,
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
    store: Store | str | None = None,
    storage: StorageConfig | None = None,
) -> decisions.EffectRecord:
    """Settle an in-doubt call: it happened (``done=True``, with its ``result``) or it did not.

    With ``done=True`` on a write, ``result`` is required (``result=None`` must be
    said): the re-executed step gets it as the call's return value.

    Raises:
        ConfigurationError: a write settled done without ``result``.
    """
    with opened_store(store, create=False) as s:
        return decisions.resolve(
            s, run_id, request_id, done=done, result=result, by=by,
            authenticated_as=authenticated_as, storage=storage,
        )  # fmt: skip
