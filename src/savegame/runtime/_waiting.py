"""Waiting runs seen from outside: whether one may continue, why not, and blocking until it may.

A run checkpointed ``waiting`` (``ctx.sleep``, ``ctx.wait_for``, a parent waiting for its
children) holds no process. Its store wakes it (``RunInfo.wake_at``) when its time comes
or what it waits for arrives; then a worker claims it, or ``resume`` continues it. Before
that, ``resume`` refuses it, naming what it waits for, unless asked to wait
(``wait=True``), which polls the run row here until it is woken.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from datetime import datetime

from savegame.effects import CHILD_TOPIC
from savegame.errors import NotFoundError
from savegame.model import RunInfo, RunStatus, Waiting, utcnow
from savegame.runtime._bridge import Io
from savegame.runtime._lease import holder_is_dead
from savegame.stores.base import Store

#: Seconds between looks at the run row while a caller blocks on a waiting run.
POLL = 0.1


def woken(info: RunInfo, now: datetime | None = None) -> bool:
    """Whether a waiting run may continue now (its time has come or its events arrived)."""
    return info.wake_at is not None and info.wake_at <= (now or utcnow())


def waits_for(store: Store, info: RunInfo) -> str | None:
    """Why a waiting run cannot continue yet, for people; None when it can (or is not waiting)."""
    if info.status is not RunStatus.WAITING or woken(info):
        return None
    try:
        meta = store.latest_checkpoint(info.run_id).header.metadata.get("waiting")
    except NotFoundError:
        meta = None
    what = meta.get("for") if isinstance(meta, dict) else None
    return f"it waits for {what or 'something that has not come'}"


def blocker(
    store: Store,
    run_id: str,
    io: Io,
    *,
    drive: Callable[[str], Awaitable[None]] | None = None,
    poll: float = POLL,
    stop: Callable[[], bool] | None = None,
) -> Callable[[Waiting], Awaitable[None]]:
    """``Execution.block`` for a caller that waits: returns once the run is woken, no longer
    waiting, or asked to stop (cancel; ``stop``, a Ctrl-C here), looking at its row every
    ``poll`` seconds at most.

    ``drive``: runs a child run here; each child the run waits for that nobody runs
    (queued, or woken, its lease free) is driven here first, so a parent run in one
    process needs no worker for its children."""

    def stopped() -> bool:
        return stop is not None and stop()

    async def block(waiting: Waiting) -> None:
        children = [t[len(CHILD_TOPIC) :] for t in waiting.topics if t.startswith(CHILD_TOPIC)]
        while not stopped():
            # A child nobody runs (queued; woken; its holder dead) runs here, each look.
            if drive is not None and children:
                for child in await io(_runnable, store, children):
                    if stopped():
                        return  # one not started yet stays as it is, for a worker
                    await drive(child)
            info = await until_woken(store, run_id, io, waiting.until, poll=poll, once=True)
            if info is not None:
                return

    return block


def _runnable(store: Store, run_ids: list[str]) -> list[str]:
    """The runs among ``run_ids`` nobody executes that may go on now."""
    out = []
    for run_id in run_ids:
        info = store.get_run(run_id)
        lease = info.lease
        free = lease is None or lease.expires_at <= time.time() or holder_is_dead(lease.owner)
        if free and (info.status in (RunStatus.QUEUED, RunStatus.RUNNING) or woken(info)):
            out.append(run_id)
    return out


async def until_woken(
    store: Store,
    run_id: str,
    io: Io,
    until: datetime | None = None,
    *,
    poll: float = POLL,
    once: bool = False,
) -> RunInfo | None:
    """The run's row once it is woken, not waiting any more, or asked to stop; with
    ``once``, None when it is still waiting after one look and one ``poll``."""
    while True:
        info: RunInfo = await io(store.get_run, run_id)
        now = utcnow()
        if info.status is not RunStatus.WAITING or info.cancel_requested or woken(info, now):
            return info
        due = info.wake_at or until
        left = poll if due is None else (due - now).total_seconds()
        await asyncio.sleep(min(poll, max(left, 0.0)))
        if once:
            return None
