"""Approvals that expire: ``@tool(approval=True, expires=timedelta(hours=4), on_expiry=...)``.

The deadline is computed once, when the gate is first asked, and stored with the pending
approval entry (its metadata: ``expires_at``, ``on_expiry``), so it survives a restart and
every process reads the same one. Until it passes, the run does not hold a process: on a
store that keeps runs waiting (``Capabilities.waits``) it is checkpointed ``waiting`` with
the deadline as its wake-up time and an internal topic (``$approval:<request id>``) that a
person's decision sends to, so either the decision or the deadline wakes it and a worker
(or ``resume``) continues it. On other stores it is ``interrupted``, and the expiry is
applied when it is next resumed.

Once the deadline has passed, the step that asks again applies the expiry, under the
run's lease:

* ``"reject"`` (the default: deny): the entry is settled rejected, ``by="expiry"``;
  the call raises :class:`~savegame.errors.ApprovalRejected`, as after a person's reject.
* ``"escalate"``: the entry stays pending (a person may still decide, with no deadline
  now), marked ``escalated`` ``by="expiry"``, and an event on :data:`ESCALATED` is sent to
  the run, keyed by the approval, so it is sent once whoever applies the expiry.

Exactly one decision stands: both the expiry and a person settle the entry only if it
is still pending as they read it (the store checks and writes in one step), so of a
person's approve racing the expiry, the one that committed first stands and the other
finds it settled; two processes racing to resume are fenced by the lease.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from savegame.errors import ConfigurationError, EffectSettledError
from savegame.model import EffectRecord, EffectStatus, Waiting, utcnow
from savegame.signals import Pause, Suspend

if TYPE_CHECKING:
    from savegame.codec.storage import StorageConfig
    from savegame.effects._journal import Journal
    from savegame.stores.base import Store

OnExpiry = Literal["reject", "escalate"]
ON_EXPIRY: tuple[str, ...] = ("reject", "escalate")
BY_EXPIRY = "expiry"
"""Who decided, in the journal, when the deadline did."""
ESCALATED = "approval.escalated"
"""The topic of the event an ``on_expiry="escalate"`` approval sends to its run at its
deadline: ``{"tool", "interrupt_id", "expired_at"}``, keyed by the approval's id."""
WAKE_TOPIC = "$approval:"
"""Internal topic prefix: a decision on an expiring approval wakes its waiting run."""
EXPIRES_AT = "expires_at"
ON_EXPIRY_KEY = "on_expiry"
ESCALATED_KEY = "escalated"


def check_expiry(expires: Any, on_expiry: Any, approval: Any, owner: str) -> timedelta | None:
    """``expires`` as a positive timedelta (None: never), refusing what cannot work.

    Raises:
        ConfigurationError: naming ``owner`` (``tool send_refund``): ``expires`` not a
            positive timedelta, an unknown ``on_expiry``, an expiry without an approval.
    """
    if on_expiry not in ON_EXPIRY:
        raise ConfigurationError(
            f"{owner}: on_expiry must be 'reject' or 'escalate', not {on_expiry!r}"
        )
    if expires is None:
        return None
    if not isinstance(expires, timedelta) or expires <= timedelta(0):
        raise ConfigurationError(f"{owner}: expires must be a positive timedelta, not {expires!r}")
    if approval is False:
        raise ConfigurationError(f"{owner}: expires= is given but the tool needs no approval")
    return expires


def gate_metadata(expires: timedelta | None, on_expiry: str) -> dict[str, Any]:
    """What a new approval entry records about its expiry (nothing, for none)."""
    if expires is None:
        return {}
    return {EXPIRES_AT: (utcnow() + expires).isoformat(), ON_EXPIRY_KEY: on_expiry}


def deadline(metadata: Mapping[str, Any]) -> datetime | None:
    """The deadline an approval entry's metadata holds, or None (it never expires)."""
    text = metadata.get(EXPIRES_AT)
    return datetime.fromisoformat(text) if isinstance(text, str) else None


def wake_topic(approval_id: str) -> str:
    return WAKE_TOPIC + approval_id


def wait(journal: Journal, entry: EffectRecord) -> None:
    """Stop the step until ``entry`` (a pending approval) is decided or expires.

    Raises:
        Suspend: it expires, and the store can keep the run waiting until then.
        Pause: otherwise (no expiry, escalated already, or a store without waits).
    """
    due = deadline(entry.metadata)
    if (
        due is not None
        and not entry.metadata.get(ESCALATED_KEY)
        and journal.store.capabilities.waits
    ):
        raise Suspend(
            Waiting(until=due, topics=(wake_topic(entry.request_id),), need=1),
            f"approval of {entry.name} ({entry.request_id}) until {due.isoformat()}",
        )
    raise Pause(entry.request_id)


def apply_if_due(journal: Journal, entry: EffectRecord) -> EffectRecord:
    """A pending approval past its deadline, with its expiry applied; ``entry`` as it is
    when it has none or it has not passed. A decision that committed first stands: the
    entry as the store holds it then is returned."""
    due = deadline(entry.metadata)
    if due is None:
        return entry
    if entry.metadata.get(ESCALATED_KEY):
        # Sent again (keyed, so dropped if it was): a crash may have come between the
        # escalation and its event.
        _escalate(journal, entry, due)
        return entry
    now = utcnow()
    if now < due:
        return entry
    escalate = entry.metadata.get(ON_EXPIRY_KEY) == "escalate"
    meta = {"by": BY_EXPIRY, "at": now.isoformat()}
    try:
        if escalate:
            settled = journal.settle(
                entry,
                EffectStatus.PENDING,
                metadata={**meta, ESCALATED_KEY: now.isoformat()},
                expect=EffectStatus.PENDING,
            )
        else:
            return journal.settle(
                entry,
                EffectStatus.REJECTED,
                error=f"expired: no decision before its deadline {due.isoformat()}",
                metadata=meta,
                expect=EffectStatus.PENDING,
            )
    except EffectSettledError:
        # Someone decided first (a person's approve): theirs stands.
        journal.fetch([entry.kind])
        found = journal.get(entry.request_id)
        assert found is not None
        return found
    _escalate(journal, settled, due)
    return settled


def _escalate(journal: Journal, entry: EffectRecord, due: datetime) -> None:
    # Imported here: _waits imports _calls, which imports this module.
    from savegame.effects._waits import event_entry

    if not journal.store.capabilities.waits:
        return
    value = {"tool": entry.name, "interrupt_id": entry.request_id, "expired_at": due.isoformat()}
    event = event_entry(
        journal.run_id, ESCALATED, value, key=entry.request_id, by=BY_EXPIRY,
        storage=journal.storage,
    )  # fmt: skip
    # Keyed by the approval: a second process applying the same expiry sends nothing new.
    journal.store.deliver_event(event)


def wake_after_decision(store: Store, entry: EffectRecord, storage: StorageConfig | None) -> None:
    """A person decided an expiring approval: wake its run, which waits until the deadline."""
    from savegame.effects._waits import event_entry

    if deadline(entry.metadata) is None or not store.capabilities.waits:
        return
    if store.get_run(entry.run_id).status.finished:
        return
    event = event_entry(
        entry.run_id, wake_topic(entry.request_id), None, key="decided", by="decision",
        storage=storage, internal=True,
    )  # fmt: skip
    store.deliver_event(event)
