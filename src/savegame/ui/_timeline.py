"""A run's checkpoints as a timeline a person reads: how long each step took, and
where the run stopped and went on.

What a checkpoint records says where a run paused, failed, retried, was cancelled
or started as a fork; a checkpoint after a pause or a failure is where it was
resumed. Which process wrote a checkpoint is recorded only when a writer left its
name in the metadata (:data:`WRITER_KEYS`); where one did, a change of writer marks
a takeover: the process before it died or let go, and another went on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from savegame import CheckpointHeader, RunNode, RunStatus

#: Metadata keys under which a checkpoint may name the process that wrote it.
WRITER_KEYS = ("writer", "owner", "worker", "host")

#: A run that stopped in one of these states went on only because someone resumed it.
STOPPED = {
    RunStatus.INTERRUPTED: "resumed after the pause",
    RunStatus.FAILED: "resumed after the failure",
    RunStatus.NEEDS_ATTENTION: "resumed after attention",
    RunStatus.QUEUED: "picked up from the queue",
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
    for key in WRITER_KEYS:
        value = metadata.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _marks(h: CheckpointHeader, before: CheckpointHeader | None) -> list[tuple[str, str]]:
    meta = h.metadata
    marks: list[tuple[str, str]] = []
    if before is not None:
        was, now = _writer(before.metadata), _writer(meta)
        if was is not None and now is not None and was != now:
            marks.append(("crash", f"another process went on: {was} → {now}"))
        if before.status in STOPPED and h.status is not before.status:
            marks.append(("resume", STOPPED[before.status]))
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
        marks.append(("pause", f"cancelled by {meta['cancelled_by']}"))
    return marks


def timeline(
    headers: Sequence[CheckpointHeader],
    forks_at: Mapping[str, list[RunNode]] | None = None,
    earlier: CheckpointHeader | None = None,
) -> list[Moment]:
    """``headers`` (newest first, as ``savegame.history`` returns them) oldest first, marked.

    ``earlier``: the checkpoint just before the oldest of ``headers`` (another page),
    so the first shown gets its duration and marks too.
    """
    out: list[Moment] = []
    before = earlier
    for h in reversed(headers):
        took = None if before is None else (h.created_at - before.created_at).total_seconds()
        forks = tuple((forks_at or {}).get(h.checkpoint_id, ()))
        out.append(Moment(h, took, tuple(_marks(h, before)), forks))
        before = h
    return out
