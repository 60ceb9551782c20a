"""What people do to runs from outside: approve, reject, supply a value, settle an in-doubt call, cancel.

Each decision is recorded in the run's journal with who gave it and when,
outside any lease (a person is not a process owning the run). Continuing the
run afterwards is an ordinary resume.
"""

from __future__ import annotations

import getpass
import logging
import socket
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from savegame.codec import decode_value, encode_value, open_entry, seal_entry, verify_entry
from savegame.codec.storage import StorageConfig
from savegame.effects._expiry import deadline, wake_after_decision
from savegame.effects._tools import tool_named
from savegame.errors import ConfigurationError, CorruptRecordError, NotFoundError, RunStateError
from savegame.model import EffectKind, EffectRecord, EffectStatus, RunStatus, utcnow
from savegame.stores.base import Store

log = logging.getLogger("savegame")


@dataclass(frozen=True, slots=True)
class PendingInterrupt:
    """A run waiting for a person."""

    run_id: str
    interrupt_id: str
    kind: EffectKind
    """APPROVAL (a gated tool call) or INTERRUPT (``ctx.interrupt``)."""
    name: str
    """The tool's name, or the interrupt's."""
    payload: Any
    """The tool's arguments, or the interrupt's payload."""
    step: int
    """The step of the checkpoint the run waits at, as ``savegame history`` numbers
    checkpoints (the run's ``RunInfo.step``): what a person looks at before deciding."""
    node: str
    """The step that asked: the one that runs next from that checkpoint."""
    created_at: Any
    expires_at: datetime | None = None
    """When an expiring approval is decided by its deadline (``on_expiry``), or None."""
    on_expiry: str | None = None
    """``"reject"`` or ``"escalate"`` for an expiring approval (``"escalated"`` once it
    has: it waits for a person with no deadline now)."""


AUTHENTICATED_AS = "authenticated_as"
"""The metadata key of the identity a front end checked (``ui-token:NAME``), beside ``by``."""


def who(by: str | None, authenticated_as: str | None) -> dict[str, str]:
    """The metadata naming who decided: ``by`` (what they said, default user@host) and,
    when a front end checked a credential, ``authenticated_as`` (which one).

    Old records hold ``by`` alone: a reader takes a missing key as "nothing was checked".
    """
    meta = {"by": by or default_actor()}
    if authenticated_as:
        meta[AUTHENTICATED_AS] = authenticated_as
    return meta


def default_actor() -> str:
    try:
        user = getpass.getuser()
    except Exception:  # no login name in some containers
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def pending(
    store: Store, run_id: str | None = None, *, storage: StorageConfig | None = None
) -> list[PendingInterrupt]:
    """Approvals and interrupts waiting for a person, oldest first (of one run or all).

    An entry that fails its check is left out with a warning naming it (it can be
    neither approved nor answered): one damaged run must not hide what the others wait for.
    """
    entries = store.list_effects(
        run_id, kinds=[EffectKind.APPROVAL, EffectKind.INTERRUPT], statuses=[EffectStatus.PENDING]
    )
    waiting = []
    for e in entries:
        try:
            payload = decode_value(open_entry(e, storage).arguments)
        except CorruptRecordError as exc:
            log.warning("left out of the pending list: %s", exc)
            continue
        # The journal numbers an entry by the step that made it, whose checkpoint is not
        # written yet: the run waits at the one before (step 2 asks, history shows 1).
        at = e.step - 1
        due = deadline(e.metadata)
        then = None
        if due is not None:
            then = "escalated" if e.metadata.get("escalated") else e.metadata.get("on_expiry")
        waiting.append(
            PendingInterrupt(
                e.run_id,
                e.request_id,
                e.kind,
                e.name,
                payload,
                at,
                e.node,
                e.created_at,
                expires_at=due,
                on_expiry=then,
            )
        )
    return waiting


def _pick(
    store: Store,
    run_id: str,
    interrupt_id: str | None,
    kinds: Sequence[EffectKind],
    storage: StorageConfig | None = None,
) -> EffectRecord:
    waiting = [p for p in pending(store, run_id, storage=storage) if p.kind in kinds]
    if interrupt_id is not None:
        for entry in waiting:
            if entry.interrupt_id == interrupt_id:
                return store.get_effect(run_id, interrupt_id)
        raise NotFoundError("pending interrupt", f"{interrupt_id} in run {run_id}")
    if not waiting:
        status = store.get_run(run_id).status
        what = " or ".join(k.value for k in kinds)
        raise RunStateError(run_id, status.value, f"find a pending {what} for")
    if len(waiting) > 1:
        ids = ", ".join(p.interrupt_id for p in waiting)
        raise ConfigurationError(f"run {run_id} has several pending interrupts ({ids}); name one")
    return store.get_effect(run_id, waiting[0].interrupt_id)


def _settle(
    store: Store,
    entry: EffectRecord,
    status: EffectStatus,
    *,
    result: Any = None,
    error: str | None = None,
    by: str | None = None,
    authenticated_as: str | None = None,
    extra: dict[str, Any] | None = None,
    storage: StorageConfig | None = None,
    expect: EffectStatus = EffectStatus.PENDING,
) -> EffectRecord:
    # Checked before it is signed again: a settle must not launder an edited entry.
    verify_entry(entry, storage)
    meta = {**who(by, authenticated_as), "at": utcnow().isoformat(), **(extra or {})}
    encoded = (
        None
        if result is None and status is not EffectStatus.DONE
        else encode_value(result, "decision")
    )
    done = seal_entry(
        replace(
            entry, status=status, result=encoded, error=error, metadata={**entry.metadata, **meta}
        ),
        storage,
    )
    return store.record_result(
        entry.run_id, entry.request_id, status=status, result=done.result, error=done.error,
        metadata=meta, checksum=done.checksum, lease_token=None,
        expect=expect,  # a decision settles a waiting entry, never overwrites one
        expect_checksum=entry.checksum,  # ... and the entry as it was verified
    )  # fmt: skip


def approve(
    store: Store,
    run_id: str,
    *,
    interrupt_id: str | None = None,
    edit: dict[str, Any] | None = None,
    by: str | None = None,
    authenticated_as: str | None = None,
    storage: StorageConfig | None = None,
) -> EffectRecord:
    """Approve a gated tool call; ``edit`` replaces the tool's arguments."""
    if edit is not None and not isinstance(edit, dict):
        raise ConfigurationError(
            f"an approval edit must be an object of arguments, not {type(edit).__name__}"
        )
    entry = _pick(store, run_id, interrupt_id, [EffectKind.APPROVAL], storage)
    if edit is not None:
        _check_edit(entry.name, edit)
    decided = _settle(
        store,
        entry,
        EffectStatus.DONE,
        result={"approved": True, "edit": edit},
        by=by,
        authenticated_as=authenticated_as,
        storage=storage,
    )
    wake_after_decision(store, decided, storage)
    return decided


def _check_edit(tool_name: str, edit: dict[str, Any]) -> None:
    """Refuse an edit the tool cannot be called with, before it is recorded: a settled
    decision cannot be taken back, so a typo in it would leave the run stuck.

    Checked when the tool is registered in this process (its module was imported).
    """
    try:
        gated = tool_named(tool_name)
    except ConfigurationError:
        return
    gated.bind((), edit)


def reject(
    store: Store,
    run_id: str,
    *,
    reason: str,
    interrupt_id: str | None = None,
    by: str | None = None,
    authenticated_as: str | None = None,
    storage: StorageConfig | None = None,
) -> EffectRecord:
    """Reject a gated tool call; the step's ``ctx.call`` raises ApprovalRejected on resume."""
    entry = _pick(store, run_id, interrupt_id, [EffectKind.APPROVAL], storage)
    decided = _settle(
        store, entry, EffectStatus.REJECTED, error=reason, by=by,
        authenticated_as=authenticated_as, storage=storage,
    )  # fmt: skip
    wake_after_decision(store, decided, storage)
    return decided


def supply(
    store: Store,
    run_id: str,
    value: Any,
    *,
    interrupt_id: str | None = None,
    by: str | None = None,
    authenticated_as: str | None = None,
    storage: StorageConfig | None = None,
) -> EffectRecord:
    """Give ``ctx.interrupt`` its value."""
    entry = _pick(store, run_id, interrupt_id, [EffectKind.INTERRUPT], storage)
    return _settle(
        store, entry, EffectStatus.DONE, result=value, by=by,
        authenticated_as=authenticated_as, storage=storage,
    )  # fmt: skip


def close(
    store: Store,
    run_id: str,
    interrupt_id: str,
    *,
    reason: str,
    by: str | None = None,
    authenticated_as: str | None = None,
    storage: StorageConfig | None = None,
) -> EffectRecord:
    """Close a pending approval or interrupt without a decision (its run was cancelled)."""
    entry = verify_entry(store.get_effect(run_id, interrupt_id), storage)
    return _settle(
        store, entry, EffectStatus.REJECTED, error=reason, by=by,
        authenticated_as=authenticated_as, storage=storage,
    )  # fmt: skip


NO_RESULT: Any = object()
"""``resolve(done=True)`` was not told what the call returned."""


def resolve(
    store: Store,
    run_id: str,
    request_id: str,
    *,
    done: bool,
    result: Any = NO_RESULT,
    by: str | None = None,
    authenticated_as: str | None = None,
    storage: StorageConfig | None = None,
) -> EffectRecord:
    """Settle an in-doubt write: it happened (with ``result``) or it did not (call again on resume).

    A compensation that failed and did not happen (its tool raised, or no tool of its
    name exists: the run is compensation_failed) may be settled done too: a person
    undid the write by hand, and the next ``compensate`` skips it.

    A write settled done needs its ``result``: the re-executed step gets it as the
    call's return value, and whether the step uses it cannot be known from here (the
    tool's code may not even be importable), so a missing one is refused, never
    recorded as null. A compensation's result goes back to no step.
    """
    entry = verify_entry(store.get_effect(run_id, request_id), storage)
    if done and result is NO_RESULT:
        if entry.kind is not EffectKind.COMPENSATION:
            raise ConfigurationError(
                f"run {run_id}: settling {request_id} as done needs what the call returned, "
                "which the step gets back (--result JSON or result=; null/None if nothing)"
            )
        result = None
    if not done and result is not NO_RESULT:
        raise ConfigurationError(
            f"run {run_id}: {request_id} settled as not done takes no result: "
            "a call that did not happen returned nothing"
        )
    by_hand = (
        done and entry.kind is EffectKind.COMPENSATION and entry.status is EffectStatus.NOT_DONE
    )
    if not by_hand and (
        entry.kind not in (EffectKind.WRITE, EffectKind.COMPENSATION)
        or entry.status is not EffectStatus.PENDING
    ):
        raise RunStateError(
            run_id, f"{entry.kind.value} entry {entry.status.value}", f"resolve {request_id} of"
        )
    if done:
        return _settle(
            store,
            entry,
            EffectStatus.DONE,
            result=result,
            by=by,
            authenticated_as=authenticated_as,
            extra={"resolved": "done"},
            storage=storage,
            expect=entry.status,
        )
    return _settle(
        store, entry, EffectStatus.NOT_DONE, by=by, authenticated_as=authenticated_as,
        extra={"resolved": "not_done"}, storage=storage,
    )  # fmt: skip


def waiting_reason(store: Store, run_id: str, storage: StorageConfig | None = None) -> str | None:
    """Why an interrupted run cannot simply continue, or None when it can."""
    if store.get_run(run_id).status is not RunStatus.INTERRUPTED:
        return None
    waiting = pending(store, run_id, storage=storage)
    if not waiting:
        return None
    first = waiting[0]
    if first.kind is EffectKind.APPROVAL:
        return f"it waits for approval of {first.name} ({first.interrupt_id}): approve or reject it"
    return f"it waits for a value for interrupt {first.name!r} ({first.interrupt_id}): resume with a value"


__all__ = [
    "AUTHENTICATED_AS",
    "NO_RESULT",
    "EffectRecord",
    "PendingInterrupt",
    "approve",
    "close",
    "default_actor",
    "pending",
    "reject",
    "resolve",
    "supply",
    "waiting_reason",
    "who",
]
