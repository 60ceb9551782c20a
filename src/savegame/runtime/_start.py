"""Start or continue: what ``run`` and ``submit`` do with a run id that is taken, and with a
thread whose run is unfinished (as DBOS workflow ids and Temporal's id reuse policies do).

A run id names one execution of a workflow with one input. Starting it again continues
it where it stopped (after a kill -9, a failure), or returns what it recorded when it
has finished: a caller that retries a start never runs a step twice. The store's
``create_run`` is conditional (a taken id is a ConflictError), so of two processes that
start one id at once exactly one creates it; the other finds it and continues or returns
it as the policy says.

A new run on a thread starts from the thread's latest state at its entry step, so a
second run beside an unfinished one could do that run's work (and effects) again: by
default it is refused, naming the unfinished run. The look before the create only makes
the common case quick and the error early; the store decides (``create_run(sole=True)``,
in the insert's transaction), so two starts on one free thread at the same moment
create one run between them.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from savegame import codec, secrets
from savegame.codec import canonical, load_state, to_data
from savegame.codec.storage import StorageConfig
from savegame.effects import decisions
from savegame.errors import (
    ConfigurationError,
    ConflictError,
    LeaseHeldError,
    NotFoundError,
    RunExistsError,
    ThreadBusyError,
)
from savegame.ids import check_given
from savegame.model import RunInfo, RunResult, RunStatus
from savegame.runtime import _lease as leases
from savegame.runtime._execution import Observer
from savegame.runtime._setup import PreparedRun, decode, prepare_resume, start_run
from savegame.runtime._waiting import waits_for
from savegame.runtime._workflow import Workflow
from savegame.stores import DuplicateRunError, Enqueue
from savegame.stores.base import Store

OnExists = Literal["continue", "return", "reject"]
"""What a start does when its run id exists: ``continue`` an unfinished run (a finished
one has nothing left to run: its recorded result is returned), ``return`` the run as it
stands without executing anything, or ``reject`` it with RunExistsError."""

OnThreadBusy = Literal["reject", "wait", "allow"]
"""What a new run does when its thread has an unfinished run: ``reject`` it with
ThreadBusyError naming that run, ``wait`` until that run has finished, or ``allow`` a
second run beside it."""

#: Seconds between looks at a busy thread (``on_thread_busy="wait"``).
WAIT_POLL = 0.2

#: Starts set up again when the thread moved on under them before giving up.
MOVED_RETRIES = 20

_UNFINISHED = tuple(s for s in RunStatus if not s.finished)


@dataclass(frozen=True, slots=True)
class StartOptions:
    """How ``run`` or ``submit`` starts a run: the caller's choices, gathered once."""

    thread_id: str | None
    run_id: str | None
    metadata: Mapping[str, Any] | None
    ttl: float
    ref: str | None
    storage: StorageConfig | None
    on_exists: OnExists = "continue"
    on_thread_busy: OnThreadBusy = "reject"
    observer: Observer = field(default_factory=Observer)
    queued: bool = False
    """Create the run queued for a worker fleet (``submit``)."""
    enqueue: Enqueue | None = None
    """``submit(queue=...)``: the declared queue it goes in, its priority and dedup key."""


def begin_run(
    wf: Workflow, store: Store, input: Mapping[str, Any] | None, start: StartOptions
) -> PreparedRun | RunResult:
    """A run set up to execute here (new, or an unfinished one continued), or the result
    of an existing run returned without executing anything."""
    found = _create_or_find(wf, store, input, start)
    if isinstance(found, PreparedRun):
        return found
    info = _matching(store, found, wf, input, start)
    waits = (
        decisions.waiting_reason(store, info.run_id, start.storage) is not None
        or waits_for(store, info) is not None
    )
    if info.status.finished or start.on_exists == "return" or waits:
        _notify(start.observer, info, "return")
        return current_result(store, info, wf, start.storage)
    _notify(start.observer, info, "continue")
    return prepare_resume(
        info.run_id, store, wf, from_checkpoint=None, ttl=start.ttl, storage=start.storage
    )


def begin_submit(
    wf: Workflow, store: Store, input: Mapping[str, Any] | None, start: StartOptions
) -> RunInfo:
    """The row of a run queued for the fleet: new, or an existing one (a stalled one,
    failed or decided, queued again unless ``on_exists="return"``)."""
    try:
        found = _create_or_find(wf, store, input, start)
    except DuplicateRunError as exc:
        # The queue has an unfinished run with this dedup key: that run is the answer,
        # whatever its input (the key says it is the same job).
        return store.get_run(exc.run_id)
    if isinstance(found, PreparedRun):
        return store.get_run(found.start.run_id)
    info = _matching(store, found, wf, input, start)
    if start.on_exists == "continue" and not info.status.finished:
        _notify(start.observer, info, "continue")
        queue(store, info.run_id, ttl=start.ttl, storage=start.storage, why="submit")
    else:
        _notify(start.observer, info, "return")
    return store.get_run(info.run_id)


def _create_or_find(
    wf: Workflow, store: Store, input: Mapping[str, Any] | None, start: StartOptions
) -> PreparedRun | RunInfo:
    """A new run, created here; or the row of the run that holds ``start.run_id``."""
    check_given(run_id=start.run_id, thread_id=start.thread_id)
    _check_choices(start)
    for _ in range(MOVED_RETRIES):
        if start.run_id is not None:
            info = _find(store, start.run_id)
            if info is not None:
                return info
        _check_thread(store, start.thread_id or start.run_id, start)
        try:
            return start_run(
                wf, store, input, thread_id=start.thread_id, run_id=start.run_id,
                metadata=start.metadata, ttl=start.ttl, ref=start.ref, storage=start.storage,
                queued=start.queued, sole=start.on_thread_busy != "allow",
                enqueue=start.enqueue,
            )  # fmt: skip
        except DuplicateRunError:
            raise  # a ConflictError, but no race: begin_submit returns that run
        except ThreadBusyError:
            # A run started on the thread between the look above and the create (the
            # store checks again inside its insert): refused, or waited out.
            if start.on_thread_busy == "reject":
                raise
        except ConflictError:
            # Another process created this run between the look above and the create;
            # or the thread moved on meanwhile (a run started and ended): set up again.
            info = None if start.run_id is None else _find(store, start.run_id)
            if info is not None:
                return info
    raise ConflictError(
        f"thread {start.thread_id or start.run_id} kept moving while a run was set up on it "
        f"({MOVED_RETRIES} attempts): other runs start and end on it faster than this start"
    )


def _check_choices(start: StartOptions) -> None:
    if start.on_exists not in get_args(OnExists):
        raise ConfigurationError(
            f"on_exists must be one of {', '.join(get_args(OnExists))}, not {start.on_exists!r}"
        )
    if start.on_thread_busy not in get_args(OnThreadBusy):
        raise ConfigurationError(
            f"on_thread_busy must be one of {', '.join(get_args(OnThreadBusy))}, "
            f"not {start.on_thread_busy!r}"
        )


def _find(store: Store, run_id: str) -> RunInfo | None:
    try:
        return store.get_run(run_id)
    except NotFoundError:
        return None


def _notify(observer: Observer, info: RunInfo, action: str) -> None:
    if observer.on_existing is not None:
        observer.on_existing(info, action)


def _matching(
    store: Store, info: RunInfo, wf: Workflow, input: Mapping[str, Any] | None, start: StartOptions
) -> RunInfo:
    """``info`` (checked) if this start may continue or return it; else RunExistsError."""
    info = codec.verify_run(info, start.storage)
    status = info.status.value
    if info.workflow != wf.name:
        raise RunExistsError(
            info.run_id, status, f"it is a run of workflow {info.workflow!r}, not {wf.name!r}"
        )
    if start.thread_id is not None and start.thread_id != info.thread_id:
        raise RunExistsError(
            info.run_id, status, f"it runs on thread {info.thread_id!r}, not {start.thread_id!r}"
        )
    if start.on_exists == "reject":
        raise RunExistsError(
            info.run_id,
            status,
            "on_exists='reject' refuses a run id that is taken (the default, 'continue', "
            "continues an unfinished run and returns a finished one's result)",
        )
    if input is not None:
        difference = _input_difference(store, info, wf, input, start.storage)
        if difference is not None:
            raise RunExistsError(
                info.run_id, status, f"it was started with another input: {difference}"
            )
    return info


def _input_difference(
    store: Store,
    info: RunInfo,
    wf: Workflow,
    input: Mapping[str, Any],
    storage: StorageConfig | None,
) -> str | None:
    """How ``input`` differs from the one the run was started with, or None when the same.

    The run's first checkpoint holds its thread's state at the start with the input
    applied on top; the same input on the same base gives the same state. When the base
    is gone (pruned), only the keys ``input`` gives are compared; when the first
    checkpoint is gone too, nothing can be compared.
    """
    headers = store.list_checkpoints(info.run_id)
    first = headers[-1] if headers else None
    if first is None or first.step != 0 or first.node is not None:
        return None
    started = load_state(store, store.get_checkpoint(first.checkpoint_id), storage).state
    base: Mapping[str, Any] = {}
    if first.parent_id is not None:
        try:
            base = load_state(store, store.get_checkpoint(first.parent_id), storage).state
        except NotFoundError:
            base = started  # compare what ``input`` gives, nothing else
    given = secrets.redact({**base, **input}, wf.secrets) if wf.secrets else {**base, **input}
    differ = sorted(
        k
        for k in given.keys() | started.keys()
        if k not in given or k not in started or canonical(given[k]) != canonical(started[k])
    )
    if not differ:
        return None
    shown = [
        f"{k}: {_short(given, k, 'not given')} given, {_short(started, k, 'not set')} at its start"
        for k in differ[:3]
    ]
    more = f" (and {len(differ) - 3} more keys)" if len(differ) > 3 else ""
    return "; ".join(shown) + more


def _short(state: Mapping[str, Any], key: str, missing: str) -> str:
    if key not in state:
        return f"({missing})"
    text = canonical(to_data(state[key], "input")).decode()
    return text if len(text) <= 40 else text[:37] + "..."


def _check_thread(store: Store, thread_id: str | None, start: StartOptions) -> None:
    """Refuse, or wait out, an unfinished run on ``thread_id`` (unless allowed)."""
    if thread_id is None or start.on_thread_busy == "allow":
        return
    waited_for = None
    # The run this start names is not in its own way: it is being created meanwhile by
    # another process (the create below then finds it).
    while (busy := unfinished_run(store, thread_id, but=start.run_id)) is not None:
        if start.on_thread_busy == "reject":
            raise ThreadBusyError(thread_id, busy.run_id, busy.status.value)
        if busy.run_id != waited_for:
            waited_for = busy.run_id
            if start.observer.on_wait is not None:
                start.observer.on_wait(busy)
        time.sleep(WAIT_POLL)


def unfinished_run(store: Store, thread_id: str, *, but: str | None = None) -> RunInfo | None:
    """The newest run of the thread that has not finished (other than ``but``), or None."""
    if store.thread_head(thread_id) is None:
        return None  # a new thread: no runs at all
    found = [
        run
        for status in _UNFINISHED
        for run in store.list_runs(thread_id=thread_id, status=status, limit=2)
        if run.run_id != but
    ]
    return max(found, key=lambda r: (r.created_at, r.run_id), default=None)


def current_result(
    store: Store, info: RunInfo, wf: Workflow, storage: StorageConfig | None
) -> RunResult:
    """The run as its head checkpoint records it, nothing executed."""
    record = store.latest_checkpoint(info.run_id)
    codec.check_head(info, record)
    cp, _ = decode(store, record, wf, storage)
    waiting = (
        decisions.pending(store, info.run_id, storage=storage)
        if record.header.status is RunStatus.INTERRUPTED
        else []
    )
    return RunResult(
        run_id=info.run_id,
        thread_id=info.thread_id,
        status=record.header.status,
        state=dict(cp.state),
        checkpoint_id=record.checkpoint_id,
        step=record.header.step,
        usage=record.header.usage,
        interrupt_id=waiting[0].interrupt_id if waiting else None,
    )


def queue(
    store: Store, run_id: str, *, ttl: float, storage: StorageConfig | None, why: str
) -> bool:
    """Queue a run that nobody executes and that waits for nobody (it failed, or a
    person decided what it waited for) for the worker fleet: a ``queued`` checkpoint on
    its head, resumable where the head stopped. A worker claims it; ``resume`` also
    continues it.

    Returns:
        False when there was nothing to queue: a process holds the run, it waits for
        another decision, it has no workflow reference a worker could import, or its
        status is neither failed nor interrupted.
    """
    try:
        lease = leases.acquire(store, run_id, ttl=ttl)
    except LeaseHeldError:
        return False  # a live process executes it: it continues there
    try:
        info = codec.verify_run(store.get_run(run_id), storage)
        if (
            info.status not in (RunStatus.FAILED, RunStatus.INTERRUPTED)
            or info.workflow_ref is None
            or decisions.waiting_reason(store, run_id, storage) is not None
        ):
            return False
        head = store.latest_checkpoint(run_id)
        codec.check_head(info, head)
        if head.header.next is None:
            return False
        by = decisions.default_actor()
        record = codec.marker(
            head, RunStatus.QUEUED, {"queued_by": by, "after": why}, storage, resumable=True
        )
        store.put_checkpoint(record, lease_token=lease.token)
    finally:
        store.release_lease(run_id, lease.token)
    return True
