"""Exactly-once calls: the protocol behind ``ctx.call``, split around the actual call.

``before`` decides from the journal what to do (replay a recorded result, wait
for approval, stop on an in-doubt write, or call) and commits a write's intent;
the caller then calls the tool (sync or async); ``after`` records the outcome.
Splitting it this way lets ``ctx.call`` and ``await ctx.acall`` share every rule.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, replace
from typing import Any

from savegame.codec import canonical, decode_value, encode_value
from savegame.effects import _expiry as expiry
from savegame.effects import _streams as streams
from savegame.effects._journal import Journal
from savegame.effects._llm import ModelCall
from savegame.effects._prompts import REQUEST, request_of, spec_data
from savegame.effects._replay import Replay, Unserved, digest, same_call
from savegame.effects._tools import Tool, unknown_compensation
from savegame.errors import (
    ApprovalRejected,
    ConfigurationError,
    InDoubtEffectError,
    LeaseLostError,
    NonDeterminismError,
    SerializationError,
    TimedOutError,
    describe,
)
from savegame.model import EffectKind, EffectRecord, EffectStatus, utcnow
from savegame.signals import Cancel, NeedsAttention, Pause

UNSAVEABLE = "the tool's result is not pure data"
_UNKNOWN: Any = object()
"""What a ``reconcile`` that raised answered: nobody knows."""


@dataclass
class PreparedCall:
    """What ``before`` decided for one call."""

    request_id: str
    kind: EffectKind
    name: str
    arguments: dict[str, Any]
    """Arguments to call with (an approver's edit replaces the step's)."""
    _: KW_ONLY
    entry: EffectRecord | None
    """The committed intent (writes), or None."""
    replay: bool = False
    result: Any = None
    """The recorded result, when ``replay``."""
    meta: Mapping[str, Any] | None = None
    tool: Tool | None = None
    """The tool being called (None for model calls)."""
    index: int = 0
    """The call's position in its step execution (the entry's ``call_index``)."""


@dataclass(frozen=True, slots=True)
class ReconciledCall:
    """A call that raised, but the tool's own check (``reconcile``) says it happened."""

    result: Any


def _show(name: str, arguments: Any) -> str:
    if isinstance(arguments, dict):
        inner = ", ".join(f"{key}={value!r}" for key, value in sorted(arguments.items()))
        return f"{name}({inner})"
    return f"{name}(<digest {arguments}>)"


def _recorded(entry: EffectRecord) -> str:
    """A journal entry as a NonDeterminismError about a model call names it."""
    kinds = {EffectKind.LLM: "", EffectKind.APPROVAL: "an approval of "}
    prefix = kinds.get(entry.kind, f"{entry.kind.value} ")
    arguments = decode_value(entry.arguments)
    if entry.kind is EffectKind.LLM and isinstance(arguments, dict):
        # The digest and the summary name the call; the whole request would bury them.
        arguments = {k: v for k, v in arguments.items() if k != REQUEST}
    return prefix + _show(entry.name, arguments)


class Calls:
    """Numbers the calls of one step execution and applies the journal rules to each."""

    def __init__(
        self,
        journal: Journal,
        *,
        run_id: str,
        step: int,
        node: str,
        cancelled: Callable[[], bool],
        replay: Replay | None = None,
        request_ids: Callable[[int], str] | None = None,
        first_index: int = 0,
    ) -> None:
        self.journal = journal
        self.replay = replay
        """A fork's origin journal (:mod:`savegame.effects._replay`); None for other runs."""
        self.run_id = run_id
        self.step = step
        self.node = node
        self._cancelled = cancelled
        self._index = first_index
        self._request_ids = request_ids
        """Another request-id scheme than ``<run>:<step>:<index>``: a LangGraph node's
        calls are named by its task (:mod:`savegame.integrations.langgraph`)."""

    def finished(self) -> None:
        """The step returned: a fork whose step made fewer calls than its origin's did
        has diverged (what the origin's next steps returned depended on the calls this
        one skipped)."""
        if self.replay is not None:
            self.replay.step_done(self.step, self.node, self._index)

    @property
    def made(self) -> int:
        """How many calls this execution has numbered so far."""
        return self._index

    def position(self, request_id: str) -> str:
        """A call's place in its run (``5:2``, in a gather ``5:2:b1:0``): what a fork
        compares with its origin's call at the same place."""
        return request_id[len(self.run_id) + 1 :]

    def peek(self) -> tuple[int, str]:
        """The index and request id the next call will take, without taking them (a
        ``ctx.patched`` marker is named after the call it comes before)."""
        index = self._index
        if self._request_ids is not None:
            return index, self._request_ids(index)
        return index, f"{self.run_id}:{self.step}:{index}"

    def _next_id(self) -> tuple[int, str]:
        taken = self.peek()
        self._index += 1
        return taken

    def _done(self, prepared: PreparedCall, kind: EffectKind, result: bytes) -> EffectRecord:
        """The entry of a call that had none before it returned (a read, a model call)."""
        arguments = encode_value(prepared.arguments, "arguments")
        entry = self._entry(
            prepared.request_id, prepared.index, kind, prepared.name, arguments, prepared.meta or {}
        )
        return replace(entry, status=EffectStatus.DONE, result=result)

    def _entry(
        self,
        request_id: str,
        index: int,
        kind: EffectKind,
        name: str,
        arguments: bytes,
        meta: Mapping[str, Any],
    ) -> EffectRecord:
        return EffectRecord(
            run_id=self.run_id,
            request_id=request_id,
            kind=kind,
            name=name,
            step=self.step,
            node=self.node,
            call_index=index,
            status=EffectStatus.PENDING,
            arguments=arguments,
            metadata=dict(meta),
        )

    def _check_same(
        self,
        existing: EffectRecord,
        name: str,
        encoded: bytes,
        shown: str,
        what: str = "",
    ) -> None:
        if not same_call(existing, name, encoded):
            recorded = what + _show(existing.name, decode_value(existing.arguments))
            raise NonDeterminismError(self.run_id, existing.request_id, recorded, shown)

    # -- tools ---------------------------------------------------------------------
    def before(self, tool: Tool, arguments: dict[str, Any]) -> PreparedCall:
        if self._cancelled():
            raise Cancel()
        index, request_id = self._next_id()
        prepared = self._before(tool, arguments, index, request_id)
        prepared.index = index
        return prepared

    def _before(
        self, tool: Tool, arguments: dict[str, Any], index: int, request_id: str
    ) -> PreparedCall:
        encoded = encode_value(arguments, f"call[{index}].{tool.name}")
        meta: dict[str, Any] = {"idempotent": tool.idempotent}
        if tool.compensate:
            meta["compensate"] = tool.compensate
        existing = self.journal.get(request_id)
        decision = self.journal.get(f"{request_id}:approval")
        if self.replay is not None and existing is None and decision is None:
            at = (self.position(request_id), self.node)
            existing, decision = self.replay.reuse(
                self.journal, tool, at, request_id, arguments, encoded
            )
            refused = decision is not None and decision.status is EffectStatus.REJECTED
            if existing is None and not refused:
                kind = EffectKind.WRITE if tool.effect == "write" else EffectKind.READ
                asked = Unserved(at[0], self.node, kind, tool.name, arguments)
                meta = self.replay.executed(meta, at[0], asked)
        self._check_recorded(tool, arguments, encoded, existing, decision)

        # A decision on record stands, whatever the predicate says now: a rejection too.
        # A call on record as done, with no decision, ran ungated: handed back, never put
        # to a person (whose rejection would tell the step a done call did not happen).
        done = existing is not None and existing.status is EffectStatus.DONE
        if decision is not None or (not done and tool.needs_approval(arguments)):
            arguments, encoded = self._approved(tool, index, request_id, arguments, encoded, meta)

        kind = EffectKind.WRITE if tool.effect == "write" else EffectKind.READ
        if existing is not None and existing.status is EffectStatus.DONE:
            if existing.result is None and existing.error == UNSAVEABLE:
                # The call happened, but its result could not be kept: fail the same way
                # every time rather than hand the step a silent None.
                raise SerializationError(
                    f"result.{tool.name}", UNSAVEABLE + " (recorded at first call)"
                )
            return PreparedCall(
                request_id,
                kind,
                tool.name,
                arguments,
                entry=existing,
                replay=True,
                result=decode_value(existing.result),
                tool=tool,
            )
        if (
            existing is not None
            and existing.status is EffectStatus.PENDING
            and kind is EffectKind.WRITE
        ):
            return self._in_doubt(tool, request_id, arguments, existing)
        if kind is EffectKind.WRITE:
            self._refuse_unknown_compensation(tool)
            entry = self.journal.intent(
                self._entry(request_id, index, kind, tool.name, encoded, meta)
            )
            return PreparedCall(request_id, kind, tool.name, arguments, entry=entry, tool=tool)
        return PreparedCall(
            request_id, kind, tool.name, arguments, entry=None, meta=meta, tool=tool
        )

    def _refuse_unknown_compensation(self, tool: Tool) -> None:
        """A write whose undo names no tool is refused before it happens: its compensation
        would find nothing to call."""
        problem = unknown_compensation(tool)
        if problem is not None:
            raise ConfigurationError(f"run {self.run_id}, step {self.node!r}: {problem}")

    def _check_recorded(
        self,
        tool: Tool,
        arguments: dict[str, Any],
        encoded: bytes,
        existing: EffectRecord | None,
        decision: EffectRecord | None,
    ) -> None:
        """Refuse a call that is not the one recorded at its position (or approved there)."""
        shown = _show(tool.name, arguments)
        if decision is not None:
            # Approved means this call: the tool and arguments a person saw. A step that
            # now computes another call here (a redeploy, a changed config value) must
            # not run it under that approval.
            self._check_same(decision, tool.name, encoded, shown, "an approval of ")
        if existing is not None and existing.status is not EffectStatus.NOT_DONE:
            if decision is None:
                self._check_same(existing, tool.name, encoded, shown)
            elif existing.name != tool.name:
                recorded = _show(existing.name, decode_value(existing.arguments))
                raise NonDeterminismError(self.run_id, existing.request_id, recorded, shown)

    def _in_doubt(
        self, tool: Tool, request_id: str, arguments: dict[str, Any], existing: EffectRecord
    ) -> PreparedCall:
        """A write in doubt: its intent was committed, its result never was. It is called
        again (idempotent: the same request id), settled by the tool's own check, or the
        run stops for a person."""
        kind = EffectKind.WRITE
        if tool.idempotent:
            return PreparedCall(request_id, kind, tool.name, arguments, entry=existing, tool=tool)
        if tool.reconcile is not None:
            try:
                found = tool.reconcile(request_id)
            except Exception as exc:
                # The tool's own check could not tell: still in doubt, never a fallback
                # the step might take (a second charge through another provider).
                raise NeedsAttention(
                    InDoubtEffectError(self.run_id, tool.name, arguments, request_id, exc)
                ) from exc
            if found is not None:
                settled = self._reconciled(existing, tool, found)
                return PreparedCall(
                    request_id,
                    kind,
                    tool.name,
                    arguments,
                    entry=settled,
                    replay=True,
                    result=found,
                    tool=tool,
                )
            return PreparedCall(request_id, kind, tool.name, arguments, entry=existing, tool=tool)
        raise NeedsAttention(InDoubtEffectError(self.run_id, tool.name, arguments, request_id))

    def _reconciled(self, entry: EffectRecord, tool: Tool, found: Any) -> EffectRecord:
        return self.journal.settle(
            entry,
            EffectStatus.DONE,
            result=encode_value(found, f"reconcile.{tool.name}"),
            metadata={"reconciled": True},
        )

    def _approved(
        self,
        tool: Tool,
        index: int,
        request_id: str,
        arguments: dict[str, Any],
        encoded: bytes,
        meta: Mapping[str, Any],
    ) -> tuple[dict[str, Any], bytes]:
        approval_id = f"{request_id}:approval"
        decision = self.journal.get(approval_id)
        if decision is None:
            gate = {**meta, **expiry.gate_metadata(tool.expires, tool.on_expiry)}
            decision = self.journal.intent(
                self._entry(approval_id, index, EffectKind.APPROVAL, tool.name, encoded, gate)
            )
            expiry.wait(self.journal, decision)
        if decision.status is EffectStatus.PENDING:
            decision = expiry.apply_if_due(self.journal, decision)
        if decision.status is EffectStatus.PENDING:
            expiry.wait(self.journal, decision)
        if decision.status is EffectStatus.REJECTED:
            raise ApprovalRejected(
                self.run_id,
                tool.name,
                decision.error or "no reason given",
                decision.metadata.get("by"),
            )
        verdict = decode_value(decision.result) or {}
        edit = verdict.get("edit") if isinstance(verdict, dict) else None
        if edit is None:
            return arguments, encoded
        edited = tool.bind((), edit)
        return edited, encode_value(edited, f"approval.edit.{tool.name}")

    def failed(self, prepared: PreparedCall, error: Exception) -> ReconciledCall | None:
        """Record that the call raised ``error``; the caller raises it again unless this
        returns that the call happened after all.

        An exception does not prove a write did not happen (a timeout after the card was
        charged). It is settled not-done, to be called afresh, only when that is safe: the
        tool is idempotent (a new call carries the same request id), or ``error`` is one of
        its ``safe_errors``. A tool with ``reconcile`` is asked at once. Any other write
        stays in doubt and the run stops for a person, as after a crash mid-call.

        Raises:
            NeedsAttention: the write is in doubt.
        """
        entry, tool = prepared.entry, prepared.tool
        if entry is None or tool is None:
            return None  # a read: nothing was journaled, nothing to settle
        text = describe(error)
        # Running out of time proves nothing happened, whatever safe_errors lists.
        timed_out = isinstance(error, TimedOutError)
        abandoned = isinstance(error, TimedOutError) and error.abandoned
        if tool.idempotent or (tool.proves_not_done(error) and not timed_out):
            self._settle_write(prepared, entry, EffectStatus.NOT_DONE, error=text)
            return None
        # A sync call left running may still land after any answer reconcile gives now.
        if tool.reconcile is not None and not abandoned:
            try:
                found = tool.reconcile(prepared.request_id)
            except Exception:
                found = _UNKNOWN
            if found is None:
                self._settle_write(prepared, entry, EffectStatus.NOT_DONE, error=text)
                return None
            if found is not _UNKNOWN:
                self._reconciled(entry, tool, found)
                return ReconciledCall(found)
        # Still pending, with what it raised, for the person who settles it.
        self._settle_write(
            prepared, entry, EffectStatus.PENDING, error=text, metadata={"raised": True}
        )
        raise NeedsAttention(
            InDoubtEffectError(self.run_id, tool.name, prepared.arguments, entry.request_id, error)
        )

    def _settle_write(
        self,
        prepared: PreparedCall,
        entry: EffectRecord,
        status: EffectStatus,
        **outcome: Any,
    ) -> None:
        """Record a write's outcome; if the store cannot, the write is in doubt.

        The step must not see an ordinary exception here: it could take a fallback (a
        second charge through another provider) while the first one may have happened.
        """
        try:
            self.journal.settle(entry, status, **outcome)
        except LeaseLostError:
            raise  # the run is someone else's now; it finds the entry pending, in doubt
        except Exception as exc:
            raise NeedsAttention(
                InDoubtEffectError(
                    self.run_id, prepared.name, prepared.arguments, entry.request_id, exc
                )
            ) from exc

    def after(self, prepared: PreparedCall, result: Any = None) -> Any:
        entry = prepared.entry
        try:
            encoded = encode_value(result, f"result.{prepared.name}")
        except SerializationError:
            if entry is not None:
                self._settle_write(prepared, entry, EffectStatus.DONE, error=UNSAVEABLE)
            raise
        if entry is not None:
            self._settle_write(prepared, entry, EffectStatus.DONE, result=encoded)
        else:
            done = self._done(prepared, prepared.kind, encoded)
            if prepared.tool is not None and prepared.tool.durable:
                # Committed before the step goes on, not with the next checkpoint: a read
                # that cost money or time is not paid again if the process dies first.
                self.journal.intent(replace(done, completed_at=utcnow()))
            else:
                self.journal.buffer(done)
        return result

    # -- model calls and interrupts --------------------------------------------------------
    def before_llm(self, call: ModelCall) -> PreparedCall:
        """The recorded response of this model call (replay), or what to record.

        A replay compares a digest of the request (the messages and the tool names),
        with a summary beside it for people. Anything but the same model with the same
        digest at this position (another model, other messages, a tool call) is refused.
        A call to make records its whole request too (model parameters, messages, tool
        specs), each part once per run (:mod:`savegame.effects._prompts`).
        """
        if self._cancelled():
            raise Cancel()
        index, request_id = self._next_id()
        asked = digest(canonical(call.request))
        arguments = {"digest": asked, **call.summary}
        existing = self.journal.get(request_id)
        meta: dict[str, Any] = {}
        if self.replay is not None and existing is None:
            at = (self.position(request_id), self.node)
            existing = self.replay.reuse_llm(self.journal, call, asked, at, request_id)
            if existing is None:
                request = {"messages": call.messages, "tools": spec_data(call)}
                unserved = Unserved(at[0], self.node, EffectKind.LLM, call.name, request)
                meta = self.replay.executed(meta, at[0], unserved)
        for recorded in (self.journal.get(f"{request_id}:approval"), existing):
            if recorded is not None and not call.matches(recorded, asked):
                raise NonDeterminismError(
                    self.run_id, request_id, _recorded(recorded), _show(call.name, arguments)
                )
        if existing is not None and existing.status is EffectStatus.DONE:
            result = decode_value(existing.result)
            return PreparedCall(
                request_id,
                EffectKind.LLM,
                call.name,
                {},
                entry=existing,
                replay=True,
                result=result,
            )
        arguments[REQUEST] = request_of(call, self.journal.parts())
        return PreparedCall(
            request_id, EffectKind.LLM, call.name, arguments, entry=None, meta=meta, index=index
        )

    def stream_started(self, prepared: PreparedCall) -> EffectRecord:
        """A stream of this model call is about to start (:mod:`savegame.effects._streams`)."""
        return streams.started(self.journal, self._done(prepared, EffectKind.LLM, b""))

    def stream_ended(self, marker: EffectRecord, error: BaseException | None = None) -> None:
        streams.ended(self.journal, marker, error)

    def after_llm(self, prepared: PreparedCall, response: Any) -> Any:
        done = self._done(
            prepared, EffectKind.LLM, encode_value(response, f"result.{prepared.name}")
        )
        # Committed at once, complete: a resume must never pay for this call again.
        self.journal.intent(replace(done, completed_at=utcnow()))
        return response

    def interrupt(self, name: str, payload: Any) -> Any:
        index, request_id = self._next_id()
        encoded = encode_value(payload, f"interrupt[{index}]")
        existing = self.journal.get(request_id)
        if existing is None and self.replay is not None and self.replay.strict:
            at = (self.position(request_id), self.node)
            existing = self.replay.reuse_interrupt(
                self.journal, at, request_id, name, payload, encoded
            )
        if existing is None:
            self.journal.intent(
                self._entry(request_id, index, EffectKind.INTERRUPT, name, encoded, {})
            )
            raise Pause(request_id)
        if existing.kind is not EffectKind.INTERRUPT or not same_call(existing, name, encoded):
            # A value answers the question a person saw: asked another (a redeploy made
            # the amount 1000000), it must not be taken as the answer to this one.
            recorded = decode_value(existing.arguments)
            raise NonDeterminismError(
                self.run_id,
                request_id,
                f"{existing.kind.value} {existing.name!r} asking {recorded!r}",
                f"interrupt {name!r} asking {payload!r}",
            )
        if existing.status is EffectStatus.DONE:
            return decode_value(existing.result)
        raise Pause(request_id)
