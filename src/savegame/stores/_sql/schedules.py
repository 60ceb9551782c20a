"""Schedules on SQLite and PostgreSQL, written once (``Capabilities.schedules``).

:class:`SqlSchedules` is a mixin of both SQL stores. A backend gives its transaction
(``_tx``), its reads (``_read``), its placeholder (``_sql.dialect.p``) and
:meth:`SqlSchedules._insert_queued`, which inserts one unowned run with its first
checkpoint inside that transaction. Times are integer microseconds since the epoch
(as ``wake_at``), on the clock of the process that computed them.

Exactly once: :meth:`fire_schedule` moves the cursor with ``UPDATE ... WHERE next_at =
<the one read>`` before it inserts the runs. On SQLite the transaction holds the file's
write lock (``BEGIN IMMEDIATE``), so a second firer reads the moved cursor; on
PostgreSQL the UPDATE takes the row's lock and a concurrent one waits for the commit,
then re-reads the row (read committed), finds the cursor moved and updates nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, ClassVar

from savegame.errors import ConflictError, CorruptRecordError, NotFoundError
from savegame.model import CheckpointRecord, RunInfo, utcnow
from savegame.stores import _common
from savegame.stores._queues import Enqueue, check_enqueue
from savegame.stores._sql.statements import Statements
from savegame.stores.schedules import Missed, ScheduleRecord, check_fire

_COLUMNS = (
    "name, workflow, workflow_ref, cron, input, missed, catchup_window, next_at,"
    " created_at, updated_at, paused, fired, last_run_id, metadata, checksum, queue, priority"
)


def _values(s: ScheduleRecord) -> tuple[Any, ...]:
    return (
        s.name, s.workflow, s.workflow_ref, s.cron,
        _common.json_dumps(dict(s.input), "schedule.input").decode(),
        Missed(s.missed).value, float(s.catchup_window), _common.to_micros(s.next_at),
        _common.to_micros(s.created_at), _common.to_micros(s.updated_at), bool(s.paused),
        int(s.fired), s.last_run_id,
        _common.json_dumps(dict(s.metadata), "schedule.metadata").decode(), s.checksum,
        s.queue, int(s.priority),
    )  # fmt: skip


def _record(row: Sequence[Any]) -> ScheduleRecord:
    try:
        return ScheduleRecord(
            name=row[0], workflow=row[1], workflow_ref=row[2], cron=row[3],
            input=_common.json_loads(row[4]), missed=Missed(row[5]),
            catchup_window=float(row[6]), next_at=_common.from_micros(row[7]),
            created_at=_common.from_micros(row[8]), updated_at=_common.from_micros(row[9]),
            paused=bool(row[10]), fired=int(row[11]), last_run_id=row[12],
            metadata=_common.json_loads(row[13]), checksum=row[14], queue=row[15],
            priority=int(row[16]),
        )  # fmt: skip
    except (ValueError, TypeError) as exc:
        raise CorruptRecordError(f"schedule {row[0]}", f"its row does not decode: {exc}") from None


class SqlSchedules:
    """The schedule calls of :class:`~savegame.stores.schedules.ScheduleStore` over SQL."""

    _sql: ClassVar[Statements]

    def _tx(self) -> AbstractContextManager[Any]:
        raise NotImplementedError

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        raise NotImplementedError

    def _insert_queued(
        self, conn: Any, run: RunInfo, first: CheckpointRecord, queue: Enqueue | None
    ) -> bool:
        """Insert ``run`` unowned with ``first`` (in ``queue``, when given) in ``conn``'s
        transaction; False when a run of that id exists (nothing written)."""
        raise NotImplementedError

    def put_schedule(self, schedule: ScheduleRecord, *, replace: bool = False) -> None:
        p = self._sql.dialect.p
        marks = ", ".join([p] * 17)
        sql = f"INSERT INTO schedules ({_COLUMNS}) VALUES ({marks}) ON CONFLICT (name) DO "
        if replace:
            # What it did (fired, last run, created) stays; what it is becomes the new one's.
            sql += (
                "UPDATE SET workflow = excluded.workflow, workflow_ref = excluded.workflow_ref,"
                " cron = excluded.cron, input = excluded.input, missed = excluded.missed,"
                " catchup_window = excluded.catchup_window, next_at = excluded.next_at,"
                " updated_at = excluded.updated_at, paused = excluded.paused,"
                " metadata = excluded.metadata, checksum = excluded.checksum,"
                " queue = excluded.queue, priority = excluded.priority"
            )
        else:
            sql += "NOTHING"
        with self._tx() as conn:
            cursor = conn.execute(sql, _values(schedule))
            if not replace and cursor.rowcount == 0:
                raise ConflictError(f"schedule {schedule.name} exists already")

    def get_schedule(self, name: str) -> ScheduleRecord:
        p = self._sql.dialect.p
        found = self._read(f"SELECT {_COLUMNS} FROM schedules WHERE name = {p}", (name,))
        if not found:
            raise NotFoundError("schedule", name)
        return _record(found[0])

    def list_schedules(self, *, due: datetime | None = None) -> list[ScheduleRecord]:
        p = self._sql.dialect.p
        if due is None:
            found = self._read(f"SELECT {_COLUMNS} FROM schedules ORDER BY name")
        else:
            found = self._read(
                f"SELECT {_COLUMNS} FROM schedules WHERE NOT paused AND next_at <= {p}"
                " ORDER BY next_at, name",
                (_common.to_micros(due),),
            )
        return [_record(row) for row in found]

    def delete_schedule(self, name: str) -> bool:
        p = self._sql.dialect.p
        with self._tx() as conn:
            return bool(conn.execute(f"DELETE FROM schedules WHERE name = {p}", (name,)).rowcount)

    def pause_schedule(
        self, name: str, paused: bool, *, next_at: datetime | None = None
    ) -> ScheduleRecord:
        p = self._sql.dialect.p
        cursor = None if next_at is None else _common.to_micros(next_at)
        now = _common.to_micros(utcnow())
        with self._tx() as conn:
            changed = conn.execute(
                f"UPDATE schedules SET paused = {p}, next_at = coalesce({p}, next_at),"
                f" updated_at = {p} WHERE name = {p}",
                (bool(paused), cursor, now, name),
            ).rowcount
        if not changed:
            raise NotFoundError("schedule", name)
        return self.get_schedule(name)

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
        where = None if queue is None else check_enqueue(queue)
        for run, first in runs:
            _common.check_first(run.run_id, run.thread_id, first.run_id, first.header.thread_id)
        p = self._sql.dialect.p
        now = _common.to_micros(utcnow())
        with self._tx() as conn:
            # The cursor first: this UPDATE is what makes one firer of many win.
            moved = conn.execute(
                f"UPDATE schedules SET next_at = {p}, updated_at = {p}"
                f" WHERE name = {p} AND next_at = {p} AND NOT paused",
                (_common.to_micros(next_at), now, name, _common.to_micros(expect_next)),
            ).rowcount
            if not moved:
                return None
            created = [
                run.run_id for run, first in runs if self._insert_queued(conn, run, first, where)
            ]
            if created:
                conn.execute(
                    f"UPDATE schedules SET fired = fired + {p}, last_run_id = {p} WHERE name = {p}",
                    (len(created), created[-1], name),
                )
        return created
