"""The handle's sub-handles for the worker fleet's store-side records: schedules and queues.

``sg.schedules`` and ``sg.queues`` are views of the handle: they use its store and
storage settings, and are refused once it is closed.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from savegame import fleet
from savegame.client._bound import Bound
from savegame.stores import Queue, QueueStats
from savegame.stores.schedules import Missed, ScheduleRecord


class Schedules:
    """A workflow started at each occurrence of a cron expression (UTC), once per fleet:
    ``sg.schedules``. Workers fire the due ones (:meth:`fire`) on every tick."""

    def __init__(self, bound: Bound) -> None:
        self._bound = bound

    def add(
        self,
        name: str,
        workflow: Any,
        *,
        cron: str,
        input: Mapping[str, Any] | None = None,
        missed: Missed | str = Missed.LATEST,
        catchup_window: float = 60.0,
        metadata: Mapping[str, Any] | None = None,
        replace: bool = False,
        queue: str | None = None,
        priority: int = 0,
    ) -> ScheduleRecord:
        """Start a run of ``workflow`` at each occurrence of ``cron`` (UTC), on the worker fleet.

        Args:
            name: the schedule's name; each occurrence's run id is ``<name>:<time>``.
            workflow: a Workflow (or Agent) defined at the top level of a module or file, or
                its reference (``module:attr``, ``path/file.py:attr``): workers import it.
            cron: five fields (minute hour day-of-month month day-of-week) or ``@daily`` ...
            input: each run's input (JSON data).
            missed: what happens to occurrences seen later than ``catchup_window`` seconds
                after their time (no worker was up): ``"latest"`` starts the newest once,
                ``"all"`` each, ``"skip"`` none.
            replace: overwrite a schedule of that name (its counts kept) instead of refusing.
            queue: each run goes in this declared queue (:meth:`Queues.declare`), so workers
                start it within the queue's limits, and a worker of that queue runs it
                (SQLite and PostgreSQL).
            priority: each run's priority in ``queue``.

        Raises:
            ConfigurationError: a bad name, cron expression, policy or input; a workflow with
                no importable reference; a store that does not keep schedules; ``queue`` on
                a store without queues; ``priority`` without ``queue``.
            ConflictError: a schedule of that name exists (and ``replace`` is False).
            NotFoundError: ``queue`` is not declared in the store.
        """
        with self._bound._using() as s:
            return fleet.schedule(
                name, workflow, cron=cron, input=input, missed=missed,
                catchup_window=catchup_window, metadata=metadata, replace=replace, store=s,
                storage=self._bound.storage, queue=queue, priority=priority,
            )  # fmt: skip

    def get(self, name: str) -> ScheduleRecord:
        """The schedule named ``name``. Raises NotFoundError for an unknown name."""
        with self._bound._using() as s:
            return fleet.get_schedule(name, store=s)

    def list(self) -> builtins.list[ScheduleRecord]:
        """Every schedule of the store, by name."""
        with self._bound._using() as s:
            return fleet.list_schedules(store=s)

    def pause(self, name: str) -> ScheduleRecord:
        """Stop starting runs; the occurrences until :meth:`resume` never start."""
        with self._bound._using() as s:
            return fleet.pause_schedule(name, store=s)

    def resume(self, name: str) -> ScheduleRecord:
        """Start runs again, from the first occurrence after now."""
        with self._bound._using() as s:
            return fleet.resume_schedule(name, store=s)

    def remove(self, name: str) -> None:
        """Remove a schedule; the runs it started stay.

        Raises:
            NotFoundError: no schedule of that name.
        """
        with self._bound._using() as s:
            fleet.remove_schedule(name, store=s)

    def fire(
        self, *, now: datetime | None = None, workflows: Sequence[str] | None = None
    ) -> builtins.list[str]:
        """Start the due occurrences of every schedule (what each worker does on its ticks).

        ``workflows``: only schedules of these workflow names (a worker started with
        ``workflows=`` fires only what it could run).

        A schedule that cannot be fired (its workflow does not import, its row fails its
        check) is logged and left as it is: a later tick tries again, and the occurrences
        it misses meanwhile follow its missed policy.

        Returns:
            The ids of the runs this call created (those another worker created are not).
        """
        with self._bound._using() as s:
            return fleet.fire_schedules(
                store=s, storage=self._bound.storage, now=now, workflows=workflows
            )


class Queues:
    """Queues with limits for the worker fleet (SQLite, PostgreSQL): ``sg.queues``."""

    def __init__(self, bound: Bound) -> None:
        self._bound = bound

    def declare(
        self,
        name: str,
        *,
        concurrency: int | None = None,
        worker_concurrency: int | None = None,
        limit: int | None = None,
        period: float = 1.0,
    ) -> Queue:
        """Declare a queue in the store (or change its limits), for every worker at once.

        Args:
            name: the queue's name, as ``submit(queue=...)`` and ``Worker(queues=...)`` say it.
            concurrency: at most this many of its runs execute at once across all workers.
            worker_concurrency: at most this many at once in one worker process.
            limit: at most this many of its runs start per ``period`` seconds (a rate limit).
            period: the rate limit's window, in seconds.

        Returns:
            The queue as declared.

        Raises:
            ConfigurationError: a bad limit, or a store without queues.
        """
        with self._bound._using() as s:
            return fleet.declare_queue(
                name, concurrency=concurrency, worker_concurrency=worker_concurrency,
                limit=limit, period=period, store=s,
            )  # fmt: skip

    def list(self) -> builtins.list[QueueStats]:
        """Every queue declared in the store, by name, with its depth (queued runs), its runs
        executing now, those started in its rate window and its unfinished runs."""
        with self._bound._using() as s:
            return fleet.list_queues(store=s)
