"""Schedules in the memory store (``Capabilities.schedules`` within one process).

A lock of their own makes each call one atomic step: :meth:`fire_schedule` checks the
cursor, creates the runs through the store's ``create_run`` and moves the cursor while
holding it, so of several threads firing one occurrence one creates its run.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import cast

from savegame.errors import ConflictError, NotFoundError
from savegame.model import CheckpointRecord, RunInfo, utcnow
from savegame.stores import _common
from savegame.stores._queues import Enqueue, queue_store
from savegame.stores.base import Store
from savegame.stores.schedules import ScheduleRecord, check_fire


class MemorySchedules:
    """The schedule calls of :class:`~savegame.stores.schedules.ScheduleStore` in dictionaries."""

    def __init__(self) -> None:
        super().__init__()
        self._schedules: dict[str, ScheduleRecord] = {}
        self._schedules_lock = threading.Lock()

    def put_schedule(self, schedule: ScheduleRecord, *, replace: bool = False) -> None:
        _common.to_micros(schedule.next_at)  # refuse naive datetimes like the SQL stores do
        if schedule.queue is not None:
            queue_store(cast(Store, self), f"schedule {schedule.name} queue {schedule.queue!r}")
        kept = replace_record(schedule)
        with self._schedules_lock:
            old = self._schedules.get(schedule.name)
            if old is not None and not replace:
                raise ConflictError(f"schedule {schedule.name} exists already")
            if old is not None:
                kept = _keeping(kept, old)
            self._schedules[schedule.name] = kept

    def get_schedule(self, name: str) -> ScheduleRecord:
        with self._schedules_lock:
            found = self._schedules.get(name)
        if found is None:
            raise NotFoundError("schedule", name)
        return found

    def list_schedules(self, *, due: datetime | None = None) -> list[ScheduleRecord]:
        with self._schedules_lock:
            found = sorted(self._schedules.values(), key=lambda s: s.name)
        if due is None:
            return found
        return sorted(
            (s for s in found if not s.paused and s.next_at <= due),
            key=lambda s: (s.next_at, s.name),
        )

    def delete_schedule(self, name: str) -> bool:
        with self._schedules_lock:
            return self._schedules.pop(name, None) is not None

    def pause_schedule(
        self, name: str, paused: bool, *, next_at: datetime | None = None
    ) -> ScheduleRecord:
        with self._schedules_lock:
            found = self._schedules.get(name)
            if found is None:
                raise NotFoundError("schedule", name)
            found = self._schedules[name] = replace(
                found, paused=bool(paused), next_at=next_at or found.next_at, updated_at=utcnow()
            )
        return found

    def fire_schedule(
        self,
        name: str,
        *,
        expect_next: datetime,
        next_at: datetime,
        runs: Sequence[tuple[RunInfo, CheckpointRecord]] = (),
        queue: Enqueue | None = None,
    ) -> list[str] | None:
        check_fire(expect_next, next_at)
        if queue is not None:
            queue_store(cast(Store, self), f"schedule {name} queue {queue.queue!r}")
        with self._schedules_lock:
            found = self._schedules.get(name)
            if found is None or found.paused or found.next_at != expect_next:
                return None
            created: list[str] = []
            for run, first in runs:
                try:
                    cast(Store, self).create_run(run, first, owner=None, ttl=1.0)
                except ConflictError:
                    continue  # that occurrence started already
                created.append(run.run_id)
            self._schedules[name] = replace(
                found,
                next_at=next_at,
                updated_at=utcnow(),
                fired=found.fired + len(created),
                last_run_id=created[-1] if created else found.last_run_id,
            )
        return created


def replace_record(schedule: ScheduleRecord) -> ScheduleRecord:
    """A copy the caller cannot change afterwards (its input and metadata detached)."""
    return replace(
        schedule,
        input=_common.detach(schedule.input, "schedule.input"),
        metadata=_common.detach(schedule.metadata, "schedule.metadata"),
    )


def _keeping(new: ScheduleRecord, old: ScheduleRecord) -> ScheduleRecord:
    # A replaced schedule keeps what it did: its counts, its last run, its creation.
    return replace(new, fired=old.fired, last_run_id=old.last_run_id, created_at=old.created_at)
