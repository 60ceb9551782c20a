"""A run's checkpoints as a timeline a person reads: how long each step took, and
where the run stopped and went on.

What a checkpoint records says where a run paused, failed, retried, was cancelled
or started as a fork; a checkpoint after a pause or a failure is where it was
resumed. The first checkpoint of each execution names the process that wrote it
(``metadata["writer"]``, :data:`savegame.model.WRITER_KEY`): where it differs from
the writer before while the checkpoint before still said ``running``, the process
before stopped without a word: it was killed (or lost its lease), and another took over.
An execution that took over a lease its holder never released says so itself
(``metadata["took_over"]``, :data:`savegame.model.TAKEOVER_KEY`): that names a holder
killed before it wrote a checkpoint too, which no change of writer can show.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from savegame import RunStatus
from savegame.inspect import RunNode
from savegame.model import TAKEOVER_KEY, WRITER_KEY, CheckpointHeader

#: A run that stopped in one of these states went on only because someone resumed it.
STOPPED = {
    RunStatus.INTERRUPTED: "resumed after the pause",
    RunStatus.FAILED: "resumed after the failure",
    RunStatus.NEEDS_ATTENTION: "resumed after attention",
    RunStatus.QUEUED: "picked up from the queue",
    RunStatus.WAITING: "woken after the wait",
}


@dataclass(frozen=True, slots=True)
class Moment:
    """One checkpoint on the timeline."""

    header: CheckpointHeader
    took: float | None
    """Seconds since the checkpoint before it (None for the first shown)."""
    marks: tuple[tuple[str, str], ...]
    """(kind, text) pairs: ``resume``, ``crash``, ``retry``, ``pause``, ``error``, ``fork``."""
    forks: tuple[RunNode, ...] = ()
    """Runs started from this checkpoint."""


def _writer(metadata: Mapping[str, Any]) -> str | None:
    value = metadata.get(WRITER_KEY)
    return value if isinstance(value, str) and value else None


def _marks(
    h: CheckpointHeader, before: CheckpointHeader | None, writer: str | None
) -> list[tuple[str, str]]:
    """``writer``: the last process named on the timeline before ``h``."""
    meta = h.metadata
    marks: list[tuple[str, str]] = []
    now = _writer(meta)
    moved = writer is not None and now is not None and writer != now
    dead = meta.get(TAKEOVER_KEY)
    if isinstance(dead, str) and dead and dead != writer:
        # The holder wrote no checkpoint of its own (its first would name it): it took
        # the run and died before one, its work only in the journal.
        marks.append(("crash", f"taken over: {dead} took the run and stopped before its "
                               f"first checkpoint, {now or 'this process'} went on"))  # fmt: skip
    elif before is not None:
        if before.status in STOPPED and h.status is not before.status:
            marks.append(("resume", STOPPED[before.status] + (f" by {now}" if moved else "")))
        elif moved and before.status is RunStatus.RUNNING:
            marks.append(("crash", f"taken over: {writer} stopped mid-run, {now} went on"))
        elif moved:
            marks.append(("resume", f"another process went on: {now}"))
    if meta.get("source") in ("fork", "update") and isinstance(meta.get("fork"), Mapping):
        origin = meta["fork"]
        edited = origin.get("edited") or []
        text = f"forked from step {origin.get('step')} of run {origin.get('run_id')}"
        marks.append(("fork", text + (f", edited {', '.join(map(str, edited))}" if edited else "")))
    if "retrying" in meta:
        marks.append(
            ("retry", f"{meta['retrying']} failed, attempt {meta.get('attempt')}: retried")
        )
    if "interrupt" in meta:
        marks.append(("pause", f"waits for {meta['interrupt']}"))
    if "cancelled_by" in meta:
        checked = meta.get("authenticated_as")
        marks.append(
            ("pause", f"cancelled by {meta['cancelled_by']}" + (f" ({checked})" if checked else ""))
        )
    return marks


def timeline(
    headers: Sequence[CheckpointHeader],
    forks_at: Mapping[str, list[RunNode]] | None = None,
    earlier: CheckpointHeader | None = None,
) -> list[Moment]:
    """``headers`` (newest first, as ``savegame.client.history`` returns them) oldest first, marked.

    ``earlier``: the checkpoint just before the oldest of ``headers`` (another page),
    so the first shown gets its duration and marks too.
    """
    out: list[Moment] = []
    before = earlier
    writer = None if earlier is None else _writer(earlier.metadata)
    for h in reversed(headers):
        took = None if before is None else (h.created_at - before.created_at).total_seconds()
        forks = tuple((forks_at or {}).get(h.checkpoint_id, ()))
        out.append(Moment(h, took, tuple(_marks(h, before, writer)), forks))
        writer = _writer(h.metadata) or writer
        before = h
    return out
