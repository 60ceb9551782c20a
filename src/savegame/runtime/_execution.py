"""What one execution of a run is given: where it starts, how it saves, who listens."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from savegame.codec import Chain
from savegame.codec.storage import StorageConfig
from savegame.effects import Origin
from savegame.model import (
    Checkpoint,
    CheckpointHeader,
    CheckpointRecord,
    EffectRecord,
    Lease,
    RunInfo,
    Waiting,
)
from savegame.runtime._bridge import Io, direct_io
from savegame.runtime._policy import CheckpointPolicy, Durability
from savegame.runtime._sigint import StopRequest
from savegame.runtime._workflow import Workflow
from savegame.stores.base import Store
from savegame.workspace import Workspace


@dataclass
class Observer:
    """Optional callbacks for timelines, progress bars and tests. They must not raise."""

    on_step: Callable[[str, int, str], None] | None = None
    """Called with (run_id, step index, step name) before a step runs."""
    on_checkpoint: Callable[[CheckpointHeader, float], None] | None = None
    """Called with the header and the write time in seconds once a checkpoint is committed,
    in the thread that wrote it: under ``arun``, an io thread, but on the event loop for a
    store that does not block (``memory://``), so there a callback that waits holds the loop."""
    on_existing: Callable[[RunInfo, str], None] | None = None
    """Called when a start (``run``/``submit`` with a ``run_id``) finds the run: with its
    row and what the start does with it, ``"continue"`` or ``"return"``."""
    on_decision: Callable[[EffectRecord], None] | None = None
    """Called by ``approve``/``reject`` once the decision is recorded, before the run continues."""
    on_wait: Callable[[RunInfo], None] | None = None
    """Called when a start waits for an unfinished run of its thread
    (``on_thread_busy="wait"``), once per run it waits for."""


@dataclass
class Execution:
    """Everything the loop needs to drive one run from one checkpoint."""

    workflow: Workflow
    store: Store
    lease: Lease
    start: Checkpoint
    """Where to continue from, decoded and migrated."""
    start_record: CheckpointRecord
    """The stored record of ``start`` (its payload backs a stop checkpoint)."""
    policy: CheckpointPolicy
    durability: Durability
    ttl: float
    io: Io = direct_io
    observer: Observer = field(default_factory=Observer)
    storage: StorageConfig | None = None
    """Storage engine settings (keyframes, blobs, compression, keys); None: from the environment."""
    chain: Chain | None = None
    """Where ``start_record`` sits in its chain, when ``start.state`` is exactly what it
    holds (not migrated): the next checkpoint may then be a delta against it."""
    origin: Origin | None = None
    """When the run is a fork: the run and checkpoint it left, and how it replays."""
    parent: str | None = None
    """When the run is a child run: its parent, whose journal its ending checkpoint
    delivers an event to (``runtime/_children.py``)."""
    workspace: Workspace | None = None
    """The directory snapshotted with every checkpoint and restored before the first step."""
    should_stop: Callable[[], bool] | None = None
    """Polled at every step boundary; True stops the run there (graceful worker shutdown):
    the progress so far is checkpointed and the lease released, status still running."""
    sigint: StopRequest | None = None
    """The first Ctrl-C's stop (:mod:`savegame.runtime._sigint`), polled at every boundary
    and before every call a step makes: the run stops there, checkpointed interrupted."""
    took_over: str | None = None
    """The process whose unreleased lease this execution took over (it died holding the
    run), named in the first checkpoint this execution writes."""
    block: Callable[[Waiting], Awaitable[None]] | None = None
    """Where a step waits (a timer, events, child runs), after the run is checkpointed
    waiting: None returns the waiting result (no process waits); else awaited, the lease
    still held, until the run is woken (``run(..., wait=True)``), and the step runs again."""
