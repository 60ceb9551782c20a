"""Sagas: undo a run's completed write effects in reverse order, exactly once each.

Compensation restores business consistency (the refund is cancelled, the
booking released), not the exact prior world: emails stay sent, logs stay
written. Each compensation is journaled like a write effect (intent before,
result after), so a crash in the middle continues where it stopped and never
undoes anything twice.

Which writes are undone is the journal's (those that declared ``compensate=`` when
they were made); by which tool is the code's at compensation time: the original
tool's ``compensate=`` as it is now (a typo fixed since is taken), else the name the
journal recorded. A name that finds no tool ends the run ``compensation_failed``
with that effect named; fix the code and compensate again, or undo it by hand and
settle it (``savegame resolve RUN --effect ID:compensate --done``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from savegame import codec
from savegame.codec import decode_value, encode_value, load_state, seal_error
from savegame.codec.storage import StorageConfig
from savegame.effects._journal import Journal
from savegame.effects._replay import REPLAY_KEY, REUSED
from savegame.effects._tools import Tool, registered, tool_named
from savegame.errors import (
    CompensationError,
    ConfigurationError,
    InDoubtEffectError,
    RunStateError,
    describe,
)
from savegame.model import (
    CheckpointRecord,
    EffectKind,
    EffectRecord,
    EffectStatus,
    Lease,
    RunResult,
    RunStatus,
)
from savegame.stores.base import ALL_EFFECTS, Store

Committed = Callable[[CheckpointRecord], None]


def plan(effects: list[EffectRecord]) -> list[EffectRecord]:
    """Completed writes that declared a compensation, newest first; a fork's writes
    reused from its origin happened in the origin run, whose saga it is to undo them."""
    done = [
        e for e in effects
        if e.kind is EffectKind.WRITE and e.status is EffectStatus.DONE and e.metadata.get("compensate")
        and e.metadata.get(REPLAY_KEY) != REUSED
    ]  # fmt: skip
    return sorted(done, key=lambda e: (e.step, e.call_index, e.created_at), reverse=True)


def in_doubt(effects: list[EffectRecord]) -> list[EffectRecord]:
    """Writes that declared a compensation and started, but have no result."""
    return [
        e for e in effects
        if e.kind is EffectKind.WRITE and e.status is EffectStatus.PENDING and e.metadata.get("compensate")
    ]  # fmt: skip


def _arguments(fn: Callable[..., Any], original: dict[str, Any], result: Any) -> dict[str, Any]:
    """The original call's arguments the compensating function accepts, plus ``result`` if it takes it."""
    params = inspect.signature(fn).parameters
    takes_all = any(p.kind is p.VAR_KEYWORD for p in params.values())
    kwargs = {k: v for k, v in original.items() if takes_all or k in params}
    if "result" in params or takes_all:
        kwargs["result"] = result
    kwargs.pop("request_id", None)
    return kwargs


_UNKNOWN: Any = object()


def _compensator(effect: EffectRecord, started: EffectRecord | None) -> Tool:
    """The tool that undoes ``effect``: for an undo that ``started`` (in doubt), the one it
    called; otherwise what the original tool declares now, else the name it recorded.

    Raises:
        ConfigurationError: no tool of that name is registered.
    """
    if started is not None and started.status is EffectStatus.PENDING:
        return tool_named(started.name)
    return tool_named(_wanted(effect))


def _wanted(effect: EffectRecord) -> str:
    """The name of the tool that undoes ``effect``: the code's, else the journal's."""
    original = registered(effect.name)
    if original is not None and original.compensate:
        return original.compensate
    return str(effect.metadata["compensate"])


def _reconciled(comp: Tool, request_id: str) -> Any:
    """What the tool's own check says of a call that raised: its result, None (it did not
    happen), or ``_UNKNOWN`` (no check, or the check raised too)."""
    if comp.reconcile is None:
        return _UNKNOWN
    try:
        return comp.reconcile(request_id)
    except Exception:
        return _UNKNOWN


class _Saga:
    """One compensation of a run, under its lease: the run's status markers, each written
    on top of the last, and the undo of each completed write."""

    def __init__(
        self,
        store: Store,
        run_id: str,
        lease: Lease,
        committed: Committed | None,
        storage: StorageConfig | None,
        latest: CheckpointRecord,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.lease = lease
        self.committed = committed
        self.storage = storage
        self.latest = latest

    def write(
        self, status: RunStatus, error: str | None = None, **metadata: Any
    ) -> CheckpointRecord:
        record = codec.marker(self.latest, status, metadata, self.storage)
        sealed = seal_error(self.run_id, error, self.storage)
        self.store.put_checkpoint(record, lease_token=self.lease.token, error=sealed)
        self.latest = record
        if self.committed is not None:
            self.committed(record)
        return record

    def needs_attention(self, error: InDoubtEffectError, failed: str) -> InDoubtEffectError:
        """Stop the run for a person on ``error`` (the call ``failed``); returns it, to raise."""
        self.write(RunStatus.NEEDS_ATTENTION, describe(error, with_type=False), failed=failed)
        return error

    def unresolved(
        self,
        effect: EffectRecord,
        existing: EffectRecord | None,
        journal: Journal,
        problem: ConfigurationError,
    ) -> BaseException:
        """No tool undoes ``effect`` (its name finds none): the run ends compensation_failed,
        with a not-done entry a person may settle as done by hand. Returns the error to
        raise. An undo that started with a tool now gone is in doubt: a person settles it."""
        comp_id = f"{effect.request_id}:compensate"
        if existing is not None and existing.status is EffectStatus.PENDING:
            error = InDoubtEffectError(
                self.run_id, existing.name, decode_value(existing.arguments), comp_id, problem
            )
            return self.needs_attention(error, comp_id)
        name = _wanted(effect)
        hint = (
            f"{problem}; fix the name and run `savegame compensate {self.run_id}` again, or "
            f"undo it by hand and settle it: `savegame resolve {self.run_id} --effect "
            f"{comp_id} --done`"
        )
        failure = CompensationError(self.run_id, effect.request_id, name, ConfigurationError(hint))
        journal.intent(
            EffectRecord(
                run_id=self.run_id, request_id=comp_id, kind=EffectKind.COMPENSATION, name=name,
                step=effect.step, node=effect.node, call_index=effect.call_index,
                status=EffectStatus.NOT_DONE, arguments=effect.arguments,
                error=describe(problem), metadata={"compensates": effect.request_id},
            )
        )  # fmt: skip
        self.write(
            RunStatus.COMPENSATION_FAILED,
            describe(failure, with_type=False),
            failed=comp_id,
            tool=name,
        )
        return failure

    def undo(self, effect: EffectRecord, journal: Journal) -> None:
        """Undo one completed write, exactly once: a compensation already done is not called
        again; one that started and has no result is reconciled, retried if that is safe, or
        stops the run for a person."""
        comp_id = f"{effect.request_id}:compensate"
        existing = journal.get(comp_id)
        if existing is not None and existing.status is EffectStatus.DONE:
            return
        try:
            comp = _compensator(effect, existing)
        except ConfigurationError as exc:
            raise self.unresolved(effect, existing, journal, exc) from None
        kwargs = _arguments(comp.fn, decode_value(effect.arguments), decode_value(effect.result))
        if existing is not None and existing.status is EffectStatus.PENDING:
            found = comp.reconcile(comp_id) if comp.reconcile is not None else None
            if found is not None:
                journal.settle(existing, EffectStatus.DONE, result=encode_value(found, "reconcile"))
                return
            if not comp.idempotent and comp.reconcile is None:
                error = InDoubtEffectError(self.run_id, comp.name, kwargs, comp_id)
                raise self.needs_attention(error, comp_id)
            entry = existing
        else:
            entry = journal.intent(
                EffectRecord(
                    run_id=self.run_id, request_id=comp_id, kind=EffectKind.COMPENSATION,
                    name=comp.name, step=effect.step, node=effect.node,
                    call_index=effect.call_index, status=EffectStatus.PENDING,
                    arguments=encode_value(kwargs, f"compensation.{comp.name}"),
                    metadata={"compensates": effect.request_id, "idempotent": comp.idempotent},
                )
            )  # fmt: skip
        self._call(comp, kwargs, entry, effect, journal)

    def _call(
        self,
        comp: Tool,
        kwargs: dict[str, Any],
        entry: EffectRecord,
        effect: EffectRecord,
        journal: Journal,
    ) -> None:
        """Call the compensation of ``effect`` whose intent is ``entry``; record its outcome.

        Raises:
            InDoubtEffectError: it raised and may have happened (the run needs attention).
            CompensationError: it raised and did not happen (the run is compensation_failed).
        """
        comp_id = entry.request_id
        try:
            result = comp.invoke(kwargs, comp_id)
        except Exception as exc:
            text = describe(exc)
            found = _reconciled(comp, comp_id)
            if found is not None and found is not _UNKNOWN:
                journal.settle(entry, EffectStatus.DONE, result=encode_value(found, "reconcile"))
                return
            if not (comp.idempotent or comp.proves_not_done(exc) or found is None):
                # As for any write: an exception does not prove the undo did not happen, and
                # undoing twice (a second release, a second refund) is no undo.
                journal.settle(entry, EffectStatus.PENDING, error=text, metadata={"raised": True})
                error = InDoubtEffectError(self.run_id, comp.name, kwargs, comp_id, exc)
                raise self.needs_attention(error, comp_id) from exc
            journal.settle(entry, EffectStatus.NOT_DONE, error=text)
            failure = CompensationError(self.run_id, effect.request_id, comp.name, exc)
            self.write(
                RunStatus.COMPENSATION_FAILED,
                describe(failure, with_type=False),
                failed=comp_id,
                tool=comp.name,
            )
            raise failure from exc
        journal.settle(entry, EffectStatus.DONE, result=encode_value(result, f"result.{comp.name}"))


def run_compensation(
    store: Store,
    run_id: str,
    lease: Lease,
    committed: Committed | None = None,
    *,
    storage: StorageConfig | None = None,
) -> RunResult:
    """Compensate ``run_id`` while holding ``lease``; returns the final status.

    Raises:
        CompensationError: a compensation raised; the run is compensation_failed.
        InDoubtEffectError: a compensation started but has no result and cannot be retried safely.
    """
    info = store.get_run(run_id)
    if info.status is RunStatus.COMPENSATED:
        raise RunStateError(run_id, info.status.value, "compensate")
    latest = store.latest_checkpoint(run_id)
    codec.check_head(info, latest)  # a marker signs what it sits on: the run's own head
    saga = _Saga(store, run_id, lease, committed, storage, latest)
    if latest.header.status is not RunStatus.COMPENSATING:
        saga.write(RunStatus.COMPENSATING, previous=latest.header.status.value)
    journal = Journal(
        store, run_id, lease.token, store.list_effects(run_id, limit=ALL_EFFECTS), storage=storage
    )
    undone = 0
    doubtful = in_doubt(journal.entries())
    if doubtful:
        # A write that may have happened cannot be left out of the undo, nor undone when it
        # did not: a person settles it first (savegame resolve), then compensates again.
        first = doubtful[0]
        error = InDoubtEffectError(
            run_id, first.name, decode_value(first.arguments), first.request_id
        )
        raise saga.needs_attention(error, first.request_id)
    # From the journal, whose entries were verified when it loaded them: which writes get
    # undone is read from entries nobody can change unnoticed; by which tool, from the
    # code first (``_compensator``), which is no less trusted than the entries.
    for effect in plan(journal.entries()):
        saga.undo(effect, journal)
        undone += 1
    final = saga.write(RunStatus.COMPENSATED, compensated=undone)
    return RunResult(
        run_id=run_id,
        thread_id=final.header.thread_id,
        status=RunStatus.COMPENSATED,
        state=load_state(store, final, storage).state,
        checkpoint_id=final.checkpoint_id,
        step=final.header.step,
        usage=final.header.usage,
    )
