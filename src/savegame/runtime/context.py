"""What a step sees besides its state: ids, usage accounting, checkpoint control."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from savegame.model import Usage


@dataclass
class StepContext:
    """Passed to every step as its second argument.

    A context lives for one execution of one step; everything a step wants to
    keep must go into the state update it returns.
    """

    run_id: str
    thread_id: str
    node: str
    """The name of the running step."""
    step: int
    """The index this step will have once done (1 for the first step of a run)."""
    parent_checkpoint_id: str | None
    """The checkpoint this step started from, when one was taken."""
    _usage: Usage = field(default_factory=Usage)
    _force: bool = False
    _metadata: dict[str, Any] = field(default_factory=dict)

    def checkpoint(self) -> None:
        """Force a checkpoint after this step, whatever the policy says."""
        self._force = True

    def add_usage(
        self,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost_usd: float = 0.0,
        llm_calls: int = 0,
        tool_calls: int = 0,
    ) -> None:
        """Add to the run's usage counters (saved with the next checkpoint)."""
        self._usage = self._usage + Usage(
            input_tokens, output_tokens, cost_usd, llm_calls, tool_calls
        )

    def tag(self, **metadata: Any) -> None:
        """Attach metadata (JSON scalars) to the checkpoint taken after this step."""
        self._metadata.update(metadata)

    @property
    def usage(self) -> Usage:
        """Usage added by this step so far."""
        return self._usage

    @property
    def forced(self) -> bool:
        return self._force

    @property
    def metadata(self) -> Mapping[str, Any]:
        return self._metadata
