"""Retention: decide which checkpoints and runs may go, without breaking what stays.

Rules, in order:

* a run waiting for a person (interrupted, needs_attention, and
  compensation_failed: a saga that still owes compensations), or waiting for a timer,
  an event or its child runs (waiting), is exempt, whole and its checkpoints too,
  unless ``include_waiting`` is set;
* a finished run whose last change is older than ``finished_for`` goes whole
  (runs, checkpoints, journal);
* otherwise a run's head always stays; older checkpoints go when they are past
  ``keep_last``, older than ``ttl``, or past their own ``expires_at``;
* anything a kept checkpoint needs to load (its delta base, the base's base,
  down to the keyframe) stays, whatever the rules above said;
* blobs no remaining checkpoint refers to go last.

Runs another framework's checkpointer wrote (``FOREIGN``: LangGraph's SavegameSaver)
mean more than their headers say: a LangGraph thread is one unit across its
namespace runs, a run stored ``completed`` may wait for a person, a kept checkpoint
may be rebuilt from its ancestors. Their framework's rules (``rules=``) say which go
whole, which wait for a person, and which checkpoints kept ones need; without them
such runs are left alone and listed as ``skipped``.

Checkpoints go in batches, each record after every doomed record that uses it
as a delta base (:func:`deletion_order`), so a prune killed between two batches
leaves no delta without its base: what remains loads and ``verify`` passes.

Planning reads only headers, so a dry run is cheap and never decodes a state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import ClassVar

from savegame.codec import known_blobs
from savegame.errors import ConfigurationError
from savegame.model import CheckpointHeader, RunInfo, RunStatus, utcnow
from savegame.stores.base import Store

#: Runs a person must act on. compensation_failed counts as finished, yet its journal is
#: what ``compensate`` needs to release what the run still holds once the cause is fixed.
WAITING = (
    RunStatus.INTERRUPTED,
    RunStatus.NEEDS_ATTENTION,
    RunStatus.COMPENSATION_FAILED,
    RunStatus.WAITING,  # a timer, an event, child runs: what it waits for is still to come
)

#: Workflows whose runs another framework writes (``savegame.integrations``), by name.
FOREIGN = frozenset({"langgraph"})


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """What to keep. Unset rules keep everything they would govern."""

    MAX_AGE: ClassVar[timedelta] = timedelta(days=36500)
    """The longest ``ttl`` or ``finished_for``: long enough to mean "for ever", short enough
    that ``now - age`` is still a date (a datetime stops at year 1)."""

    keep_last: int | None = None
    """Per run, keep at most this many newest checkpoints (the head always stays)."""
    ttl: timedelta | None = None
    """Delete checkpoints older than this (by created_at)."""
    finished_for: timedelta | None = None
    """Delete finished runs (completed, cancelled, compensated) idle for longer than this."""
    include_waiting: bool = False
    """Also prune runs waiting for a person: interrupted, needs_attention, compensation_failed
    (forced: a compensation_failed run pruned can no longer be compensated)."""

    def __post_init__(self) -> None:
        if self.keep_last is not None and self.keep_last < 1:
            raise ConfigurationError(
                f"keep_last must be at least 1 (the head stays), not {self.keep_last}"
            )
        for name in ("ttl", "finished_for"):
            age = getattr(self, name)
            if age is None:
                continue
            if not isinstance(age, timedelta):
                raise ConfigurationError(
                    f"{name} must be a timedelta, not {type(age).__qualname__}"
                )
            if age < timedelta(0):
                raise ConfigurationError(f"{name} must not be negative, not {age}")
            if age > self.MAX_AGE:
                raise ConfigurationError(
                    f"{name} must be at most {self.MAX_AGE.days} days, not {age.days} days"
                )


@dataclass
class PrunePlan:
    """What a prune deletes (or would delete, in a dry run)."""

    runs: list[str] = field(default_factory=list)
    checkpoints: list[str] = field(default_factory=list)
    """In deletion order: a delta before its base (:func:`deletion_order`)."""
    checkpoint_bytes: int = 0
    kept_as_base: int = 0
    """Checkpoints the rules would drop but a kept checkpoint needs to load."""
    exempt_runs: list[str] = field(default_factory=list)
    """Runs waiting for a person (see ``WAITING``), left alone."""
    skipped: dict[str, str] = field(default_factory=dict)
    """Runs of a ``FOREIGN`` workflow left alone, with why (no rules for it, or its
    rules could not read them)."""
    blobs: int = 0
    blob_bytes: int = 0
    """Filled after the blobs were collected (0 in a dry run)."""
    dry_run: bool = True


@dataclass(frozen=True, slots=True)
class ForeignRun:
    """A run of a ``FOREIGN`` workflow, as retention hands it to that framework's rules."""

    run: RunInfo
    headers: list[CheckpointHeader]
    doomed: frozenset[str]
    """The checkpoints keep_last, ttl and expires_at would delete (never the head)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a framework's rules decide for its runs (run ids not named: per checkpoint)."""

    delete: frozenset[str] = frozenset()
    """Runs that go whole (finished, idle longer than ``finished_for``)."""
    exempt: frozenset[str] = frozenset()
    """Runs left alone whole: waiting for a person (unless ``include_waiting``)."""
    skipped: Mapping[str, str] = field(default_factory=dict)
    """Runs left alone whole because the rules cannot read them, with why."""
    keep: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """Per run, doomed checkpoints that stay: what kept ones need besides their delta bases."""


RetentionRules = Callable[[Store, Sequence[ForeignRun], RetentionPolicy, datetime], Verdict]
"""A framework's retention: its runs (of one workflow), the policy, the time -> a verdict."""


def _doomed(
    run: RunInfo, headers: list[CheckpointHeader], policy: RetentionPolicy, now: datetime
) -> set[str]:
    """What the per-checkpoint rules drop of one run, before its bases are saved."""
    newest_first = sorted(headers, key=lambda h: h.checkpoint_id, reverse=True)
    drop: set[str] = set()
    for index, header in enumerate(newest_first):
        if header.checkpoint_id == run.head_checkpoint_id:
            continue
        too_many = policy.keep_last is not None and index >= policy.keep_last
        too_old = policy.ttl is not None and header.created_at < now - policy.ttl
        expired = header.expires_at is not None and header.expires_at <= now
        if too_many or too_old or expired:
            drop.add(header.checkpoint_id)
    return drop


def _run_plan(
    run: RunInfo,
    headers: list[CheckpointHeader],
    policy: RetentionPolicy,
    now: datetime,
    keep: frozenset[str] = frozenset(),
) -> tuple[list[CheckpointHeader], int]:
    """The checkpoints of one live run to delete, and how many were saved as bases
    (or because ``keep`` says a kept one needs them)."""
    doomed = _doomed(run, headers, policy, now)
    drop = doomed - keep
    by_id = {h.checkpoint_id: h for h in headers}
    needed: set[str] = set()
    for header in headers:
        if header.checkpoint_id in drop:
            continue
        base = header.base_id
        while base is not None and base not in needed:
            needed.add(base)
            parent = by_id.get(base)
            base = parent.base_id if parent is not None else None
    saved = len(drop & needed) + len(doomed & keep)
    return [by_id[cid] for cid in sorted(drop - needed)], saved


def deletion_order(doomed: Sequence[CheckpointHeader]) -> list[str]:
    """The ids of ``doomed``, each after every doomed record that uses it as a delta base.

    Deleted in this order and cut anywhere (a killed prune), no record left names
    a base that is gone. Only ``base_id`` links decide: ids need not sort by time,
    as they come from the clock of whichever host wrote (a takeover may go back).
    """
    by_id = {h.checkpoint_id: h for h in doomed}
    # depth: how many doomed records lie below this one on its way to a kept or
    # missing base (or a keyframe); deeper records go first.
    depth: dict[str, int] = {}
    for header in doomed:
        path: list[str] = []
        on_path: set[str] = set()
        cid: str | None = header.checkpoint_id
        while cid is not None and cid in by_id and cid not in depth and cid not in on_path:
            path.append(cid)
            on_path.add(cid)
            cid = by_id[cid].base_id
        # A cycle of bases (damage: none of it loads) ends the walk like a keyframe.
        below = depth.get(cid, -1) if cid is not None else -1
        for ident in reversed(path):
            below += 1
            depth[ident] = below
    return sorted(by_id, key=lambda ident: (-depth[ident], ident))


def plan(
    store: Store,
    policy: RetentionPolicy,
    *,
    now: datetime | None = None,
    rules: Mapping[str, RetentionRules] | None = None,
) -> PrunePlan:
    """Work out what ``policy`` deletes, reading headers only (``rules`` may read more)."""
    now = now or utcnow()
    result = PrunePlan()
    doomed_all: list[CheckpointHeader] = []
    foreign: dict[str, list[ForeignRun]] = {}
    for run in store.list_runs(limit=1_000_000):
        if run.workflow in FOREIGN:
            headers = store.list_checkpoints(run.run_id)
            dropped = frozenset(_doomed(run, headers, policy, now))
            foreign.setdefault(run.workflow, []).append(ForeignRun(run, headers, dropped))
            continue
        if run.status in WAITING and not policy.include_waiting:
            result.exempt_runs.append(run.run_id)
            continue
        headers = store.list_checkpoints(run.run_id)
        # A run finished when its head checkpoint was written.
        ended = max((h.created_at for h in headers), default=run.updated_at)
        if (
            run.status.finished
            and policy.finished_for is not None
            and ended < now - policy.finished_for
        ):
            result.runs.append(run.run_id)
            result.checkpoint_bytes += sum(h.size for h in headers)
            continue
        doomed, saved = _run_plan(run, headers, policy, now)
        doomed_all.extend(doomed)
        result.checkpoint_bytes += sum(h.size for h in doomed)
        result.kept_as_base += saved
    for workflow, runs in foreign.items():
        doomed_all.extend(_foreign_plan(store, workflow, runs, policy, now, rules, result))
    result.checkpoints = deletion_order(doomed_all)
    return result


def _foreign_plan(
    store: Store,
    workflow: str,
    runs: list[ForeignRun],
    policy: RetentionPolicy,
    now: datetime,
    rules: Mapping[str, RetentionRules] | None,
    result: PrunePlan,
) -> list[CheckpointHeader]:
    """Apply a framework's verdict to its runs; the checkpoints that go."""
    rule = (rules or {}).get(workflow)
    if rule is None:
        why = f"a {workflow} run: pruned only with its framework's rules (rules={{{workflow!r}: ...}})"
        result.skipped.update({f.run.run_id: why for f in runs})
        return []
    verdict = rule(store, runs, policy, now)
    doomed_all: list[CheckpointHeader] = []
    for f in runs:
        run_id = f.run.run_id
        if run_id in verdict.skipped:
            result.skipped[run_id] = verdict.skipped[run_id]
        elif run_id in verdict.exempt:
            result.exempt_runs.append(run_id)
        elif run_id in verdict.delete:
            result.runs.append(run_id)
            result.checkpoint_bytes += sum(h.size for h in f.headers)
        else:
            keep = verdict.keep.get(run_id, frozenset())
            doomed, saved = _run_plan(f.run, f.headers, policy, now, keep)
            doomed_all.extend(doomed)
            result.checkpoint_bytes += sum(h.size for h in doomed)
            result.kept_as_base += saved
    return doomed_all


def prune(
    policy: RetentionPolicy,
    *,
    store: Store,
    dry_run: bool = False,
    now: datetime | None = None,
    batch_size: int = 500,
    rules: Mapping[str, RetentionRules] | None = None,
) -> PrunePlan:
    """Apply ``policy``: delete what :func:`plan` finds, then unreferenced blobs.

    The operation behind :meth:`savegame.Savegame.prune`, which documents it, on the open
    ``store``.
    """
    if batch_size < 1:
        raise ConfigurationError(f"batch_size must be at least 1, not {batch_size}")
    return _apply(store, policy, dry_run=dry_run, now=now, batch_size=batch_size, rules=rules)


def _apply(
    store: Store,
    policy: RetentionPolicy,
    *,
    dry_run: bool,
    now: datetime | None,
    batch_size: int,
    rules: Mapping[str, RetentionRules] | None,
) -> PrunePlan:
    result = plan(store, policy, now=now, rules=rules)
    result.dry_run = dry_run
    if dry_run:
        return result
    if result.runs:
        store.delete_runs(result.runs)
    # In batches, so one huge prune does not hold a write lock for long; in deletion
    # order, so a prune killed between two batches leaves no delta without its base.
    doomed = result.checkpoints
    for start in range(0, len(doomed), batch_size):
        store.delete_checkpoints(doomed[start : start + batch_size])
    result.blobs, result.blob_bytes = store.delete_unreferenced_blobs()
    # This process's cache of blobs known to be stored is stale now.
    known_blobs.forget(store)
    return result
