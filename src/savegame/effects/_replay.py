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

A gather's branches (``ctx.gather``, ``ctx.map``) run concurrently, so divergence is
kept per branch: a call inside branch ``k`` is compared with the origin's call at the
same position inside the same branch (``<step>:<index>:b<k>:<n>``), and a branch that
diverges stops reusing only its own calls; the other branches go on reusing theirs
whatever order they run in. Once the gather is over, the fork has diverged if any
branch did (or made fewer calls, or fewer branches, than the origin's).

A *strict* replay (``savegame replay``: recorded runs against new code, in a scratch
store) never executes: where a fork would diverge, it raises :class:`Diverged` instead,
before anything is called, naming what the code asked and what the journal holds there.
The first such divergence is the one every later call of the execution raises again (a
gather's other branches end too, none of them calling anything).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, NoReturn

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

#: A call's place in its run: ``<step>:<index>``, inside gathers ``:b<branch>:<n>`` (as
#: deep as they nest), an approval ``:approval``; a retry's attempt is none.
_POSITION = re.compile(r"\d+:\d+(?::b\d+:\d+)*(?::approval)?")


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
    strict: bool = False
    """A strict replay's: a call the journal does not serve raises :class:`Diverged`
    instead of executing. Never stored: it lives in the process that replays."""

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


def position_of(request_id: str, run_id: str) -> str | None:
    """A call's position (``5:2``, ``5:2:b1:0``, ``5:2:approval``) from its request id in
    run ``run_id``; None for other entries (an attempt, a compensation, an event)."""
    prefix = run_id + ":"
    if not request_id.startswith(prefix):
        return None
    position = request_id[len(prefix) :]
    return position if _POSITION.fullmatch(position) else None


def scopes(position: str) -> list[str]:
    """The gather branches a position lies in, outermost first: ``5:2:b1:3`` ->
    ``["5:2:b1"]``; none for a call of the step itself."""
    parts = position.removesuffix(":approval").split(":")
    return [":".join(parts[: i + 1]) for i in range(2, len(parts) - 1, 2)]


#: What a strict replay answers from the journal beside calls: a person's answer to
#: ``ctx.interrupt`` (a fork asks its person again), a wait's event, a timer, a child run.
_ANSWERED = (
    EffectKind.INTERRUPT, EffectKind.WAIT, EffectKind.SLEEP, EffectKind.CHILD,
)  # fmt: skip


def _position(entry: EffectRecord, origin_run: str, strict: bool = False) -> str | None:
    """The position of a call entry of ``origin_run``; None for others."""
    if entry.kind not in _REPLAYED and not (strict and entry.kind in _ANSWERED):
        return None
    return position_of(entry.request_id, origin_run)


@dataclass(frozen=True, slots=True)
class Unserved:
    """A call a strict replay found no recorded answer for: what the code asked."""

    position: str
    """Its place in the run: ``5:2``, in a gather ``5:2:b1:0``."""
    node: str
    """The step that made it."""
    kind: EffectKind
    name: str
    """The tool's name, or ``llm:<model>``."""
    arguments: Any
    """A tool's arguments; a model call's request (``messages``, ``tools``: the specs)."""


class Diverged(BaseException):
    """A strict replay met what the journal does not answer: a call it holds no result
    for at that position (another tool, other arguments, another prompt), or a step that
    made fewer calls than the recording's. Nothing was called.

    A BaseException, as the runtime's signals are: a step's ``except Exception`` must not
    take it for a tool's error and go on.
    """

    def __init__(
        self,
        origin: str,
        position: str,
        node: str,
        reason: str,
        asked: Unserved | None,
        recorded: EffectRecord | None,
    ) -> None:
        self.origin = origin
        """The recorded run."""
        self.position = position
        self.node = node
        self.reason = reason
        self.asked = asked
        """What the code asked (None: it asked nothing more where the journal holds a call)."""
        self.recorded = recorded
        """The recorded run's entry at that position, if any (its approval's when only that)."""
        super().__init__(f"run {origin} diverged at {position} (step {node!r}): {reason}")

    @property
    def step(self) -> int:
        return int(self.position.split(":")[0])


class Replay:
    """One execution's view of a fork's origin: the recorded calls it may reuse."""

    def __init__(
        self,
        origin: Origin,
        recorded: Iterable[EffectRecord],
        diverged: bool,
        branches: Iterable[str] = (),
    ) -> None:
        self.origin = origin
        self._at: dict[str, EffectRecord] = {}
        self._models: list[EffectRecord] = []
        for entry in recorded:
            position = _position(entry, origin.run_id, origin.strict)
            if position is not None and entry.step > origin.step:
                self._at[position] = entry
            if entry.kind is EffectKind.LLM:
                self._models.append(entry)
        self._parts: dict[str, Any] | None = None
        self.diverged = diverged or origin.mode == "redo"
        self._branches = set(branches)
        """The gather branches (``5:2:b1``) that diverged while the fork had not."""
        self.strict = origin.strict
        self.first: Diverged | None = None
        """A strict replay's first divergence: raised again by every later call."""

    @classmethod
    def of(
        cls,
        origin: Origin,
        recorded: Iterable[EffectRecord],
        own: Iterable[EffectRecord],
        resumed_at: int = 0,
    ) -> Replay:
        """``recorded``: the origin's journal, opened; ``own``: the fork's, opened;
        ``resumed_at``: the step of the checkpoint this execution starts from.

        An executed call inside a gather of a step after ``resumed_at`` (the step runs
        again) marks only its branch; its gather ends again in this execution and says
        whether the fork diverged there. One in an earlier step: its gather ended."""
        diverged, branches = False, set()
        for entry in own:
            if entry.metadata.get(REPLAY_KEY) != EXECUTED:
                continue
            inside = scopes(position_of(entry.request_id, entry.run_id) or "")
            if inside and entry.step > resumed_at:
                branches.add(inside[-1])
            else:
                diverged = True
        return cls(origin, recorded if origin.mode == "replay" else (), diverged, branches)

    def _blocked(self, position: str) -> bool:
        """Whether the call at ``position`` executes for real: the fork, or a branch it
        lies in, has diverged."""
        if self.first is not None:
            return True
        return self.diverged or any(s in self._branches for s in scopes(position))

    def _strictly(self, position: str, node: str, reason: str, asked: Unserved | None) -> NoReturn:
        """A strict replay stops here, before anything is called."""
        if self.first is None:
            found = self._at.get(position) or self._at.get(f"{position}:approval")
            self.first = Diverged(self.origin.run_id, position, node, reason, asked, found)
        raise self.first

    def recorded(self, position: str, node: str, approval: bool = False) -> EffectRecord | None:
        """The origin's settled entry at this position, while the fork has not diverged."""
        if self._blocked(position):
            return None
        entry = self._at.get(position + (":approval" if approval else ""))
        if entry is None or entry.node != node:
            return None
        # A strict replay answers a rejection too: the step hears ApprovalRejected again
        # (a fork asks its person anew).
        rejected = approval and self.strict and entry.status is EffectStatus.REJECTED
        return entry if entry.status is EffectStatus.DONE or rejected else None

    def _refuse_in_doubt(
        self,
        position: str,
        node: str,
        tool: Tool,
        arguments: dict[str, Any],
        encoded: bytes,
    ) -> None:
        """The origin made this very write and nobody knows whether it happened (killed
        mid-call, or still running): calling it again from the fork could do it twice,
        so the fork stops for a person, who settles the origin's entry (the fork then
        reuses what they record) or forks with ``mode="redo"``."""
        if self._blocked(position):
            return
        entry = self._at.get(position)
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
        at: tuple[str, str],
        request_id: str,
        arguments: dict[str, Any],
        encoded: bytes,
    ) -> tuple[EffectRecord | None, EffectRecord | None]:
        """The origin's call at ``at`` (position, step name) and its approval, copied
        into the fork's journal when it is this call: (call, approval), (None, approval)
        when only the approval stands, (None, None) where the fork diverges.

        An approval is reused only for the arguments it approved: any other call, or a
        call the origin made without one that now needs one, is asked again."""
        position, node = at
        gate = self.recorded(position, node, approval=True)
        approved = None
        if gate is not None or tool.needs_approval(arguments):
            if gate is None or not same_call(gate, tool.name, encoded):
                return None, None
            approved = journal.intent(self.copy(gate, journal.run_id, f"{request_id}:approval"))
            verdict = decode_value(approved.result)
            edit = verdict.get("edit") if isinstance(verdict, dict) else None
            if edit is not None:
                encoded = encode_value(tool.bind((), edit), f"approval.edit.{tool.name}")
        call = self.recorded(position, node)
        if call is None and not self.strict:
            self._refuse_in_doubt(position, node, tool, arguments, encoded)
        # A done entry with an error kept no result (it was not pure data): not reused.
        if call is None or not same_call(call, tool.name, encoded) or call.error is not None:
            return None, approved
        return journal.intent(self.copy(call, journal.run_id, request_id)), approved

    def reuse_llm(
        self,
        journal: Journal,
        call: ModelCall,
        asked: str,
        at: tuple[str, str],
        request_id: str,
    ) -> EffectRecord | None:
        """The origin's response at ``at`` (position, step name), copied, when it
        answered this request."""
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

    def reuse_interrupt(
        self,
        journal: Journal,
        at: tuple[str, str],
        request_id: str,
        name: str,
        payload: Any,
        encoded: bytes,
    ) -> EffectRecord:
        """A strict replay's ``ctx.interrupt``: the answer the origin's person gave to this
        very question, copied; any other question raises :class:`Diverged`."""
        position, node = at
        found = self.recorded(position, node)
        if (
            found is None
            or found.kind is not EffectKind.INTERRUPT
            or not same_call(found, name, encoded)
        ):
            asked = Unserved(position, node, EffectKind.INTERRUPT, name, payload)
            self._strictly(position, node, "the journal holds no answer to this question", asked)
        return journal.intent(self.copy(found, journal.run_id, request_id))

    def reuse_wait(
        self,
        journal: Journal,
        at: tuple[str, str],
        request_id: str,
        kind: EffectKind,
        name: str,
        *,
        asked: Mapping[str, Any] | None = None,
        same: Callable[[EffectRecord], bool] | None = None,
    ) -> EffectRecord:
        """A strict replay's wait, timer or child run: the origin's entry at this position,
        copied when it is the same (``same`` says so of a child run's input: ``asked``) and
        settled (a wait's event taken, or its time out); a wait the origin was still
        waiting at raises :class:`Diverged` (where it stops)."""
        position, node = at
        found = None if self._blocked(position) else self._at.get(position)
        settled = (EffectStatus.DONE, EffectStatus.FAILED)
        if found is None or (found.node, found.kind, found.name) != (node, kind, name):
            why = "the journal holds no such wait here"
        elif same is not None and not same(found):
            why = "the journal holds this child run started with another input or run id"
        elif found.status not in settled:
            why = "the recording was still waiting here"
        else:
            return journal.intent(self.copy(found, journal.run_id, request_id))
        self._strictly(position, node, why, Unserved(position, node, kind, name, asked))

    def step_done(self, step: int, node: str, made: int) -> None:
        """After a step that made ``made`` calls: the origin made more at that step. A
        strict replay's divergence the step caught (``except BaseException``) and went on
        from is raised again here: the replay stops at it, not reported as identical."""
        if self.first is not None:
            raise self.first
        if self.diverged:
            return
        for position, entry in sorted(self._at.items(), key=lambda item: item[1].call_index):
            at_step, index = position.split(":")[:2]
            if (
                int(at_step) == step and int(index) >= made and entry.node == node
                and not scopes(position)
            ):  # fmt: skip
                if self.strict:
                    reason = f"the step made {made} calls; the journal holds more"
                    self._strictly(position.removesuffix(":approval"), node, reason, None)
                self.diverged = True
                return

    def gather_done(self, base: str, node: str, made: Sequence[int]) -> None:
        """After the gather at position ``base`` whose branch ``k`` made ``made[k]``
        calls: where a branch diverged, or the origin's made more calls (or had more
        branches), what came after the gather in the origin depended on calls this fork
        did not make the same: it diverges there (or its own branch does, when nested)."""
        if self._blocked(base):
            return
        mine = {f"{base}:b{k}": n for k, n in enumerate(made)}
        split = bool(mine.keys() & self._branches)
        for position, entry in self._at.items():
            if split:
                break
            branch = next((s for s in scopes(position) if s.rsplit(":b", 1)[0] == base), None)
            if branch is None or entry.node != node:
                continue
            index = int(position[len(branch) + 1 :].split(":")[0])
            split = branch not in mine or index >= mine[branch]
        if split:
            if self.strict:
                reason = f"the gather's branches made {list(made)} calls; the journal holds others"
                self._strictly(base, node, reason, None)
            self._diverge(base)

    def _diverge(self, position: str) -> None:
        inside = scopes(position)
        if inside:
            self._branches.add(inside[-1])
        else:
            self.diverged = True

    def executed(
        self, meta: Mapping[str, Any], position: str = "", asked: Unserved | None = None
    ) -> dict[str, Any]:
        """``meta`` marked executed; from here on the fork (or the gather branch
        ``position`` lies in) has diverged. A strict replay raises :class:`Diverged`."""
        if self.strict:
            node = asked.node if asked is not None else ""
            self._strictly(position, node, "the journal holds no answer to this call", asked)
        self._diverge(position)
        return {**meta, REPLAY_KEY: EXECUTED}


__all__ = [
    "EXECUTED",
    "FORK_KEY",
    "MODES",
    "REPLAY_KEY",
    "REUSED",
    "Diverged",
    "Mode",
    "Origin",
    "Replay",
    "Unserved",
    "digest",
    "position_of",
    "same_call",
    "scopes",
]
