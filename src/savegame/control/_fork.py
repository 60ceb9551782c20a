"""Fork: a new run of the same thread that starts from any checkpoint of another run.

The fork's first checkpoint holds the origin checkpoint's state (with a person's edit,
if any: then it is an ``update`` checkpoint naming who and why), is parented on it,
and its metadata (copied to the run row, so covered by the run's check and kept when
retention prunes the checkpoint) names the origin under ``fork``: that is the run's
lineage, and where its calls replay from (:mod:`savegame.effects._replay`). Nothing
of the origin run is written: its rows stay byte for byte as they were. A finished
or failed run forks like any other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, get_args

from savegame import codec, secrets
from savegame.codec import Chain, open_entry
from savegame.codec.storage import StorageConfig
from savegame.control._edits import apply_edits
from savegame.effects import (
    EXECUTED,
    FORK_KEY,
    REPLAY_KEY,
    REUSED,
    Diverged,
    Mode,
    Origin,
    decisions,
)
from savegame.errors import ConfigurationError
from savegame.ids import new_id
from savegame.model import (
    VERSION_KEY,
    Checkpoint,
    CheckpointHeader,
    EffectKind,
    EffectRecord,
    EffectStatus,
    RunResult,
    RunStatus,
    utcnow,
)
from savegame.runtime import (
    DEFAULT_TTL,
    Observer,
    PreparedRun,
    Workflow,
    current_result,
    decode_checkpoint,
    direct_io,
    execute,
    owner_id,
    reference_of,
    run_row,
    run_sync,
    workflow_of,
)
from savegame.stores import Store
from savegame.stores.base import ALL_EFFECTS


@dataclass(frozen=True, slots=True)
class Call:
    """A recorded call of a journal, by position, for people."""

    request_id: str
    step: int
    call_index: int
    node: str
    name: str
    kind: EffectKind


@dataclass(frozen=True, slots=True)
class ForkPlan:
    """What forking a checkpoint would do, before anything is written."""

    origin: CheckpointHeader
    """The checkpoint the fork would start from."""
    writes: tuple[Call, ...]
    """The origin's recorded writes after that checkpoint: ``redo`` would execute each
    again; ``replay`` only those at or after the first call that differs."""
    in_doubt: tuple[Call, ...] = ()
    """The origin's writes after that checkpoint that started and have no result (killed
    mid-call, or the origin is still running): they may have happened. A replay stops
    for a person at the first (settle it in the origin run, then resume the fork); a
    redo calls each again."""


@dataclass(frozen=True, slots=True)
class ForkResult:
    """A fork: the new run, and (when it ran) where it ended and what it reused."""

    run_id: str
    thread_id: str
    origin: Origin
    checkpoint_id: str
    """The fork's first checkpoint (the ``update`` checkpoint when edited)."""
    edited: tuple[str, ...]
    """What the edit changed: state keys and paths."""
    result: RunResult | None
    """Where the fork ended; None with ``run=False`` (``resume`` runs it later)."""
    reused: tuple[Call, ...] = ()
    """Calls whose recorded result came back from the origin's journal: nothing called."""
    executed: tuple[Call, ...] = ()
    """Calls made for real, oldest first."""

    @property
    def diverged_at(self) -> Call | None:
        """The first call that differed from the origin (or the first of ``redo``)."""
        return self.executed[0] if self.executed else None


def _call(e: EffectRecord) -> Call:
    return Call(e.request_id, e.step, e.call_index, e.node, e.name, e.kind)


def _position(e: EffectRecord) -> tuple[int, int, str]:
    return (e.step, e.call_index, e.request_id)


def plan_fork(
    checkpoint_id: str, *, store: Store, storage: StorageConfig | None = None
) -> ForkPlan:
    """What :func:`fork` would start from and the recorded writes it could repeat.

    The operation behind :meth:`savegame.Savegame.plan_fork`, which documents it, on the
    open ``store``.
    """
    header = store.get_checkpoint(checkpoint_id).header
    entries = [open_entry(e, storage) for e in store.list_effects(header.run_id, limit=ALL_EFFECTS)]
    after = sorted(
        (e for e in entries if e.kind is EffectKind.WRITE and e.step > header.step),
        key=_position,
    )
    return ForkPlan(
        codec.reveal_metadata(header, storage),
        tuple(_call(e) for e in after if e.status is EffectStatus.DONE),
        tuple(_call(e) for e in after if e.status is EffectStatus.PENDING),
    )


def _workflow_of(
    s: Store, run_id: str, workflow: Any, storage: StorageConfig | None
) -> tuple[Workflow, str | None]:
    info = codec.verify_run(s.get_run(run_id), storage)
    wf = workflow_of(info, workflow, "fork")
    if workflow is None:  # imported from the reference
        return wf, info.workflow_ref
    return wf, reference_of(workflow) or info.workflow_ref


def _metadata(
    origin: Origin,
    edited: list[str],
    by: str | None,
    authenticated_as: str | None,
    reason: str | None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "source": "update" if edited else "fork",
        **decisions.who(by, authenticated_as),
        FORK_KEY: {**origin.to_metadata(), "edited": edited},
    }
    if reason:
        meta["reason"] = reason
    codec.refuse_reserved(meta, "fork metadata")
    return meta


def create_fork(
    s: Store,
    checkpoint_id: str,
    *,
    workflow: Any,
    update: Mapping[str, Any] | None,
    paths: Mapping[str, Any] | None,
    reason: str | None,
    by: str | None,
    authenticated_as: str | None,
    mode: Mode,
    ttl: float,
    storage: StorageConfig | None,
) -> tuple[PreparedRun, list[str]]:
    """Write the fork's run and first checkpoint, leased to this process."""
    if mode not in get_args(Mode):
        raise ConfigurationError(f"mode must be one of {', '.join(get_args(Mode))}, not {mode!r}")
    record = s.get_checkpoint(checkpoint_id)
    src = record.header
    wf, ref = _workflow_of(s, src.run_id, workflow, storage)
    cp, _ = decode_checkpoint(s, record, wf, storage)
    state, edited = apply_edits(cp.state, update, paths)
    origin = Origin(src.run_id, src.checkpoint_id, src.step, mode)
    now, meta = utcnow(), _metadata(origin, edited, by, authenticated_as, reason)
    # The fork runs the code of this process, whatever version its origin started under.
    meta[VERSION_KEY] = wf.code_version
    header = CheckpointHeader(
        thread_id=src.thread_id, run_id=new_id(), checkpoint_id=new_id(),
        parent_id=src.checkpoint_id, step=src.step, node=src.node,
        status=RunStatus.RUNNING if src.next is not None else RunStatus.COMPLETED,
        next=src.next, usage=src.usage, metadata=meta,
        created_at=now, state_version=wf.state_version,
    )  # fmt: skip
    first = codec.encode(
        header, secrets.redact(state, wf.secrets) if wf.secrets else state, storage
    )
    info = run_row(wf, first, ref, now, storage)
    lease = s.create_run(info, first, owner=owner_id(), ttl=ttl)
    start = Checkpoint(header=first.header, state=state)
    ready = PreparedRun(
        wf, start, first, Chain(0, 0, first.header.size), lease, created=True, origin=origin
    )
    return ready, edited


def _calls_of(
    s: Store, run_id: str, storage: StorageConfig | None
) -> tuple[list[Call], list[Call]]:
    """The fork's calls that were reused and executed, each oldest first."""
    entries = sorted(
        (open_entry(e, storage) for e in s.list_effects(run_id, limit=ALL_EFFECTS)), key=_position
    )
    marked = [(e.metadata.get(REPLAY_KEY), e) for e in entries if e.kind is not EffectKind.APPROVAL]
    return (
        [_call(e) for how, e in marked if how == REUSED],
        [_call(e) for how, e in marked if how == EXECUTED],
    )


async def _afork(
    checkpoint_id: str,
    store: Store,
    run: bool,
    observer: Observer | None,
    ttl: float,
    storage: StorageConfig | None,
    **edit: Any,
) -> ForkResult:
    ready, edited = create_fork(store, checkpoint_id, ttl=ttl, storage=storage, **edit)
    header = ready.record.header
    if observer is not None and observer.on_checkpoint is not None:
        observer.on_checkpoint(header, 0.0)
    if run and header.next is not None:
        ex = ready.execution(store, ttl=ttl, storage=storage, io=direct_io, observer=observer)
        result: RunResult | None = await execute(ex)
    else:
        store.release_lease(header.run_id, ready.lease.token)
        info = store.get_run(header.run_id)
        result = (
            current_result(store, info, ready.workflow, storage) if header.next is None else None
        )
    reused, executed = _calls_of(store, header.run_id, storage)
    assert ready.origin is not None
    return ForkResult(
        header.run_id, header.thread_id, ready.origin, header.checkpoint_id, tuple(edited),
        result, tuple(reused), tuple(executed),
    )  # fmt: skip


def fork(
    checkpoint_id: str,
    *,
    update: Mapping[str, Any] | None = None,
    set: Mapping[str, Any] | None = None,
    reason: str | None = None,
    by: str | None = None,
    authenticated_as: str | None = None,
    mode: Mode = "replay",
    run: bool = True,
    store: Store,
    workflow: Any = None,
    observer: Observer | None = None,
    lease_ttl: float = DEFAULT_TTL,
    storage: StorageConfig | None = None,
) -> ForkResult:
    """Start a new run of the same thread from ``checkpoint_id``, optionally edited, and run
    it.

    The operation behind :meth:`savegame.Savegame.fork`, which documents it, on the open
    ``store``.
    """
    edit = {"update": update, "paths": set, "reason": reason, "by": by,
            "authenticated_as": authenticated_as, "mode": mode}  # fmt: skip
    return run_sync(
        _afork(checkpoint_id, store, run, observer, lease_ttl, storage, workflow=workflow, **edit)
    )


@dataclass(frozen=True, slots=True)
class StrictReplay:
    """A fork replayed strictly (:mod:`savegame.effects._replay`): where it ended."""

    run_id: str
    """The fork: its checkpoints are the replay's."""
    result: RunResult | None
    """Where it ended, when it did (not when it diverged or raised)."""
    diverged: Diverged | None
    """The first call the journal did not answer: nothing was called."""
    error: Exception | None
    """What else stopped it: a step that raised (the run failed), a refused call."""
    reused: int
    """Calls answered from the journal."""


async def _astrict(
    checkpoint_id: str, store: Store, workflow: Any, storage: StorageConfig | None
) -> StrictReplay:
    ready, _ = create_fork(
        store, checkpoint_id, workflow=workflow, update=None, paths=None, reason=None,
        by="savegame replay", authenticated_as=None, mode="replay", ttl=DEFAULT_TTL,
        storage=storage,
    )  # fmt: skip
    assert ready.origin is not None
    ready = replace(ready, origin=replace(ready.origin, strict=True))
    run_id = ready.record.header.run_id
    result: RunResult | None = None
    diverged: Diverged | None = None
    error: Exception | None = None
    if ready.record.header.next is None:
        store.release_lease(run_id, ready.lease.token)
    else:
        ex = ready.execution(store, ttl=DEFAULT_TTL, storage=storage, io=direct_io)
        try:
            result = await execute(ex)
        except Diverged as stop:
            diverged = stop
        except Exception as exc:
            error = exc
    reused, _ = _calls_of(store, run_id, storage)
    return StrictReplay(run_id, result, diverged, error, len(reused))


def strict_replay(
    checkpoint_id: str, *, store: Store, workflow: Any, storage: StorageConfig | None = None
) -> StrictReplay:
    """Fork ``checkpoint_id`` in ``store`` and run the fork with ``workflow``, every call
    answered from the origin's journal, none made: the first the journal does not answer
    stops it (:class:`~savegame.effects.Diverged`). For a scratch store: the fork's run,
    its checkpoints and its failure are written there (``savegame replay`` uses one)."""
    return run_sync(_astrict(checkpoint_id, store, workflow, storage))


__all__ = [
    "Call",
    "ForkPlan",
    "ForkResult",
    "StrictReplay",
    "create_fork",
    "fork",
    "plan_fork",
    "strict_replay",
]
