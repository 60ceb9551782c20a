"""Exactly-once calls: the protocol behind ``ctx.call``, split around the actual call.

``before`` decides from the journal what to do (replay a recorded result, wait
for approval, stop on an in-doubt write, or call) and commits a write's intent;
the caller then calls the tool (sync or async); ``after`` records the outcome.
Splitting it this way lets ``ctx.call`` and ``await ctx.acall`` share every rule.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from savegame.codec.journal import decode_value, encode_value
from savegame.codec.values import canonical
from savegame.effects.journal import Journal
from savegame.effects.tools import Tool
from savegame.errors import (
    ApprovalRejected,
    InDoubtEffectError,
    NonDeterminismError,
    SerializationError,
)
from savegame.model import EffectKind, EffectRecord, EffectStatus
from savegame.runtime.signals import Cancel, NeedsAttention, Pause

UNSAVEABLE = "the tool's result is not pure data"


@dataclass
class Prepared:
    """What ``before`` decided for one call."""

    request_id: str
    kind: EffectKind
    name: str
    arguments: dict[str, Any]
    """Arguments to call with (an approver's edit replaces the step's)."""
    entry: EffectRecord | None
    """The committed intent (writes), or None."""
    replay: bool = False
    result: Any = None
    """The recorded result, when ``replay``."""
    meta: Mapping[str, Any] | None = None


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=12).hexdigest()


def _show(name: str, arguments: Any) -> str:
    if isinstance(arguments, dict):
        inner = ", ".join(f"{key}={value!r}" for key, value in sorted(arguments.items()))
        return f"{name}({inner})"
    return f"{name}(<digest {arguments}>)"


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
    ) -> None:
        self.journal = journal
        self.run_id = run_id
        self.step = step
        self.node = node
        self._cancelled = cancelled
        self._index = 0

    def _next_id(self) -> tuple[int, str]:
        index = self._index
        self._index += 1
        return index, f"{self.run_id}:{self.step}:{index}"

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

    def _check_same(self, existing: EffectRecord, name: str, digest: str, shown: str) -> None:
        if existing.name != name or existing.metadata.get("called_with") != digest:
            recorded = _show(existing.name, decode_value(existing.arguments))
            raise NonDeterminismError(self.run_id, existing.request_id, recorded, shown)

    # -- tools ---------------------------------------------------------------------
    def before(self, tool: Tool, arguments: dict[str, Any]) -> Prepared:
        if self._cancelled():
            raise Cancel()
        index, request_id = self._next_id()
        encoded = encode_value(arguments, f"call[{index}].{tool.name}")
        digest = _digest(encoded)  # the canonical bytes: the same value always hashes the same
        shown = _show(tool.name, arguments)
        meta: dict[str, Any] = {"called_with": digest, "idempotent": tool.idempotent}
        if tool.compensate:
            meta["compensate"] = tool.compensate
        existing = self.journal.get(request_id)
        if existing is not None and existing.status is not EffectStatus.NOT_DONE:
            self._check_same(existing, tool.name, digest, shown)

        if tool.needs_approval(arguments):
            arguments, encoded = self._approved(tool, index, request_id, arguments, encoded, meta)
            meta["approved_as"] = _digest(encoded)

        kind = EffectKind.WRITE if tool.effect == "write" else EffectKind.READ
        if existing is not None and existing.status is EffectStatus.DONE:
            if existing.result is None and existing.error == UNSAVEABLE:
                # The call happened, but its result could not be kept: fail the same way
                # every time rather than hand the step a silent None.
                raise SerializationError(
                    f"result.{tool.name}", UNSAVEABLE + " (recorded at first call)"
                )
            return Prepared(
                request_id,
                kind,
                tool.name,
                arguments,
                existing,
                True,
                decode_value(existing.result),
            )
        if (
            existing is not None
            and existing.status is EffectStatus.PENDING
            and kind is EffectKind.WRITE
        ):
            # In doubt: the intent was committed, the result never was.
            if tool.idempotent:
                return Prepared(request_id, kind, tool.name, arguments, existing)
            if tool.reconcile is not None:
                found = tool.reconcile(request_id)
                if found is not None:
                    settled = self.journal.settle(
                        existing,
                        EffectStatus.DONE,
                        result=encode_value(found, f"reconcile.{tool.name}"),
                        metadata={"reconciled": True},
                    )
                    return Prepared(request_id, kind, tool.name, arguments, settled, True, found)
                return Prepared(request_id, kind, tool.name, arguments, existing)
            raise NeedsAttention(InDoubtEffectError(self.run_id, tool.name, arguments, request_id))
        if kind is EffectKind.WRITE:
            entry = self.journal.intent(
                self._entry(request_id, index, kind, tool.name, encoded, meta)
            )
            return Prepared(request_id, kind, tool.name, arguments, entry)
        return Prepared(request_id, kind, tool.name, arguments, None, meta=meta)

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
            self.journal.intent(
                self._entry(approval_id, index, EffectKind.APPROVAL, tool.name, encoded, meta)
            )
            raise Pause(approval_id)
        if decision.status is EffectStatus.PENDING:
            raise Pause(approval_id)
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

    def after(
        self, prepared: Prepared, result: Any = None, error: BaseException | None = None
    ) -> Any:
        entry = prepared.entry
        if error is not None:
            if entry is not None:
                # The call raised, so it did not complete: the next execution calls afresh.
                self.journal.settle(
                    entry, EffectStatus.NOT_DONE, error=f"{type(error).__name__}: {error}"
                )
            return None
        try:
            encoded = encode_value(result, f"result.{prepared.name}")
        except SerializationError:
            if entry is not None:
                self.journal.settle(entry, EffectStatus.DONE, error=UNSAVEABLE)
            raise
        if entry is not None:
            self.journal.settle(entry, EffectStatus.DONE, result=encoded)
        else:
            index = int(prepared.request_id.rsplit(":", 1)[1])
            done = self._entry(
                prepared.request_id,
                index,
                prepared.kind,
                prepared.name,
                encode_value(prepared.arguments, "arguments"),
                prepared.meta or {},
            )
            self.journal.buffer(replace(done, status=EffectStatus.DONE, result=encoded))
        return result

    # -- model calls and interrupts --------------------------------------------------------
    def before_llm(self, name: str, request: Any) -> Prepared:
        if self._cancelled():
            raise Cancel()
        _index, request_id = self._next_id()
        digest = _digest(canonical(request))
        existing = self.journal.get(request_id)
        if existing is not None and existing.status is EffectStatus.DONE:
            self._check_same(existing, name, digest, f"{name}(<digest {digest}>)")
            return Prepared(
                request_id, EffectKind.LLM, name, {}, existing, True, decode_value(existing.result)
            )
        # Only a digest of the prompt is kept: the messages already live in the state.
        return Prepared(
            request_id, EffectKind.LLM, name, {"digest": digest}, None, meta={"called_with": digest}
        )

    def after_llm(self, prepared: Prepared, response: Any) -> Any:
        index = int(prepared.request_id.rsplit(":", 1)[1])
        entry = self._entry(
            prepared.request_id,
            index,
            EffectKind.LLM,
            prepared.name,
            encode_value(prepared.arguments, "arguments"),
            prepared.meta or {},
        )
        # Committed at once, complete: a resume must never pay for this call again.
        self.journal.intent(
            replace(
                entry,
                status=EffectStatus.DONE,
                result=encode_value(response, f"result.{prepared.name}"),
            )
        )
        return response

    def interrupt(self, name: str, payload: Any) -> Any:
        index, request_id = self._next_id()
        encoded = encode_value(payload, f"interrupt[{index}]")
        existing = self.journal.get(request_id)
        if existing is None:
            meta = {"called_with": _digest(encoded)}
            self.journal.intent(
                self._entry(request_id, index, EffectKind.INTERRUPT, name, encoded, meta)
            )
            raise Pause(request_id)
        if existing.kind is not EffectKind.INTERRUPT:
            raise NonDeterminismError(
                self.run_id,
                request_id,
                _show(existing.name, decode_value(existing.arguments)),
                f"interrupt({name})",
            )
        if existing.status is EffectStatus.DONE:
            return decode_value(existing.result)
        raise Pause(request_id)
