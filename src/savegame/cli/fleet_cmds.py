"""Commands for a worker fleet: queue a run with ``submit``, execute queued runs with ``worker``.

Any number of ``savegame worker`` processes share one store. Each claims a
queued run (or one whose worker died and whose lease expired), holds its lease
while it runs and releases it when the run ends, pauses or the worker stops.
"""

from __future__ import annotations

import logging
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

import typer

import savegame
from savegame.cli import jsonview, render
from savegame.cli.app_dir import AppDirOption, importable
from savegame.cli.common import load_workflow, parse_input
from savegame.cli.errors import UsageError
from savegame.cli.handles import connected
from savegame.cli.options import (
    InputOption,
    JsonOption,
    OnExistsOption,
    OnThreadBusyOption,
    RunIdOption,
    StoreOption,
    ThreadOption,
)
from savegame.cli.starting import starting
from savegame.cli.words import plural, store_tail
from savegame.fleet import WorkerStats
from savegame.model import RunResult, RunStatus
from savegame.redaction import redact
from savegame.runtime import DEFAULT_TTL

log = logging.getLogger("savegame.worker")


def submit_command(
    workflow: Annotated[
        str,
        typer.Argument(
            metavar="MODULE:ATTR",
            help="The workflow or agent: module:attr or path/file.py:attr (workers import it).",
        ),
    ],
    input_json: InputOption = None,
    thread: ThreadOption = None,
    run_id: RunIdOption = None,
    on_exists: OnExistsOption = "continue",
    on_thread_busy: OnThreadBusyOption = "reject",
    store: StoreOption = None,
    as_json: JsonOption = False,
    queue: Annotated[
        str | None,
        typer.Option("--queue", metavar="NAME", help="Put it in this declared queue."),
    ] = None,
    priority: Annotated[
        int, typer.Option("--priority", help="Within the claims, higher starts sooner.")
    ] = 0,
    dedup_key: Annotated[
        str | None,
        typer.Option(
            "--dedup-key",
            metavar="KEY",
            help="While a run of the queue with this key is unfinished, return it instead.",
        ),
    ] = None,
    app_dir: AppDirOption = None,
) -> None:
    """Queue a run for the worker fleet instead of running it here; print its id."""
    importable(app_dir)
    state = parse_input(input_json)
    target = load_workflow(workflow)
    info = connected(store, create=True).submit(
        target,
        state,
        thread_id=thread,
        run_id=run_id,
        on_exists=on_exists,
        on_thread_busy=on_thread_busy,
        observer=starting(savegame.client.Observer(), as_json),
        queue=queue,
        priority=priority,
        dedup_key=dedup_key,
    )
    if as_json:
        jsonview.emit(jsonview.run(info))
        return
    tail = store_tail(store)
    out = render.console()
    if info.status is not RunStatus.QUEUED:
        # It exists and was left as it is: finished, or in hand, or waiting for a person.
        out.print(f"see it: savegame show {info.run_id}{tail}", soft_wrap=True)
        return
    out.print(
        f"queued run {info.run_id} ({info.workflow}, thread {info.thread_id})", soft_wrap=True
    )
    out.print(f"run it: savegame worker{tail}   watch it: savegame runs{tail}", soft_wrap=True)


class _EventLine(logging.Formatter):
    def __init__(self, store: str | None) -> None:
        super().__init__("%(asctime)s %(message)s", datefmt="%H:%M:%S")
        self._store = store

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record), self._store)


@contextmanager
def _events_to_stderr(store: str | None) -> Iterator[None]:
    """One line per worker event on stderr, for as long as the worker runs."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_EventLine(store))
    level, propagate = log.level, log.propagate
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False  # an application's root handler would print each line twice
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
        log.propagate = propagate


def _ended(res: RunResult) -> None:
    if res.status is RunStatus.RUNNING:
        # The worker was asked to stop: the step finished and was checkpointed.
        log.info(
            "run %s stopped at step %d; its lease is free for another worker", res.run_id, res.step
        )
    else:
        log.info("run %s %s at step %d", res.run_id, res.status.value, res.step)


def _summary(stats: WorkerStats) -> str:
    by_status = Counter(stats.finished.values())
    parts = [
        f"{n} left running for another worker"
        if status == RunStatus.RUNNING.value
        else f"{n} {status}"
        for status, n in sorted(by_status.items())
    ]
    if stats.errors:
        parts.append(f"{len(stats.errors)} stopped on an error")
    done = ", ".join(parts) if parts else "nothing to do"
    return f"worker stopped: claimed {plural(stats.claimed, 'run')} ({done})"


ConcurrencyOption = Annotated[
    int,
    # A thread per slot (and on SQLite a connection each): 100,000 hung the process.
    typer.Option("--concurrency", "-c", metavar="N", min=1, max=256, help="Runs executed at once."),
]

LeaseTtlOption = Annotated[
    float,
    typer.Option(
        "--lease-ttl",
        metavar="SECONDS",
        min=1,
        # 1e308 overflowed the heartbeat's wait; a day is long for a dead worker's hold.
        max=86400,
        help="How long a dead worker's runs stay blocked before another worker takes them.",
    ),
]

PollOption = Annotated[
    float,
    typer.Option(
        "--poll",
        metavar="SECONDS",
        min=0.01,
        max=3600,
        help="Sleep this long when nothing is runnable.",
    ),
]

WorkflowsOption = Annotated[
    list[str] | None,
    typer.Option(
        "--workflow",
        metavar="NAME",
        help="Only claim runs of this workflow name (repeat for several; default: any).",
    ),
]

QueuesOption = Annotated[
    list[str] | None,
    typer.Option(
        "--queue",
        metavar="NAME",
        help="Only claim runs of this queue (repeat for several; default: any, within limits).",
    ),
]

VersionOption = Annotated[
    str | None,
    typer.Option(
        "--version",
        metavar="VERSION",
        help="This worker's code version (its workflows' version=): claim only runs "
        "started under it or under a --compatible one (default: any run).",
    ),
]

CompatibleOption = Annotated[
    list[str] | None,
    typer.Option(
        "--compatible",
        metavar="VERSION",
        help="An older version whose runs this code continues (repeat for several; "
        "needs --version).",
    ),
]

ExitWhenIdleOption = Annotated[
    float | None,
    typer.Option(
        "--exit-when-idle",
        metavar="SECONDS",
        min=0,
        help="Exit once nothing was runnable for this long (default: run until stopped).",
    ),
]


def worker_command(
    concurrency: ConcurrencyOption = 1,
    lease_ttl: LeaseTtlOption = DEFAULT_TTL,
    poll: PollOption = 0.5,
    workflows: WorkflowsOption = None,
    exit_when_idle: ExitWhenIdleOption = None,
    store: StoreOption = None,
    queues: QueuesOption = None,
    app_dir: AppDirOption = None,
    version: VersionOption = None,
    compatible: CompatibleOption = None,
) -> None:
    """Claim queued and orphaned runs and execute them, until SIGTERM or Ctrl-C.

    Due schedules (`savegame schedule add`) are fired too: each occurrence starts
    once however many workers are up.

    A run's workflow (module:attr) is imported from the working directory (or
    --app-dir), then PYTHONPATH. A run whose code does not import here stays
    queued for a worker that can import it; the worker says once what it cannot
    import.

    With --version (and --compatible) the worker claims only runs started under
    those code versions: in a rolling deploy, a run in flight goes only to code
    that continues it as it started (see docs/guides/changing-agents.md).

    On SIGTERM or SIGINT each run in hand finishes its current step, is
    checkpointed, and its lease is released for another worker; then the
    worker prints what it did and exits 0. Events go to stderr, one line each.
    """
    importable(app_dir)
    # Fail here, as one error line, on a bad URL: a slot thread that cannot open
    # the store would only print a traceback and leave the worker idle.
    with savegame.connect(store) as probe:
        where, shared = probe.store.url, probe.store.capabilities.multi_process
    if not shared:
        raise UsageError(f"{where} lives in one process: a worker needs a store others submit to")
    # The URL, not an open Store: the worker decides (one pool shared by the slots,
    # or a connection per slot on SQLite).
    worker = savegame.Worker(
        store,
        concurrency=concurrency,
        lease_ttl=lease_ttl,
        poll=poll,
        workflows=workflows or None,
        on_result=_ended,
        queues=queues or None,
        version=version,
        compatible_versions=compatible or (),
    )
    worker.install_signal_handlers()
    with _events_to_stderr(store):
        log.info("worker started: %s on %s", plural(concurrency, "slot"), where)
        if worker.versions is not None:
            log.info("claiming runs of version %s only", ", ".join(worker.versions))
        stats = worker.run(idle_exit=exit_when_idle)
    render.console().print(_summary(stats), soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command("submit")(submit_command)
    app.command("worker")(worker_command)
