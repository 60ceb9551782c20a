"""A fork replayed against the journal of the branch it left.

A fork is a new run that starts from a checkpoint of another run (its *origin*). In
``replay`` mode each call the fork makes (a tool, a read, a model call) is compared
with the origin's journal entry at the same position (step, call index, step name): the
same tool with the same arguments gets the recorded result back, copied into the fork's
own journal as ``reused``, and nothing is called. From the first call that differs the
fork has *diverged*: that call and every later one execute for real (marked
``executed``), and the rest of the origin's journal is never used again, even where a
later call happens to match. ``redo`` executes everything.

Divergence survives a crash: an executed call of the fork is journaled with its
marker (a write's intent before it happens, a model response at once, a read with
the next checkpoint or the next commit), so a resumed fork finds it and does not go
back to reusing. The markers are entry metadata, covered by the entry's check.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from savegame.codec import decode_value, encode_value
from savegame.effects._journal import Journal
from savegame.effects._llm import ModelCall
from savegame.effects._prompts import parts_of, with_parts
from savegame.effects._tools import Tool
from savegame.errors import InDoubtEffectError
from savegame.model import EffectKind, EffectRecord, EffectStatus, utcnow
from savegame.signals import NeedsAttention

Mode = Literal["replay", "redo"]
"""How a fork runs: ``replay`` reuses the origin's matching calls, ``redo`` executes all."""

MODES: tuple[Mode, ...] = ("replay", "redo")

FORK_KEY = "fork"
"""Where a fork's first checkpoint (and so its run row) names its origin."""
REPLAY_KEY = "replay"
"""The journal entry metadata of a fork's call: :data:`REUSED` or :data:`EXECUTED`."""
REUSED, EXECUTED = "reused", "executed"

_REPLAYED = (EffectKind.READ, EffectKind.WRITE, EffectKind.LLM, EffectKind.APPROVAL)


def digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=12).hexdigest()


def same_call(entry: EffectRecord, name: str, encoded: bytes) -> bool:
    """Whether ``entry`` records a call of ``name`` with these canonical arguments."""
    if entry.name != name:
        return False
    # Entries written before format 2 of the journal kept a digest of the arguments in
    # plaintext metadata; newer ones compare the (decrypted) arguments themselves, so
    # nothing derived from an encrypted value is stored in the clear.
    legacy = entry.metadata.get("called_with")
    if legacy is not None:
        return bool(legacy == digest(encoded))
    return entry.arguments == encoded


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a fork came from, as its run row's metadata records it."""

    run_id: str
    """The run the fork left."""
    checkpoint_id: str
    """The checkpoint it starts from."""
    step: int
    """That checkpoint's step: the fork's calls from step ``step + 1`` on are compared."""
    mode: Mode

    def to_metadata(self) -> dict[str, Any]:
        return {
            "run": self.run_id,
            "checkpoint": self.checkpoint_id,
            "step": self.step,
            "mode": self.mode,
        }

    @classmethod
    def of(cls, metadata: Mapping[str, Any]) -> Origin | None:
        """The origin a run's metadata names, or None for a run that is not a fork."""
        data = metadata.get(FORK_KEY)
        if not isinstance(data, Mapping):
            return None
        run, cp, step, mode = (data.get(k) for k in ("run", "checkpoint", "step", "mode"))
        if not (isinstance(run, str) and isinstance(cp, str) and isinstance(step, int)):
            return None
        return cls(run, cp, step, "redo" if mode == "redo" else "replay")


def _position(entry: EffectRecord, origin_run: str) -> str | None:
    """``step:index`` (``:approval``) of a call entry of ``origin_run``; None for others
    (a retry's attempt, a compensation)."""
    prefix = origin_run + ":"
    if entry.kind not in _REPLAYED or not entry.request_id.startswith(prefix):
        return None
    position = entry.request_id[len(prefix) :]
    parts = position.split(":")
    if len(parts) == 3 and parts[2] != "approval":
        return None
    return position if len(parts) in (2, 3) else None


class Replay:
    """One execution's view of a fork's origin: the recorded calls it may reuse."""

    def __init__(self, origin: Origin, recorded: Iterable[EffectRecord], diverged: bool) -> None:
        self.origin = origin
        self._at: dict[str, EffectRecord] = {}
        self._models: list[EffectRecord] = []
        for entry in recorded:
            position = _position(entry, origin.run_id)
            if position is not None and entry.step > origin.step:
                self._at[position] = entry
            if entry.kind is EffectKind.LLM:
                self._models.append(entry)
        self._parts: dict[str, Any] | None = None
        self.diverged = diverged or origin.mode == "redo"

    @classmethod
    def of(
        cls, origin: Origin, recorded: Iterable[EffectRecord], own: Iterable[EffectRecord]
    ) -> Replay:
        """``recorded``: the origin's journal, opened; ``own``: the fork's, opened."""
        diverged = any(e.metadata.get(REPLAY_KEY) == EXECUTED for e in own)
        return cls(origin, recorded if origin.mode == "replay" else (), diverged)

    def recorded(
        self, step: int, index: int, node: str, approval: bool = False
    ) -> EffectRecord | None:
        """The origin's settled entry at this position, while the fork has not diverged."""
        if self.diverged:
            return None
        entry = self._at.get(f"{step}:{index}" + (":approval" if approval else ""))
        if entry is None or entry.node != node or entry.status is not EffectStatus.DONE:
            return None
        return entry

    def _refuse_in_doubt(
        self,
        step: int,
        index: int,
        node: str,
        tool: Tool,
        arguments: dict[str, Any],
        encoded: bytes,
    ) -> None:
        """The origin made this very write and nobody knows whether it happened (killed
        mid-call, or still running): calling it again from the fork could do it twice,
        so the fork stops for a person, who settles the origin's entry (the fork then
        reuses what they record) or forks with ``mode="redo"``."""
        if self.diverged:
            return
        entry = self._at.get(f"{step}:{index}")
        if (
            entry is not None
            and entry.node == node
            and entry.kind is EffectKind.WRITE
            and entry.status is EffectStatus.PENDING
            and same_call(entry, tool.name, encoded)
        ):
            raise NeedsAttention(
                InDoubtEffectError(self.origin.run_id, tool.name, arguments, entry.request_id)
            )

    def copy(self, entry: EffectRecord, run_id: str, request_id: str) -> EffectRecord:
        """``entry`` as the fork's own, marked reused (sealed again for the fork when stored)."""
        # The write happened in the origin run: undoing it is the origin's saga, never the
        # fork's, so the copy names no compensation.
        meta = {k: v for k, v in entry.metadata.items() if k != "compensate"}
        meta = {**meta, REPLAY_KEY: REUSED, "reused_from": entry.request_id}
        return replace(
            entry, run_id=run_id, request_id=request_id, metadata=meta, checksum="",
            created_at=utcnow(), completed_at=utcnow(),
        )  # fmt: skip

    def reuse(
        self,
        journal: Journal,
        tool: Tool,
        at: tuple[int, int, str],
        request_id: str,
        arguments: dict[str, Any],
        encoded: bytes,
    ) -> tuple[EffectRecord | None, EffectRecord | None]:
        """The origin's call at ``at`` (step, index, step name) and its approval, copied
        into the fork's journal when it is this call: (call, approval), (None, approval)
        when only the approval stands, (None, None) where the fork diverges.

        An approval is reused only for the arguments it approved: any other call, or a
        call the origin made without one that now needs one, is asked again."""
        step, index, node = at
        gate = self.recorded(step, index, node, approval=True)
        approved = None
        if gate is not None or tool.needs_approval(arguments):
            if gate is None or not same_call(gate, tool.name, encoded):
                return None, None
            approved = journal.intent(self.copy(gate, journal.run_id, f"{request_id}:approval"))
            verdict = decode_value(approved.result)
            edit = verdict.get("edit") if isinstance(verdict, dict) else None
            if edit is not None:
                encoded = encode_value(tool.bind((), edit), f"approval.edit.{tool.name}")
        call = self.recorded(step, index, node)
        if call is None:
            self._refuse_in_doubt(step, index, node, tool, arguments, encoded)
        # A done entry with an error kept no result (it was not pure data): not reused.
        if call is None or not same_call(call, tool.name, encoded) or call.error is not None:
            return None, approved
        return journal.intent(self.copy(call, journal.run_id, request_id)), approved

    def reuse_llm(
        self,
        journal: Journal,
        call: ModelCall,
        asked: str,
        at: tuple[int, int, str],
        request_id: str,
    ) -> EffectRecord | None:
        """The origin's response at ``at``, copied, when it answered this request."""
        found = self.recorded(*at)
        if found is None or not call.matches(found, asked):
            return None
        if self._parts is None:
            self._parts = {}
            for entry in self._models:
                self._parts.update(parts_of(entry))
        # The fork's journal is to show what was asked without the origin's (which a
        # prune may remove): the copy brings the parts the origin recorded before it.
        copied = with_parts(
            self.copy(found, journal.run_id, request_id), journal.parts(), self._parts
        )
        return journal.intent(copied)

    def step_done(self, step: int, node: str, made: int) -> None:
        """After a step that made ``made`` calls: the origin made more at that step."""
        if self.diverged:
            return
        for position, entry in self._at.items():
            at_step, index = position.split(":")[:2]
            if int(at_step) == step and int(index) >= made and entry.node == node:
                self.diverged = True
                return

    def executed(self, meta: Mapping[str, Any]) -> dict[str, Any]:
        """``meta`` marked executed; from here on the fork has diverged."""
        self.diverged = True
        return {**meta, REPLAY_KEY: EXECUTED}


__all__ = [
    "EXECUTED",
    "FORK_KEY",
    "MODES",
    "REPLAY_KEY",
    "REUSED",
    "Mode",
    "Origin",
    "Replay",
    "digest",
    "same_call",
]
