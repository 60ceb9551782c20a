"""After a person decided a gate: continue the run here if its workflow loads, else queue it.

A decision is recorded in the journal first (``effects/decisions.py``); it stands
whatever happens next. Then the run is continued in the approver's process only where
its workflow can be loaded (its stored reference imports here, or the caller passed
it). Where it cannot (an approval service that does not ship the agent's code), or
when asked not to, the run is queued for the worker fleet, and ``resume`` or a
``savegame worker`` continues it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from savegame import codec
from savegame.codec.storage import StorageConfig
from savegame.effects import decisions
from savegame.errors import ConfigurationError, describe
from savegame.model import EffectRecord, RunResult
from savegame.runtime import Observer, load, queue_run, resume
from savegame.stores.base import Store


@dataclass(frozen=True, slots=True)
class Decision:
    """A person's decision on a gated call, as recorded, and what became of the run after it.

    ``approve`` and ``reject`` raise only when the decision could not be recorded; once
    it is, it stands, and what happened next is told here.
    """

    entry: EffectRecord
    """The journal entry as recorded: the tool's name, the request id, who decided and when."""
    result: RunResult | None = None
    """Where the run ended (or paused again), when it was continued in this process."""
    error: Exception | None = None
    """Why the run could not be continued here: its workflow does not load here (the
    run is then queued), or continuing it failed (a step raised, a live process holds
    it ...: it continues from its last checkpoint later, as any failed run)."""
    not_continued: str | None = None
    """Why the run was not continued here on purpose: ``resume=False``, or it waits for
    another decision."""
    queued: bool = False
    """The run was queued for the worker fleet: a ``savegame worker`` (or ``resume``)
    continues it."""


def continue_after(
    store: Store,
    entry: EffectRecord,
    *,
    resume_run: bool,
    workflow: Any,
    observer: Observer | None,
    lease_ttl: float,
    storage: StorageConfig | None,
) -> Decision:
    """Continue ``entry``'s run here where its workflow loads; otherwise queue it."""
    run_id = entry.run_id
    if observer is not None and observer.on_decision is not None:
        observer.on_decision(entry)
    waiting = decisions.waiting_reason(store, run_id, storage)
    if waiting is not None:
        return Decision(entry, not_continued=waiting)
    if not resume_run:
        queued = queue_run(store, run_id, ttl=lease_ttl, storage=storage, why=entry.kind.value)
        return Decision(entry, not_continued="not asked to (resume=False)", queued=queued)
    try:
        target = workflow if workflow is not None else _loaded(store, run_id, storage)
    except Exception as exc:  # any import failure: the code is not here
        error = ConfigurationError(
            f"its workflow does not load here: {describe(exc, with_type=False)}"
        )
        queued = queue_run(store, run_id, ttl=lease_ttl, storage=storage, why=entry.kind.value)
        return Decision(entry, error=error, queued=queued)
    try:
        result = resume(
            run_id,
            store=store,
            workflow=target,
            observer=observer,
            lease_ttl=lease_ttl,
            storage=storage,
        )
    except Exception as exc:  # the decision stands; the caller is told
        return Decision(entry, error=exc)
    return Decision(entry, result=result)


def _loaded(store: Store, run_id: str, storage: StorageConfig | None) -> Any:
    # The row is checked first, so an edited reference is never imported.
    info = codec.verify_run(store.get_run(run_id), storage)
    if info.workflow_ref is None:
        raise ConfigurationError(f"run {run_id} has no stored workflow reference")
    return load(info.workflow_ref)
