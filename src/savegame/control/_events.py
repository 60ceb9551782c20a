"""Sending an event to a run from any process (``savegame.send``, ``savegame send``).

The event is journaled in the run (``effects/_waits.py`` says how), keyed: a second send
with the same ``key`` is dropped, so a webhook retried by its sender is delivered once.
The store wakes the run in the same atomic step if it waits for the topic; a worker (or
``resume``) then continues it. A run that does not wait for it yet keeps it: its next
``ctx.wait_for`` on the topic takes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from savegame.codec.storage import StorageConfig
from savegame.effects import default_actor, event_entry
from savegame.errors import ConfigurationError, RunStateError
from savegame.runtime import woken
from savegame.stores import Store


@dataclass(frozen=True, slots=True)
class Sent:
    """What :func:`send` did."""

    run_id: str
    topic: str
    request_id: str
    """The event's journal entry (``event:<len>:<topic>:<key>``)."""
    delivered: bool
    """False when an event with this key was sent before: this one was dropped."""
    sent_at: datetime
    """When the event that stands was sent (the first one, for a duplicate)."""
    woken: bool
    """The run is woken now (it waited for this topic, or it was already woken)."""


def send(
    run_id: str,
    topic: str,
    value: Any = None,
    *,
    key: str | None = None,
    store: Store,
    storage: StorageConfig | None = None,
    by: str | None = None,
) -> Sent:
    """Send ``value`` to run ``run_id`` on ``topic``, exactly once per ``key``.

    The operation behind :meth:`savegame.Savegame.send`, which documents it, on the open
    ``store``.
    """
    if not store.capabilities.waits:
        raise ConfigurationError(
            f"the store {store.url} cannot keep a run waiting for events "
            "(it does not claim Capabilities.waits)"
        )
    info = store.get_run(run_id)
    if info.status.finished:
        raise RunStateError(run_id, info.status.value, f"send {topic!r} to")
    entry = event_entry(run_id, topic, value, key=key, by=by or default_actor(), storage=storage)
    delivery = store.deliver_event(entry)
    return Sent(
        run_id, topic, delivery.entry.request_id, delivery.delivered,
        delivery.entry.created_at, woken(store.get_run(run_id)),
    )  # fmt: skip
