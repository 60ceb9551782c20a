"""Schedules: a workflow started at each occurrence of a cron expression, once per fleet.

``schedule(name, workflow, cron=...)`` stores the schedule with its cursor at the first
occurrence after now. Workers (``savegame worker``) call :func:`fire_schedules` on every
tick: for each due schedule they work out which occurrences to start (the missed
policy), build each one's queued run (its id ``<name>:<occurrence, UTC>``, derived, so
it is the same in every worker) and hand them to the store's ``fire_schedule``, which
creates them and moves the cursor in one transaction only if no other worker moved it
first. So several workers up at once start each occurrence once. A schedule that names a
queue puts each run in it, at its priority: workers start them within its limits.

An occurrence seen within ``catchup_window`` seconds of its time is on time and starts.
Older ones (every worker was down) are *missed*: ``missed="latest"`` (default) starts
the newest of them once, ``"all"`` each of them (at most :data:`BATCH` per tick, oldest
first), ``"skip"`` none. Occurrences while a schedule is paused are never started:
resuming moves its cursor to the next occurrence after now.

Cron expressions are croniter's (five fields, or ``@hourly``/``@daily``...), in UTC.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

from savegame import codec
from savegame.codec.storage import StorageConfig
from savegame.errors import ConfigurationError, NotFoundError
from savegame.ids import MAX_GIVEN_LENGTH, check_given
from savegame.model import CheckpointRecord, RunInfo, utcnow
from savegame.runtime import as_workflow, first_checkpoint, load, reference_of
from savegame.stores import Enqueue, check_enqueue, queue_declared, queue_store
from savegame.stores.base import Store
from savegame.stores.schedules import Missed, ScheduleRecord, schedules_of

# Under the worker's logger: `savegame worker` prints what its ticks started.
log = logging.getLogger("savegame.worker.schedules")

#: The run metadata key naming the schedule and occurrence a run was started for.
SCHEDULE_KEY = "schedule"
#: Occurrences one firing starts at most (``missed="all"`` after a long outage): the
#: rest follow on the next ticks, so one transaction stays small.
BATCH = 100
#: Longest schedule name: its run ids (``<name>:<YYYYmmddTHHMMSSZ>``, 17 more
#: characters) stay valid ids.
MAX_NAME = MAX_GIVEN_LENGTH - 17
_TICK = timedelta(microseconds=1)


def _check_cron(cron: str) -> str:
    if not isinstance(cron, str) or not cron.strip():
        raise ConfigurationError("cron must be a cron expression like '0 9 * * 1-5'")
    cron = " ".join(cron.split())
    fields = cron.split(" ")
    if not cron.startswith("@") and len(fields) != 5:
        raise ConfigurationError(
            f"cron {cron!r} has {len(fields)} fields; expected five "
            "(minute hour day-of-month month day-of-week), e.g. '0 9 * * 1-5'"
        )
    # Imported by the first schedule: croniter costs ~15 ms to import, paid otherwise by
    # every process that loads the runtime, most of them scheduling nothing.
    from croniter import croniter

    if not croniter.is_valid(cron):
        raise ConfigurationError(f"cron {cron!r} is not a valid cron expression")
    return cron


def _check_name(name: str) -> None:
    check_given(name=name)
    if len(name) > MAX_NAME:
        raise ConfigurationError(
            f"schedule name is {len(name)} characters long; at most {MAX_NAME}"
        )


def next_after(cron: str, after: datetime) -> datetime:
    """The first occurrence strictly after ``after`` (UTC)."""
    from croniter import croniter  # see _check_cron

    found: datetime = croniter(cron, after).get_next(datetime)
    return found


def _first_at_or_after(cron: str, at: datetime) -> datetime:
    return next_after(cron, at - _TICK)


def _last_before(cron: str, before: datetime) -> datetime:
    from croniter import croniter  # see _check_cron

    found: datetime = croniter(cron, before).get_prev(datetime)
    return found


def plan(s: ScheduleRecord, now: datetime) -> tuple[list[datetime], datetime]:
    """The occurrences a firing at ``now`` starts, and where the cursor goes after it.

    The cursor is itself an occurrence; everything from it to ``now`` is due. Those
    within ``catchup_window`` of ``now`` are on time; the older ones follow ``missed``.
    """
    cutoff = now - timedelta(seconds=s.catchup_window)
    start: list[datetime] = []
    cursor = s.next_at
    if cursor < cutoff:  # some occurrences were missed
        if s.missed is Missed.ALL:
            at = cursor
            while at <= now and len(start) < BATCH:
                start.append(at)
                at = next_after(s.cron, at)
            return start, at
        if s.missed is Missed.LATEST:
            latest = _last_before(s.cron, cutoff)
            if latest >= cursor:
                start.append(latest)
        cursor = _first_at_or_after(s.cron, cutoff)
    while cursor <= now and len(start) < BATCH:
        start.append(cursor)
        cursor = next_after(s.cron, cursor)
    return start, cursor


def occurrence_id(name: str, at: datetime) -> str:
    """The run id of ``name``'s occurrence at ``at``: the same in every worker."""
    return f"{name}:{at.astimezone(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}"


def schedule(
    name: str,
    workflow: Any,
    *,
    cron: str,
    input: Mapping[str, Any] | None = None,
    missed: Missed | str = Missed.LATEST,
    catchup_window: float = 60.0,
    metadata: Mapping[str, Any] | None = None,
    replace: bool = False,
    store: Store,
    storage: StorageConfig | None = None,
    queue: str | None = None,
    priority: int = 0,
) -> ScheduleRecord:
    """Start a run of ``workflow`` at each occurrence of ``cron`` (UTC), on the worker fleet.

    The operation behind ``Savegame.schedules.add`` (:class:`savegame.client.Schedules`),
    which documents it, on the open ``store``.
    """
    _check_name(name)
    if queue is None and priority != 0:
        raise ConfigurationError("schedule: priority needs a queue (queue='name')")
    where = None if queue is None else check_enqueue(Enqueue(queue, priority))
    cron = _check_cron(cron)
    try:
        policy = Missed(missed)
    except ValueError:
        raise ConfigurationError(
            f"missed must be one of latest, all, skip, not {missed!r}"
        ) from None
    if not isinstance(catchup_window, (int, float)) or catchup_window < 0:
        raise ConfigurationError(f"catchup_window must be seconds >= 0, not {catchup_window!r}")
    if isinstance(workflow, str):
        ref: str | None = _absolute(workflow)
        wf = as_workflow(load(workflow), workflow)
    else:
        ref, wf = reference_of(workflow), as_workflow(workflow)
    if ref is None:
        raise ConfigurationError(
            f"workflow {wf.name!r} has no importable reference: define it at the top level "
            "of a module or file, so that workers can load it"
        )
    data = codec.to_data(dict(input or {}), "schedule input")
    meta = codec.to_data(dict(metadata or {}), "schedule metadata")
    now = utcnow()
    record = ScheduleRecord(
        name=name, workflow=wf.name, workflow_ref=ref, cron=cron, input=data, missed=policy,
        catchup_window=float(catchup_window), next_at=next_after(cron, now), created_at=now,
        updated_at=now, metadata=meta, queue=queue, priority=priority,
    )  # fmt: skip
    record = _sealed(record, storage)
    schedules = schedules_of(store)
    if where is not None:
        queues = queue_store(store, f"schedule {name!r} queue {where.queue!r}")
        if not queue_declared(queues, where.queue):
            raise NotFoundError("queue", where.queue)
    schedules.put_schedule(record, replace=replace)
    return schedules.get_schedule(name)


def _absolute(ref: str) -> str:
    """A file reference made absolute: workers load it from wherever they were started."""
    target, sep, attr = ref.rpartition(":")
    if sep and (target.endswith(".py") or os.sep in target):
        return f"{os.path.abspath(target)}:{attr}"
    return ref


def _sealed(record: ScheduleRecord, storage: StorageConfig | None) -> ScheduleRecord:
    return replace(record, checksum=codec.schedule_checksum(record, storage))


def list_schedules(*, store: Store) -> list[ScheduleRecord]:
    """Every schedule of the store, by name.

    The operation behind ``Savegame.schedules.list`` (:class:`savegame.client.Schedules`),
    which documents it, on the open ``store``.
    """
    return schedules_of(store).list_schedules()


def get_schedule(name: str, *, store: Store) -> ScheduleRecord:
    """Raises NotFoundError for an unknown name.

    The operation behind ``Savegame.schedules.get`` (:class:`savegame.client.Schedules`),
    which documents it, on the open ``store``.
    """
    return schedules_of(store).get_schedule(name)


def remove_schedule(name: str, *, store: Store) -> None:
    """Remove a schedule; the runs it started stay.

    The operation behind ``Savegame.schedules.remove`` (:class:`savegame.client.Schedules`),
    which documents it, on the open ``store``.
    """
    if not schedules_of(store).delete_schedule(name):
        raise NotFoundError("schedule", name)


def pause_schedule(name: str, *, store: Store) -> ScheduleRecord:
    """Stop starting runs; the occurrences until :func:`resume_schedule` never start.

    The operation behind ``Savegame.schedules.pause`` (:class:`savegame.client.Schedules`),
    which documents it, on the open ``store``.
    """
    return schedules_of(store).pause_schedule(name, True)


def resume_schedule(name: str, *, store: Store) -> ScheduleRecord:
    """Start runs again, from the first occurrence after now.

    The operation behind ``Savegame.schedules.resume`` (:class:`savegame.client.Schedules`),
    which documents it, on the open ``store``.
    """
    sched = schedules_of(store)
    found = sched.get_schedule(name)
    return sched.pause_schedule(name, False, next_at=next_after(found.cron, utcnow()))


def fire_schedules(
    *,
    store: Store,
    storage: StorageConfig | None = None,
    now: datetime | None = None,
    workflows: Sequence[str] | None = None,
) -> list[str]:
    """Start the due occurrences of every schedule (what each worker does on its ticks).

    The operation behind ``Savegame.schedules.fire`` (:class:`savegame.client.Schedules`),
    which documents it, on the open ``store``.
    """
    when = now or utcnow()
    created: list[str] = []
    sched = schedules_of(store)
    for due in sched.list_schedules(due=when):
        if workflows is not None and due.workflow not in workflows:
            continue
        try:
            created += _fire(store, due, when, storage) or []
        except Exception as exc:  # one broken schedule must not stop the others
            log.warning("schedule %store could not fire: %store", due.name, exc)
    return created


def _fire(
    store: Store, due: ScheduleRecord, now: datetime, storage: StorageConfig | None
) -> list[str] | None:
    due = codec.verify_schedule(due, storage)
    starts, cursor = plan(due, now)
    runs = _runs(store, due, starts, storage)
    queue = None if due.queue is None else Enqueue(due.queue, due.priority)
    fired = schedules_of(store).fire_schedule(
        due.name, expect_next=due.next_at, next_at=cursor, runs=runs, queue=queue
    )
    if fired:
        log.info("schedule %s started %s", due.name, ", ".join(fired))
    return fired


def _runs(
    store: Store, due: ScheduleRecord, starts: Sequence[datetime], storage: StorageConfig | None
) -> list[tuple[RunInfo, CheckpointRecord]]:
    if not starts:
        return []
    wf = as_workflow(load(due.workflow_ref), due.workflow_ref)
    runs = []
    for at in starts:
        run_id = occurrence_id(due.name, at)
        meta = {**due.metadata, SCHEDULE_KEY: {"name": due.name, "at": at.isoformat()}}
        record, info, _, _ = first_checkpoint(
            wf, store, due.input, thread_id=None, run_id=run_id, metadata=meta,
            ref=due.workflow_ref, storage=storage, queued=True,
        )  # fmt: skip
        runs.append((info, record))
    return runs
