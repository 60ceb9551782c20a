"""What ``savegame replay`` found: per run, identical or the first divergence, as records.

The records are the answer of :func:`savegame.inspect.replay` and the handle's
``sg.replay``; :meth:`ReplayReport.lines` is their one rendering, as (style, text)
lines: the CLI colours them with rich, ``savegame.testing.assert_replays`` joins them
into its AssertionError's message.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from savegame.inspect._diff import Change, ChangeKind, StateDiff
from savegame.model import RunStatus

CallKind = Literal["tool", "model", "approval", "interrupt", "wait", "child"]

#: How much of a value a line shows: a prompt is cut around its first difference.
_WIDTH = 160


@dataclass(frozen=True, slots=True)
class ReplayedCall:
    """One call, as the code asked it or as the journal holds it."""

    kind: CallKind
    name: str
    """The tool's name, or ``llm:<model>``."""
    arguments: Any
    """A tool's arguments; a model call's request: ``messages`` and ``tools`` (the
    specs), or None when its entry recorded no request (written before savegame kept
    them)."""
    node: str
    """The step that made it."""


@dataclass(frozen=True, slots=True)
class Divergence:
    """Where a replay first did what the recording did not."""

    step: int
    """The step (its number in the run) where it happened."""
    node: str | None
    """That step's name in the code replayed (None when the run ended before it)."""
    position: str
    """The call's place: ``3:1`` (step 3, call 1), in a gather ``3:0:b1:0``; for an end
    that differs, the step alone."""
    reason: str
    asked: ReplayedCall | None = None
    """What the code asked there (None: it asked nothing more, or the run ended)."""
    recorded: ReplayedCall | None = None
    """What the journal holds at that position (None: nothing)."""
    changes: tuple[Change, ...] = ()
    """From what the journal holds to what the code asked: ``("arguments", "amount")``,
    ``("messages", 0, "content")`` ..."""

    @property
    def call(self) -> int | None:
        """The call's index in its step (in its gather branch, the branch's index)."""
        parts = self.position.split(":")
        return int(parts[1]) if len(parts) > 1 else None


@dataclass(frozen=True, slots=True)
class StateDifference:
    """The first checkpoint whose state differs: the recording's and the replay's at one step."""

    step: int
    recorded_node: str | None
    replayed_node: str | None
    diff: StateDiff
    """``a``: the recording's checkpoint, ``b``: the replay's."""


@dataclass(frozen=True, slots=True)
class LiveRun:
    """A diverged run run again with ``live=True``: reused up to the first difference,
    its calls made for real from there (in the scratch store), to its end or a stop."""

    status: RunStatus
    """Where it ended: completed, interrupted (an approval no one gives there), failed ..."""
    step: int
    called: tuple[str, ...]
    """The calls made for real, oldest first: ``<step>:<index> <name>``."""
    error: str | None
    """What stopped it, when a step raised."""
    changes: tuple[Change, ...]
    """Its last state against the recording's last."""


@dataclass(frozen=True, slots=True)
class RunReplay:
    """One recorded run replayed against the code."""

    run_id: str
    workflow: str
    source: str
    """Where the run came from: an export file, or the store's URL."""
    recorded: RunStatus
    """How the recording ended (or where it stands: interrupted, waiting)."""
    steps: int
    """Steps the replay ran."""
    reused: int
    """Calls answered from the journal: none made."""
    divergence: Divergence | None = None
    state: StateDifference | None = None
    note: str | None = None
    """How the replay ended when it is no divergence: it reached where an unfinished
    recording stops (a pending approval)."""
    live: LiveRun | None = None
    """With ``live=True``, where a diverged run goes with its calls made for real."""

    @property
    def identical(self) -> bool:
        """Replayed to the end: the same calls, the same states."""
        return self.divergence is None and self.state is None


@dataclass(frozen=True, slots=True)
class ReplayReport:
    """Recorded runs replayed against the code: each identical, or where it diverged."""

    runs: tuple[RunReplay, ...]

    @property
    def identical(self) -> bool:
        return all(r.identical for r in self.runs)

    @property
    def diverged(self) -> tuple[RunReplay, ...]:
        return tuple(r for r in self.runs if not r.identical)

    def lines(self) -> list[tuple[str, str]]:
        """The report as (style, text) lines; style is ``""``, ``ok``, ``bad``, ``old``,
        ``new`` or ``dim``."""
        out: list[tuple[str, str]] = []
        for run in self.runs:
            out.extend(_run_lines(run))
        same = len(self.runs) - len(self.diverged)
        summary = f"{same} of {len(self.runs)} run{'s' if len(self.runs) != 1 else ''} identical"
        out.append(("ok" if self.identical else "bad", summary))
        return out

    def text(self) -> str:
        return "\n".join(text for _, text in self.lines())

    def __str__(self) -> str:
        return self.text()


def _run_lines(run: RunReplay) -> Iterator[tuple[str, str]]:
    head = f"run {run.run_id} (workflow {run.workflow!r}, from {run.source})"
    calls = f"{run.reused} call{'s' if run.reused != 1 else ''} answered from the journal"
    if run.identical:
        yield "ok", f"{head}: identical"
        yield "dim", f"  {_steps(run.steps)}, {calls}, recording {run.recorded.value}"
        if run.note:
            yield "dim", f"  {run.note}"
        return
    yield "bad", f"{head}: DIVERGED"
    d = run.divergence
    if d is not None:
        where = f"step {d.step} ({d.node})" if d.node else f"step {d.step}"
        if d.call is not None:
            where += f", call {d.call}" + (f" [{d.position}]" if ":b" in d.position else "")
        yield "", f"  first divergence at {where}: {d.reason}"
        yield "", f"    the code asked:    {_call(d.asked)}"
        yield "", f"    the journal holds: {_call(d.recorded)}"
        if d.changes:
            yield "", "    what differs (journal -> code):"
            yield from _changes(d.changes, "      ")
    if run.state is not None:
        s = run.state
        nodes = (
            f"{s.recorded_node}"
            if s.recorded_node == s.replayed_node
            else f"recorded {s.recorded_node}, replayed {s.replayed_node}"
        )
        yield "", f"  first checkpoint that differs: step {s.step} ({nodes})"
        yield from _changes(s.diff.changes, "      ")
    yield "dim", f"  replayed {_steps(run.steps)}, {calls}, recording {run.recorded.value}"
    if run.live is not None:
        yield from _live_lines(run.live)


def _live_lines(live: LiveRun) -> Iterator[tuple[str, str]]:
    yield "", f"  live from the divergence: {live.status.value} after step {live.step}"
    if live.error:
        yield "bad", f"    {live.error}"
    made = ", ".join(live.called) or "none"
    yield "", f"    called for real: {made}"
    if live.changes:
        yield "", "    its last state against the recording's last:"
        yield from _changes(live.changes, "      ")


def _steps(n: int) -> str:
    return f"{n} step{'s' if n != 1 else ''}"


def _call(call: ReplayedCall | None) -> str:
    if call is None:
        return "nothing"
    if call.kind == "model":
        request = call.arguments if isinstance(call.arguments, dict) else {}
        if not request:
            return f"model call {call.name} (request not recorded) in step {call.node!r}"
        tools = [t.get("name") for t in request.get("tools", ()) if isinstance(t, dict)]
        n = len(request.get("messages", ()))
        return f"model call {call.name} ({n} messages, tools {tools}) in step {call.node!r}"
    if call.kind == "interrupt":
        return f"interrupt {call.name!r} asking {_short(call.arguments)} in step {call.node!r}"
    if call.kind == "wait":
        return f"wait for {call.name!r} in step {call.node!r}"
    if call.kind == "child":
        return f"child run of {call.name!r} in step {call.node!r}"
    arguments = call.arguments if isinstance(call.arguments, dict) else {}
    shown = ", ".join(f"{k}={_short(v)}" for k, v in arguments.items())
    what = "approval of " if call.kind == "approval" else "tool "
    return f"{what}{call.name}({shown}) in step {call.node!r}"


def _short(value: Any, width: int = _WIDTH) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=repr)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


def _pair(old: Any, new: Any) -> tuple[str, str]:
    """Two strings cut around where they first differ, so a long prompt's edit shows."""
    if not (isinstance(old, str) and isinstance(new, str)):
        return _short(old), _short(new)
    start = next((i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), None)
    if start is None:
        start = min(len(old), len(new))
    cut = max(0, start - 40)
    lead = "…" if cut else ""
    return _short(lead + old[cut:]), _short(lead + new[cut:])


def _changes(changes: tuple[Change, ...], indent: str) -> Iterator[tuple[str, str]]:
    for change in changes:
        path = change.pointer or "/"
        if change.kind is ChangeKind.CHANGED:
            old, new = _pair(change.old, change.new)
            yield "", f"{indent}~ {path}"
            yield "old", f"{indent}    - {old}"
            yield "new", f"{indent}    + {new}"
        elif change.kind is ChangeKind.ADDED:
            yield "new", f"{indent}+ {path}: {_short(change.new)}"
        elif change.kind is ChangeKind.REMOVED:
            yield "old", f"{indent}- {path}: {_short(change.old)}"
        elif change.kind is ChangeKind.GREW:
            yield "new", f"{indent}+ {path}: {len(change.items)} more from [{change.at}]"
            for item in change.items:
                yield "new", f"{indent}    + {_short(item)}"
        elif change.kind is ChangeKind.SHRANK:
            yield "old", f"{indent}- {path}: {len(change.items)} fewer from [{change.at}]"
            for item in change.items:
                yield "old", f"{indent}    - {_short(item)}"
