"""The module functions that read a store, keep it, and hold its schedules and queues:
each is one call of a :class:`Savegame` method (or of ``sg.schedules`` / ``sg.queues``)
on a handle opened for it, as in _oneshot_runs.py.

As before the handle, those that declare or bring something in (a schedule, a queue, an
import) make a missing SQLite store, and so do ``tree``, ``diff``, ``plan_fork`` and
``export_run``, which always did; the others refuse it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from savegame.client._handle import connect
from savegame.codec.storage import StorageConfig
from savegame.control import Effect, ForkPlan
from savegame.inspect import ModelCallRecord, ReplayReport, RunModelUsage, StateDiff, Tree
from savegame.maintenance import (
    Progress,
    PrunePlan,
    RekeyReport,
    RetentionPolicy,
    RetentionRules,
    StoreReport,
    TransferReport,
    VerifyReport,
)
from savegame.model import (
    Checkpoint,
    CheckpointHeader,
    RunInfo,
    RunStatus,
)
from savegame.stores import Queue, QueueStats, Store, ThreadInfo
from savegame.stores.schedules import Missed, ScheduleRecord
from savegame.workspace import RestoredWorkspace, Workspace


def list_runs(
    *,
    thread_id: str | None = None,
    status: RunStatus | str | None = None,
    limit: int = 100,
    workflow: str | None = None,
    search: str | None = None,
    before: str | None = None,
    store: Store | str | None = None,
    storage: StorageConfig | None = None,
) -> list[RunInfo]:
    """Runs, newest first (metadata as in :meth:`Savegame.get_run`), a page at a time.

    One call of :meth:`Savegame.runs` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is refused.
    """
    with connect(store, storage=storage, create=False) as sg:
        return sg.runs(
            thread_id=thread_id,
            status=status,
            limit=limit,
            workflow=workflow,
            search=search,
            before=before,
        )


def list_threads(*, limit: int = 100, store: Store | str | None = None) -> list[ThreadInfo]:
    """Threads, most recently updated first, each summarised from its runs.

    One call of :meth:`Savegame.threads` on a handle opened for it: ``store`` as
    :func:`connect` takes it; a store that does not exist is refused.
    """
    with connect(store, create=False) as sg:
        return sg.threads(limit=limit)


def get_run(
    run_id: str, *, store: Store | str | None = None, storage: StorageConfig | None = None
) -> RunInfo:
    """The run's row: status, head, lease, metadata (sensitive values decrypted when the
    keyring allows). Raises NotFoundError.

    One call of :meth:`Savegame.get_run` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is refused.
    """
    with connect(store, storage=storage, create=False) as sg:
        return sg.get_run(run_id)


def history(
    run_id: str,
    *,
    limit: int | None = None,
    before: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    store: Store | str | None = None,
    storage: StorageConfig | None = None,
) -> list[CheckpointHeader]:
    """A run's checkpoints, newest first, without decoding states.

    One call of :meth:`Savegame.history` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is refused.
    """
    with connect(store, storage=storage, create=False) as sg:
        return sg.history(run_id, limit=limit, before=before, metadata=metadata)


def get_checkpoint(
    ident: str, *, store: Store | str | None = None, storage: StorageConfig | None = None
) -> Checkpoint:
    """A decoded checkpoint by checkpoint id, or a run's latest checkpoint by run id.

    One call of :meth:`Savegame.checkpoint` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is refused.
    """
    with connect(store, storage=storage, create=False) as sg:
        return sg.checkpoint(ident)


def list_effects(
    run_id: str, *, store: Store | str | None = None, storage: StorageConfig | None = None
) -> list[Effect]:
    """A run's journal, oldest first, verified, decrypted and decoded.

    One call of :meth:`Savegame.effects` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is refused.
    """
    with connect(store, storage=storage, create=False) as sg:
        return sg.effects(run_id)


def diff(
    a: str,
    b: str,
    *,
    context: int = 0,
    store: Store | str | None = None,
    storage: StorageConfig | None = None,
) -> StateDiff:
    """Compare the states of two checkpoints (a run id means the run's latest checkpoint).

    One call of :meth:`Savegame.diff` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is created.
    """
    with connect(store, storage=storage) as sg:
        return sg.diff(a, b, context=context)


def replay(
    runs: str | Sequence[str],
    *,
    against: Any,
    live: bool = False,
    store: Store | str | None = None,
    storage: StorageConfig | None = None,
) -> ReplayReport:
    """Replay recorded runs against the code given, nothing called, nothing written.

    One call of :meth:`Savegame.replay` on a handle opened for it: ``store`` and ``storage``
    as :func:`connect` takes them.
    """
    with connect(store, storage=storage) as sg:
        return sg.replay(runs, against=against, live=live)


def tree(
    ident: str, *, store: Store | str | None = None, storage: StorageConfig | None = None
) -> Tree:
    """The tree of runs of a thread, given the thread id or the id of one of its runs.

    One call of :meth:`Savegame.tree` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is created.
    """
    with connect(store, storage=storage) as sg:
        return sg.tree(ident)


def plan_fork(
    checkpoint_id: str, *, store: Store | str | None = None, storage: StorageConfig | None = None
) -> ForkPlan:
    """What :meth:`Savegame.fork` would start from and the recorded writes it could repeat.

    One call of :meth:`Savegame.plan_fork` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is created.
    """
    with connect(store, storage=storage) as sg:
        return sg.plan_fork(checkpoint_id)


def model_calls(
    run_id: str, *, store: Store | str | None = None, storage: StorageConfig | None = None
) -> list[ModelCallRecord]:
    """A run's model calls, oldest first, each with its request and response (verified and
    decrypted like every journal entry). Raises NotFoundError for an unknown run.

    One call of :meth:`Savegame.model_calls` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is refused.
    """
    with connect(store, storage=storage, create=False) as sg:
        return sg.model_calls(run_id)


def model_usage(
    run_id: str, *, store: Store | str | None = None, storage: StorageConfig | None = None
) -> RunModelUsage:
    """What a run's model calls used (input, output and cached tokens) and cost, in all and per
    model, from the responses its journal recorded. A call the run replayed after a crash is
    in its journal once, so it counts once.

    One call of :meth:`Savegame.model_usage` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is refused.
    """
    with connect(store, storage=storage, create=False) as sg:
        return sg.model_usage(run_id)


def restore_workspace(
    checkpoint: Checkpoint,
    path: str | os.PathLike[str] | Workspace,
    *,
    store: Store | str | None = None,
    storage: StorageConfig | None = None,
) -> RestoredWorkspace | None:
    """Make the directory ``path`` what it was at ``checkpoint``: files, deletions, modes.

    One call of :meth:`Savegame.restore_workspace` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is refused.
    """
    with connect(store, storage=storage, create=False) as sg:
        return sg.restore_workspace(checkpoint, path)


def export_run(
    ident: str, path: str | os.PathLike[str], *, store: Store | str | None = None
) -> TransferReport:
    """Write a run, or every run of a thread, to one portable file at ``path``.

    One call of :meth:`Savegame.export` on a handle opened for it: ``store`` as
    :func:`connect` takes it; a store that does not exist is created.
    """
    with connect(store) as sg:
        return sg.export(ident, path)


def import_run(
    path: str | os.PathLike[str],
    *,
    store: Store | str | None = None,
    storage: StorageConfig | None = None,
    thread: str | None = None,
) -> TransferReport:
    """Load an export file into the handle's store (any backend); nothing is written unless all
    of it checks.

    One call of :meth:`Savegame.import_run` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is created.
    """
    with connect(store, storage=storage) as sg:
        return sg.import_run(path, thread=thread)


def prune(
    policy: RetentionPolicy,
    *,
    store: Store | str | None = None,
    dry_run: bool = False,
    now: datetime | None = None,
    batch_size: int = 500,
    rules: Mapping[str, RetentionRules] | None = None,
) -> PrunePlan:
    """Apply ``policy``: delete the checkpoints and runs it lets go, then unreferenced blobs.

    One call of :meth:`Savegame.prune` on a handle opened for it: ``store`` as
    :func:`connect` takes it; a store that does not exist is refused.
    """
    with connect(store, create=False) as sg:
        return sg.prune(policy, dry_run=dry_run, now=now, batch_size=batch_size, rules=rules)


def verify(
    *,
    store: Store | str | None = None,
    run_id: str | None = None,
    storage: StorageConfig | None = None,
    progress: Progress | None = None,
) -> VerifyReport:
    """Check every checkpoint, blob and journal entry (of one run, or all); report damage by
    id.

    One call of :meth:`Savegame.verify` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is refused.
    """
    with connect(store, storage=storage, create=False) as sg:
        return sg.verify(run_id=run_id, progress=progress)


def stats(
    *, store: Store | str | None = None, thread_id: str | None = None, limit: int = 50
) -> StoreReport:
    """Store totals and storage per run, largest first.

    One call of :meth:`Savegame.stats` on a handle opened for it: ``store`` as
    :func:`connect` takes it; a store that does not exist is refused.
    """
    with connect(store, create=False) as sg:
        return sg.stats(thread_id=thread_id, limit=limit)


def rekey(
    *,
    store: Store | str | None = None,
    run_id: str | None = None,
    storage: StorageConfig | None = None,
    progress: Progress | None = None,
    adopt: bool = False,
) -> RekeyReport:
    """Re-encrypt every payload, blob, journal entry and run row under the keyring's active
    key, and rename blobs to digests keyed by it (see
    :mod:`savegame.maintenance._reencrypt`).

    One call of :meth:`Savegame.rekey` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is refused.
    """
    with connect(store, storage=storage, create=False) as sg:
        return sg.rekey(run_id=run_id, progress=progress, adopt=adopt)


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
    store: Store | str | None = None,
    storage: StorageConfig | None = None,
    queue: str | None = None,
    priority: int = 0,
) -> ScheduleRecord:
    """Start a run of ``workflow`` at each occurrence of ``cron`` (UTC), on the worker fleet.

    One call of ``Savegame.schedules.add`` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is created.
    """
    with connect(store, storage=storage) as sg:
        return sg.schedules.add(
            name,
            workflow,
            cron=cron,
            input=input,
            missed=missed,
            catchup_window=catchup_window,
            metadata=metadata,
            replace=replace,
            queue=queue,
            priority=priority,
        )


def get_schedule(name: str, *, store: Store | str | None = None) -> ScheduleRecord:
    """The schedule named ``name``. Raises NotFoundError for an unknown name.

    One call of ``Savegame.schedules.get`` on a handle opened for it: ``store`` as
    :func:`connect` takes it; a store that does not exist is refused.
    """
    with connect(store, create=False) as sg:
        return sg.schedules.get(name)


def list_schedules(*, store: Store | str | None = None) -> list[ScheduleRecord]:
    """Every schedule of the store, by name.

    One call of ``Savegame.schedules.list`` on a handle opened for it: ``store`` as
    :func:`connect` takes it; a store that does not exist is refused.
    """
    with connect(store, create=False) as sg:
        return sg.schedules.list()


def pause_schedule(name: str, *, store: Store | str | None = None) -> ScheduleRecord:
    """Stop starting runs; the occurrences until :meth:`Savegame.resume` never start.

    One call of ``Savegame.schedules.pause`` on a handle opened for it: ``store`` as
    :func:`connect` takes it; a store that does not exist is refused.
    """
    with connect(store, create=False) as sg:
        return sg.schedules.pause(name)


def resume_schedule(name: str, *, store: Store | str | None = None) -> ScheduleRecord:
    """Start runs again, from the first occurrence after now.

    One call of ``Savegame.schedules.resume`` on a handle opened for it: ``store`` as
    :func:`connect` takes it; a store that does not exist is refused.
    """
    with connect(store, create=False) as sg:
        return sg.schedules.resume(name)


def remove_schedule(name: str, *, store: Store | str | None = None) -> None:
    """Remove a schedule; the runs it started stay.

    One call of ``Savegame.schedules.remove`` on a handle opened for it: ``store`` as
    :func:`connect` takes it; a store that does not exist is refused.
    """
    with connect(store, create=False) as sg:
        sg.schedules.remove(name)


def fire_schedules(
    *,
    store: Store | str | None = None,
    storage: StorageConfig | None = None,
    now: datetime | None = None,
    workflows: Sequence[str] | None = None,
) -> list[str]:
    """Start the due occurrences of every schedule (what each worker does on its ticks).

    One call of ``Savegame.schedules.fire`` on a handle opened for it: ``store`` and ``storage`` as
    :func:`connect` takes them; a store that does not exist is refused.
    """
    with connect(store, storage=storage, create=False) as sg:
        return sg.schedules.fire(now=now, workflows=workflows)


def declare_queue(
    name: str,
    *,
    concurrency: int | None = None,
    worker_concurrency: int | None = None,
    limit: int | None = None,
    period: float = 1.0,
    store: Store | str | None = None,
) -> Queue:
    """Declare a queue in the store (or change its limits), for every worker at once.

    One call of ``Savegame.queues.declare`` on a handle opened for it: ``store`` as
    :func:`connect` takes it; a store that does not exist is created.
    """
    with connect(store) as sg:
        return sg.queues.declare(
            name,
            concurrency=concurrency,
            worker_concurrency=worker_concurrency,
            limit=limit,
            period=period,
        )


def list_queues(store: Store | str | None = None) -> list[QueueStats]:
    """Every queue declared in the store, by name, with its depth (queued runs), its runs
    executing now, those started in its rate window and its unfinished runs.

    One call of ``Savegame.queues.list`` on a handle opened for it: ``store`` as
    :func:`connect` takes it; a store that does not exist is refused.
    """
    with connect(store, create=False) as sg:
        return sg.queues.list()
