"""Sagas a dead process left half done: a worker finishes them.

A run whose step failed under ``compensate_on_failure`` (an expired approval, say) is
checkpointed ``compensating`` before its first compensation runs, so a crash in the
middle leaves a run that says so. Nobody executes such a run; ``claim_run`` never hands
it out, as resuming it would run its steps again. A worker looks for them, at most
once a ``poll`` and a second like its dead-holder scan, and continues each whose lease
is free or expired (its process is gone): the journal makes that safe, a compensation
that ran has its result recorded and one in doubt is retried under its own request id
if its tool is idempotent, else left to a person (the run ends ``needs_attention``).
A live lease (``savegame compensate`` running now, or the failing run's own process
compensating) is left alone: ``acquire_lease`` refuses it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from savegame import codec
from savegame.codec.storage import StorageConfig
from savegame.effects import run_compensation
from savegame.errors import LeaseHeldError, NotFoundError, RunStateError, describe
from savegame.model import RunResult, RunStatus
from savegame.runtime import Heartbeat, acquire_lease, holder_is_dead, load
from savegame.stores import Store

log = logging.getLogger("savegame.worker")


def orphaned_sagas(
    store: Store,
    *,
    workflows: Sequence[str] | None,
    versions: Sequence[str] | None,
    limit: int,
) -> list[str]:
    """The compensating runs nobody is compensating now (no lease, an expired one, or
    one held by a process on this host that is not running), of the workflows and code
    versions a worker claims: their compensating tools are those of that code."""
    now, found = time.time(), []
    for info in store.list_runs(status=RunStatus.COMPENSATING, limit=limit):
        if workflows is not None and info.workflow not in workflows:
            continue
        if versions is not None and info.version not in versions:
            continue
        held = info.lease
        if held is None or held.expires_at <= now or holder_is_dead(held.owner):
            found.append(info.run_id)
    return found


def finish_saga(
    store: Store, run_id: str, *, lease_ttl: float, storage: StorageConfig | None
) -> RunResult | None:
    """Continue ``run_id``'s compensation under a lease of this process; None when
    another process holds the run now or it is no longer compensating.

    Raises:
        Exception: what the compensation raised (CompensationError, InDoubtEffectError:
            the run says so in the store) or what kept it from starting.
    """
    try:
        info = codec.verify_run(store.get_run(run_id), storage)
        if info.status is not RunStatus.COMPENSATING:
            return None
        if info.workflow_ref is not None:
            # The compensating tools register themselves when their module is imported;
            # the row is checked first, so an edited reference is never imported.
            load(info.workflow_ref)
        lease = acquire_lease(store, run_id, ttl=lease_ttl)
    except (LeaseHeldError, NotFoundError):
        return None
    try:
        with Heartbeat(store, lease, lease_ttl):
            try:
                return run_compensation(store, run_id, lease, storage=storage)
            except RunStateError:
                return None  # finished by another process between the scan and the lease
    finally:
        try:
            store.release_lease(run_id, lease.token)
        except Exception as exc:  # its lease expires on its own
            log.warning(
                "could not release run %s after its compensation: %s", run_id, describe(exc)
            )
