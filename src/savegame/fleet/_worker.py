"""The worker fleet: processes that claim queued and orphaned runs and drive them.

Any number of ``savegame worker`` processes, on any number of machines, share
one store. Each claims a runnable run atomically (PostgreSQL: ``FOR UPDATE
SKIP LOCKED``), holds its lease with a heartbeat while it runs, and releases it
when the run ends, pauses or the worker stops. A worker killed with SIGKILL
leaves its runs leased until the lease expires; then any other worker claims
and resumes them from their last checkpoint. A worker on the killed one's host
needs no wait: before it claims (at most once a second) it frees the runs that
processes on its host hold and that are not running (:func:`~savegame.runtime.free_dead`,
the rule ``savegame resume`` follows), and claims them like any other. Two workers
never execute one run at once: the stale one's next checkpoint write is rejected by
the fencing token.

On a store that keeps schedules (``Capabilities.schedules``) each worker also fires the
due ones every ``poll`` seconds (:func:`~savegame.fleet._schedules.fire_schedules`):
the store lets one worker of many start each occurrence, and the runs it creates are
queued for any slot of any worker to claim.

SIGTERM (or SIGINT) stops a worker gracefully: each run in hand finishes its
current step, is checkpointed, and its lease is released for another worker.

A run still runnable after it failed in a slot (its workflow does not import
here, it could not start and could not be marked failed, or no stop checkpoint
could be written) is held back: its lease is kept for ``backoff`` seconds,
doubling with each such failure in a row in this worker, up to ``lease_ttl``.
The lease is in the store, so no slot or worker claims it meanwhile; the counts
are per worker, so with N workers a broken run is tried at most about N times
per delay. A worker that stops releases the runs it holds back, for the next.

A run whose workflow does not import here is not failed for it: the code may be
missing from this worker only (its folder not on the import path, a package not
installed), and a worker that has it runs it. The worker says once per workflow
reference what it cannot import and what to do.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import partial
from types import FrameType

from savegame.codec import verify_run
from savegame.codec.storage import StorageConfig
from savegame.errors import (
    ConfigurationError,
    CorruptRecordError,
    WorkflowImportError,
    describe,
)
from savegame.fleet._sagas import finish_saga, orphaned_sagas
from savegame.fleet._schedules import fire_schedules
from savegame.fleet._submit import hold_back, resume_claimed
from savegame.model import Lease, RunResult, RunStatus
from savegame.runtime import (
    DEFAULT_TTL,
    Workflow,
    check_versions,
    free_dead,
    owner_id,
)
from savegame.stores import Store, open_store, queue_store

log = logging.getLogger("savegame.worker")

_RUNNABLE = (RunStatus.QUEUED, RunStatus.RUNNING)

#: Runs of each runnable status a worker looks through for dead holders on its host,
#: newest first: the scan's cost stays bounded in a deep queue; a dead holder's run
#: past it is claimed once its lease expires, as on another host.
_SCAN = 500


@dataclass
class WorkerStats:
    """What a worker did, for logs and tests."""

    claimed: int = 0
    finished: dict[str, str] = field(default_factory=dict)
    """run id -> status the worker left it in."""
    errors: dict[str, str] = field(default_factory=dict)
    slot_errors: int = 0
    """Failed claims (store unreachable); the slots kept trying."""
    held: dict[str, float] = field(default_factory=dict)
    """run id -> seconds it was last held back, still runnable after failing here."""
    scheduled: int = 0
    """Runs this worker created for schedules' occurrences."""


def claimed_versions(version: str | None, compatible: Sequence[str]) -> list[str] | None:
    """The run versions a worker of ``version`` claims: its own, then those it declares
    compatible (None: any run).

    Raises:
        ConfigurationError: compatible versions without a version of its own, or a bad one.
    """
    more = check_versions(compatible, "Worker(compatible_versions=...)") or []
    if version is None:
        if more:
            raise ConfigurationError(
                "Worker(compatible_versions=...) needs the worker's own version= too"
            )
        return None
    own = check_versions([version], "Worker(version=...)") or []
    return list(dict.fromkeys(own + more))


class Worker:
    """Claims runnable runs from a store and executes them, ``concurrency`` at a time.

    Args:
        store: a store URL or a Store shared by all slots. From a URL, a store whose
            handle pools its connections (``Capabilities.pooled``: PostgreSQL, Redis) is
            opened once and shared by the slots; another (SQLite) once per slot.
        concurrency: runs executed at once (one thread each).
        lease_ttl: seconds a dead worker's runs stay blocked before another takes them.
        poll: seconds to sleep when nothing is runnable.
        workflows: only claim runs of these workflow names (default: any).
        queues: only claim runs of these queues (default: runs of any queue, within its
            limits, and of none); a store with queues (SQLite, PostgreSQL).
        backoff: seconds no worker claims a run that is still runnable after failing
            here; doubles with each failure of that run in a row, up to ``lease_ttl``
            (0: claim it again at once).
        schedules: fire due schedules (on a store that keeps them); False leaves that
            to other workers.
        storage: how the runs' checkpoints are stored and read (keys ...); default from
            the environment (``SAVEGAME_KEYS`` ...). ``sg.worker()`` passes its handle's.
        version: this worker's code version (what its workflows declare, ``Workflow(
            version=...)``): it claims only runs started under it or under one of
            ``compatible_versions``, so in a rolling deploy a run in flight never goes to
            code that would take another path (default: any run, whatever its version).
        compatible_versions: older versions whose runs this code continues as they
            started (its changes behind ``ctx.patched``); needs ``version``.
    """

    def __init__(
        self,
        store: str | Store | None = None,
        *,
        concurrency: int = 1,
        lease_ttl: float = DEFAULT_TTL,
        poll: float = 0.5,
        workflows: list[str] | None = None,
        on_result: Callable[[RunResult], None] | None = None,
        backoff: float = 1.0,
        schedules: bool = True,
        queues: list[str] | None = None,
        storage: StorageConfig | None = None,
        version: str | None = None,
        compatible_versions: Sequence[str] = (),
    ) -> None:
        if isinstance(queues, str):
            raise ConfigurationError("Worker(queues=...) takes a list of queue names")
        self.versions = claimed_versions(version, compatible_versions)
        """The run versions this worker claims (None: any)."""
        self._store = store
        self._handle = store
        """What the slots open: ``store``, or the handle they share while the worker runs."""
        self.schedules = schedules
        self.queues = None if queues is None else list(queues)
        self.concurrency = max(1, concurrency)
        self.lease_ttl = lease_ttl
        self.poll = poll
        self.workflows = workflows
        self.on_result = on_result
        self.backoff = backoff
        self.storage = storage
        self._failures: dict[str, int] = {}
        """run id -> failures in a row that left the run runnable."""
        self._holding: dict[str, Lease] = {}
        """run id -> the lease that holds it back, released when the worker stops."""
        self._told: set[str] = set()
        """Workflow references the worker said it cannot import."""
        self._told_versions: set[tuple[str, str]] = set()
        """(workflow, code version) pairs the worker said are not of its versions."""
        self._next_scan = 0.0
        """When (monotonic) to look for runs of dead holders on this host next."""
        self._next_sagas = 0.0
        """When (monotonic) to look for half-done compensations next."""
        self._saga_retry: dict[str, float] = {}
        """run id -> when (monotonic) a compensation that failed here may be tried again."""
        self.stop_event = threading.Event()
        self.stats = WorkerStats()
        self._lock = threading.Lock()
        self._fatal: BaseException | None = None

    def stop(self) -> None:
        """Ask every slot to finish its current step and stop."""
        self.stop_event.set()

    def install_signal_handlers(self) -> None:
        def handle(signum: int, frame: FrameType | None) -> None:
            name = signal.Signals(signum).name
            log.info("%s: finishing current steps, then stopping", name)
            self.stop()

        signal.signal(signal.SIGTERM, handle)
        signal.signal(signal.SIGINT, handle)

    def _slot(self, index: int, idle_exit: float | None) -> None:
        try:
            store = open_store(self._handle)
            if self.queues is not None:  # a store without queues stops the worker at once
                queue_store(store, "Worker(queues=...)")
        except Exception as exc:
            # A worker that cannot open its store stops, and run() says why.
            self._fatal = self._fatal or exc
            self.stop_event.set()
            return
        idle_since = time.monotonic()
        try:
            while not self.stop_event.is_set():
                try:
                    lease = self._claim(store)
                except Exception as exc:
                    # The store is unreachable or busy: keep the slot alive and try again.
                    log.warning("slot %d could not claim a run: %s", index, exc)
                    with self._lock:
                        self.stats.slot_errors += 1
                    self.stop_event.wait(max(self.poll, 1.0))
                    continue
                if lease is None:
                    if idle_exit is not None and time.monotonic() - idle_since > idle_exit:
                        return
                    self.stop_event.wait(self.poll)
                    continue
                idle_since = time.monotonic()
                self._execute(store, index, lease)
        finally:
            if store is not self._handle:
                store.close()

    def _ticker(self, done: threading.Event) -> None:
        """Fire due schedules every ``poll`` seconds until the worker stops or ``done``."""
        try:
            store = open_store(self._handle)
        except Exception as exc:
            log.warning("the schedule ticker could not open the store: %s", exc)
            return
        try:
            if not store.capabilities.schedules:
                return
            while not (self.stop_event.is_set() or done.is_set()):
                try:
                    fired = fire_schedules(
                        store=store, storage=self.storage, workflows=self.workflows
                    )
                except Exception as exc:  # the store is unreachable: try on the next tick
                    log.warning("could not fire schedules: %s", exc)
                    fired = []
                with self._lock:
                    self.stats.scheduled += len(fired)
                done.wait(self.poll)
        finally:
            if store is not self._handle:
                store.close()

    def _claim(self, store: Store) -> Lease | None:
        self._free_dead(store)
        self._finish_sagas(store)
        owner = owner_id()
        if self.queues is None:
            return store.claim_run(
                owner, self.lease_ttl, workflows=self.workflows, versions=self.versions
            )
        queues = queue_store(store, "Worker(queues=...)")
        return queues.claim_run(
            owner, self.lease_ttl, workflows=self.workflows, queues=self.queues,
            versions=self.versions,
        )  # fmt: skip

    def _free_dead(self, store: Store) -> None:
        """Free the runs held by dead processes on this host, at most once per ``poll``
        (and a second) across the slots, so they are claimed now, not when leases expire."""
        with self._lock:
            now = time.monotonic()
            if now < self._next_scan:
                return
            self._next_scan = now + max(self.poll, 1.0)
        try:
            for status in _RUNNABLE:
                for run_id in free_dead(store, store.list_runs(status=status, limit=_SCAN)):
                    log.info("run %s was held by a process that is not running: freed", run_id)
        except Exception as exc:  # the store is unreachable: the claim says so, or leases expire
            log.warning("could not look for runs of dead workers: %s", exc)

    def _finish_sagas(self, store: Store) -> None:
        """Continue the compensations dead processes left half done (:mod:`._sagas`), at
        most once per ``poll`` (and a second) across the slots."""
        with self._lock:
            now = time.monotonic()
            if now < self._next_sagas:
                return
            self._next_sagas = now + max(self.poll, 1.0)
            retry = {run_id: at for run_id, at in self._saga_retry.items() if at > now}
            self._saga_retry = retry
        try:
            orphans = orphaned_sagas(
                store, workflows=self.workflows, versions=self.versions, limit=_SCAN
            )
        except Exception as exc:  # the store is unreachable: the claim says so
            log.warning("could not look for half-done compensations: %s", describe(exc))
            return
        for run_id in orphans:
            if run_id in retry or self.stop_event.is_set():
                continue
            try:
                result = finish_saga(store, run_id, lease_ttl=self.lease_ttl, storage=self.storage)
            except Exception as exc:
                # The run says what happened (compensation_failed, needs_attention) or is
                # still compensating (its code does not import here): not again at once.
                log.warning("compensation of run %s stopped: %s", run_id, describe(exc))
                with self._lock:
                    self.stats.errors[run_id] = describe(exc)
                    self._saga_retry[run_id] = time.monotonic() + self.lease_ttl
                continue
            if result is not None:
                log.info("continued the compensation of run %s: %s", run_id, result.status.value)
                with self._lock:
                    self.stats.claimed += 1
                    self.stats.finished[run_id] = result.status.value

    def _execute(self, store: Store, index: int, lease: Lease) -> None:
        """Run the claimed run until it ends, pauses or the worker stops; count what came of it."""
        with self._lock:
            self.stats.claimed += 1
            self._holding.pop(lease.run_id, None)  # held by this claim's lease now
        log.info("slot %d claimed run %s (token %d)", index, lease.run_id, lease.token)
        try:
            self._check_version(store, lease)
            result = resume_claimed(
                lease,
                store=store,
                lease_ttl=self.lease_ttl,
                should_stop=self.stop_event.is_set,
                storage=self.storage,
                loaded=self._loaded,
            )
        except KeyboardInterrupt:
            raise
        except BaseException as exc:
            # A run's failure is the run's (recorded in the store); the worker goes on.
            # BaseException too: a step's SystemExit or CancelledError must not end
            # the slot, which would leave the other runs queued behind it.
            with self._lock:
                self.stats.errors[lease.run_id] = describe(exc)
            if isinstance(exc, WorkflowImportError):
                self._cannot_import(exc)
            else:
                log.warning("run %s stopped: %s", lease.run_id, describe(exc))
            self._back_off(store, lease, quiet=isinstance(exc, WorkflowImportError))
            return
        with self._lock:
            self.stats.finished[lease.run_id] = result.status.value
        if result.status not in _RUNNABLE:
            with self._lock:
                self._failures.pop(lease.run_id, None)
        elif not self.stop_event.is_set():  # a graceful stop leaves runs to others
            self._back_off(store, lease)
        if self.on_result is not None:
            self.on_result(result)

    def _check_version(self, store: Store, lease: Lease) -> None:
        """Refuse a claimed run whose checked version is not one of this worker's.

        The claim filtered on the row's ``version`` column, which no check covers; the
        version in its metadata is under the row's check. They differ only when the row
        was edited (or damaged): the run is held back, never run by the wrong code.

        Raises:
            CorruptRecordError: they differ.
        """
        if self.versions is None:
            return
        info = verify_run(store.get_run(lease.run_id), self.storage)
        if info.version not in self.versions:
            raise CorruptRecordError(
                f"run {lease.run_id}",
                f"its row was claimed for version {', '.join(self.versions)} but its checked "
                f"metadata says {info.version!r}",
            )

    def _loaded(self, wf: Workflow) -> None:
        """Say once per workflow and version when the code this worker imported is not of
        a version it claims: ``--version`` names another release than the one installed
        (the runs it claims still go on; the code is what the operator deployed)."""
        if self.versions is None or wf.code_version in self.versions:
            return
        with self._lock:
            seen = (wf.name, wf.code_version)
            if seen in self._told_versions:
                return
            self._told_versions.add(seen)
        log.warning(
            "this worker claims runs of version %s, but workflow %r imports here as version "
            "%s: give the worker its code's version (--version %s)",
            ", ".join(self.versions), wf.name, wf.code_version, wf.code_version,
        )  # fmt: skip

    def _cannot_import(self, exc: WorkflowImportError) -> None:
        """Say once per reference what this worker cannot import, and what to do."""
        with self._lock:
            if exc.ref in self._told:
                return
            self._told.add(exc.ref)
        top = exc.module.partition(".")[0]
        if exc.missing is not None and top in (exc.missing, exc.missing.partition(".")[0]):
            todo = (
                f"start the worker in the folder that holds {top!r}, or give it that folder: "
                "`savegame worker --app-dir DIR` (or PYTHONPATH=DIR)"
            )
        elif exc.missing is not None:
            todo = f"install {exc.missing!r} where the worker runs"
        else:
            todo = "run the worker where its code imports, or fix the code"
        log.warning(
            "%s. Its runs stay queued for a worker that can import it. To run them here, %s; "
            "this worker runs in %s",
            exc.detail, todo, os.getcwd(),
        )  # fmt: skip

    def _back_off(self, store: Store, lease: Lease, *, quiet: bool = False) -> None:
        """Hold back ``lease``'s run if it is still runnable after failing in this slot
        (``quiet``: without a line, the cause said already)."""
        run_id = lease.run_id
        try:
            status = store.get_run(run_id).status
            with self._lock:
                if status not in _RUNNABLE:
                    self._failures.pop(run_id, None)
                    return
                failures = self._failures[run_id] = self._failures.get(run_id, 0) + 1
            # The exponent is capped: a run broken for days must not overflow a float.
            seconds = min(self.backoff * 2 ** min(failures - 1, 32), self.lease_ttl)
            held = hold_back(store, lease, seconds)
            if held is None:
                return
        except Exception as exc:  # the store is unreachable: the lease expires anyway
            log.warning("could not hold back run %s: %s", run_id, exc)
            return
        with self._lock:
            self.stats.held[run_id] = seconds
            self._holding[run_id] = held
        (log.debug if quiet else log.warning)(
            "run %s is still %s after failing here (%d time(s) in a row): "
            "no worker claims it for %.1f s",
            run_id, status.value, failures, seconds,
        )  # fmt: skip

    def run(self, *, idle_exit: float | None = None) -> WorkerStats:
        """Work until stopped (or, with ``idle_exit``, until nothing was runnable for that long).

        Raises:
            Exception: the error that kept a slot from opening the store (the others are
                stopped too).
        """
        shared = self._share()
        try:
            return self._work(idle_exit)
        finally:
            if shared is not None:
                self._handle = self._store
                shared.close()

    async def arun(self, *, idle_exit: float | None = None) -> WorkerStats:
        """:meth:`run` from an asyncio application (a web app's lifespan, a service's main):
        the worker works in its own threads while the event loop goes on. Cancelling the
        awaiting task stops it as :meth:`stop` does (each run in hand finishes its step and
        is released), then raises CancelledError.
        """
        loop = asyncio.get_running_loop()
        # Its own thread, not the loop's default pool: the worker holds it for its life.
        with ThreadPoolExecutor(1, thread_name_prefix="savegame-worker") as pool:
            working = loop.run_in_executor(pool, partial(self.run, idle_exit=idle_exit))
            try:
                return await asyncio.shield(working)
            except asyncio.CancelledError:
                self.stop()
                await asyncio.wait([working])
                raise

    def _share(self) -> Store | None:
        """From a URL, the one handle the slots share, if its store pools connections."""
        if self._store is not None and not isinstance(self._store, str):
            return None  # a Store given: shared already
        opened = open_store(self._store)
        if not opened.capabilities.pooled:
            opened.close()  # one connection per slot (SQLite: each its own file handle)
            return None
        self._handle = opened
        return opened

    def _work(self, idle_exit: float | None) -> WorkerStats:
        threads = [
            threading.Thread(
                target=self._slot, args=(i, idle_exit), name=f"savegame-worker-{i}", daemon=True
            )
            for i in range(self.concurrency)
        ]
        done = threading.Event()
        ticker = threading.Thread(
            target=self._ticker, args=(done,), name="savegame-schedules", daemon=True
        )
        if self.schedules:
            ticker.start()
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(0.2)  # short joins keep the main thread responsive to signals
        done.set()
        if ticker.is_alive():
            ticker.join(5.0)  # a tick in flight finishes its transaction
        self._release_held()
        if self._fatal is not None:
            raise self._fatal
        return self.stats

    def _release_held(self) -> None:
        """Give back the runs this worker holds back, so the next worker (one that can
        import their code, say) claims them without waiting out the holds."""
        with self._lock:
            held, self._holding = list(self._holding.values()), {}
        if not held:
            return
        try:
            store = open_store(self._handle)
        except Exception as exc:  # the holds expire on their own
            log.warning("could not release the runs held back: %s", exc)
            return
        try:
            for lease in held:
                try:
                    store.release_lease(lease.run_id, lease.token)
                except Exception as exc:
                    log.warning("could not release run %s: %s", lease.run_id, exc)
        finally:
            if store is not self._handle:
                store.close()
