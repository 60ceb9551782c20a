"""When to take a checkpoint, and how durably to write it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from savegame.errors import ConfigurationError

Durability = Literal["sync", "async"]


@dataclass(frozen=True, slots=True)
class CheckpointPolicy:
    """Which step boundaries get a checkpoint.

    The run's input and its final boundary are always checkpointed, and so is a
    step marked ``checkpoint=True`` or one that calls ``ctx.checkpoint()``. In
    between, a checkpoint is taken when any configured trigger fires. Steps
    after the last checkpoint are re-executed on resume, so a sparser policy
    trades write cost for repeated work after a crash.

    Durability ``"async"`` (set on the workflow or per run) hands records to a
    background writer with a bounded queue: a crash loses the records still
    queued (at most ``queue`` checkpoints, and those steps are re-executed on
    resume); a write error stops the run at the next step boundary.
    """

    every: int | None = 1
    """Checkpoint every N steps (1 = every step; None = no step count trigger)."""
    seconds: float | None = None
    """Checkpoint when this many seconds passed since the last one."""
    key_steps: frozenset[str] = field(default_factory=frozenset)
    """Always checkpoint after these steps."""
    ttl: float | None = None
    """Seconds each checkpoint is kept: sets ``expires_at``, which ``prune`` honours
    (a run's head and the bases kept checkpoints need stay regardless)."""

    def __post_init__(self) -> None:
        if self.every is not None and self.every < 1:
            raise ConfigurationError(f"checkpoint policy: every must be >= 1, not {self.every}")
        if self.ttl is not None and self.ttl <= 0:
            raise ConfigurationError(f"checkpoint policy: ttl must be > 0 seconds, not {self.ttl}")
        if self.seconds is not None and self.seconds <= 0:
            raise ConfigurationError(f"checkpoint policy: seconds must be > 0, not {self.seconds}")

    @classmethod
    def every_step(cls) -> CheckpointPolicy:
        return cls(every=1)

    @classmethod
    def every_n_steps(cls, n: int) -> CheckpointPolicy:
        return cls(every=n)

    @classmethod
    def interval(cls, seconds: float) -> CheckpointPolicy:
        return cls(every=None, seconds=seconds)

    @classmethod
    def only_key_steps(cls, *names: str) -> CheckpointPolicy:
        return cls(every=None, key_steps=frozenset(names))

    def due(self, *, steps_since: int, seconds_since: float, node: str) -> bool:
        """Whether the boundary after ``node`` gets a checkpoint (forced ones aside)."""
        if node in self.key_steps:
            return True
        if self.every is not None and steps_since >= self.every:
            return True
        return self.seconds is not None and seconds_since >= self.seconds
