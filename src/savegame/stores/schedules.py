"""Schedules in a store: the record, and the calls a store that keeps them offers.

A schedule starts a run of one workflow at each occurrence of a cron expression. Its
row holds a cursor, ``next_at``: the earliest occurrence not handled yet. Firing is
one atomic step of the store (:meth:`ScheduleStore.fire_schedule`): the occurrences'
runs are created (queued, unowned: a worker claims them) and the cursor moves on, only
if the cursor is still where the caller read it. Of several workers (or handles) that
read the same due schedule at once, one moves the cursor and creates the runs; the
others find it moved and create nothing. The runs' ids are derived from (schedule,
occurrence), so even a cursor set back (a schedule removed and added again) cannot
start one occurrence twice: a run id that exists is left as it is.

Only stores whose :class:`~savegame.stores.base.Capabilities` claim ``schedules``
implement :class:`ScheduleStore`; :func:`schedules_of` refuses the others by name.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, cast

from savegame.errors import ConfigurationError
from savegame.model import CheckpointRecord, RunInfo
from savegame.stores._queues import Enqueue
from savegame.stores.base import Store


class Missed(str, enum.Enum):
    """What a worker does with occurrences it sees later than the catch-up window
    (every worker was down, or the schedule's workflow could not be loaded)."""

    LATEST = "latest"
    """Start the newest missed occurrence once; drop the older ones."""
    ALL = "all"
    """Start every missed occurrence, oldest first."""
    SKIP = "skip"
    """Start none of them."""


@dataclass(frozen=True, slots=True)
class ScheduleRecord:
    """One schedule as a store keeps it (``savegame.stores.schedules.ScheduleRecord``)."""

    name: str
    workflow: str
    """The workflow's name (runs are listed under it)."""
    workflow_ref: str
    """How a worker imports the workflow (``module:attr`` or ``path.py:attr``)."""
    cron: str
    """A five-field cron expression (minute hour day month weekday), in UTC."""
    input: Mapping[str, Any]
    """Each occurrence's run input: JSON data."""
    missed: Missed
    catchup_window: float
    """Seconds after its time an occurrence still starts as on time; later, it is missed."""
    next_at: datetime
    """The cursor: the earliest occurrence not handled yet (UTC)."""
    created_at: datetime
    updated_at: datetime
    paused: bool = False
    fired: int = 0
    """Runs this schedule started."""
    last_run_id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    checksum: str = ""
    """The runtime's check over what decides what runs (workflow, reference, cron, input,
    policy, queue), keyed under a keyring; the store keeps it as it is given."""
    queue: str | None = None
    """The declared queue each occurrence's run goes in (None: no queue); a store with
    ``Capabilities.queues``."""
    priority: int = 0
    """Each occurrence's priority in ``queue``."""


class ScheduleStore(Store, Protocol):
    """A store that keeps schedules (``Capabilities.schedules``)."""

    def put_schedule(self, schedule: ScheduleRecord, *, replace: bool = False) -> None:
        """Store ``schedule``; ``replace`` overwrites one of that name (its counts kept).

        Raises:
            ConflictError: a schedule of that name exists and ``replace`` is False.
        """
        ...

    def get_schedule(self, name: str) -> ScheduleRecord:
        """Raises NotFoundError for an unknown name."""
        ...

    def list_schedules(self, *, due: datetime | None = None) -> list[ScheduleRecord]:
        """Schedules by name; ``due``: only those not paused whose ``next_at`` is at or before it."""
        ...

    def delete_schedule(self, name: str) -> bool:
        """Remove the schedule (not the runs it started); False when there was none."""
        ...

    def pause_schedule(
        self, name: str, paused: bool, *, next_at: datetime | None = None
    ) -> ScheduleRecord:
        """Pause or resume; ``next_at`` (on resume) moves the cursor, so the occurrences
        of the pause are not missed ones. Returns the row as stored.

        Raises:
            NotFoundError: no schedule of that name.
        """
        ...

    def fire_schedule(
        self,
        name: str,
        *,
        expect_next: datetime,
        next_at: datetime,
        runs: Sequence[tuple[RunInfo, CheckpointRecord]] = (),
        queue: Enqueue | None = None,
    ) -> list[str] | None:
        """Create ``runs`` (queued, unowned) and move the cursor to ``next_at``, in one
        atomic step, if the schedule is not paused and its cursor is still ``expect_next``.

        A run whose id exists is left as it is (that occurrence started already).
        ``queue``: the runs go in that declared queue (a store with ``Capabilities.queues``;
        the others raise ConfigurationError, and one not declared is a NotFoundError:
        nothing created, the cursor not moved).

        Returns:
            The ids of the runs created; None when the cursor had moved (another worker
            fired these occurrences), the schedule is paused, or it is gone.
        Raises:
            ValueError: ``next_at`` is not after ``expect_next``.
        """
        ...


def schedules_of(store: Store) -> ScheduleStore:
    """``store`` as a :class:`ScheduleStore`.

    Raises:
        ConfigurationError: the store does not claim ``Capabilities.schedules``.
    """
    if not store.capabilities.schedules:
        raise ConfigurationError(
            f"the store {store.url} does not keep schedules (it does not claim "
            "Capabilities.schedules): use a SQLite, PostgreSQL or memory store"
        )
    return cast(ScheduleStore, store)


def check_fire(expect_next: datetime, next_at: datetime) -> None:
    """What every store checks before firing: the cursor only moves forward."""
    if next_at <= expect_next:
        raise ValueError(f"next_at {next_at.isoformat()} is not after {expect_next.isoformat()}")
