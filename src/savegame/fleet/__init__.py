"""The worker fleet: runs queued for workers, the workers, schedules and queues.

Where things are::

    _submit.py        submit: a run queued for the fleet; driving a run a worker claimed
    _worker.py        Worker: claims queued, orphaned and woken runs; fires due schedules
    _sagas.py         compensations a dead process left half done, finished by a worker
    _schedules.py     schedules: cron occurrences started once per fleet, the missed policy
    _queues.py        declare_queue, list_queues: queues with limits

Above the engine: a worker drives a claimed run through ``savegame.runtime``'s names
(its ``Engine API``), never its modules. The functions take an open store; ``Worker``
opens its own from a URL, or shares the one it is given.
"""

from savegame.fleet._queues import declare_queue, list_queues
from savegame.fleet._schedules import (
    fire_schedules,
    get_schedule,
    list_schedules,
    pause_schedule,
    remove_schedule,
    resume_schedule,
    schedule,
)
from savegame.fleet._submit import submit
from savegame.fleet._worker import Worker, WorkerStats

__all__ = [
    "Worker",
    "WorkerStats",
    "declare_queue",
    "fire_schedules",
    "get_schedule",
    "list_queues",
    "list_schedules",
    "pause_schedule",
    "remove_schedule",
    "resume_schedule",
    "schedule",
    "submit",
]
