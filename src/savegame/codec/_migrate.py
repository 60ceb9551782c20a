"""State schema versions: upgrade old checkpoints on load, refuse newer ones."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from savegame.errors import StateVersionError

Migration = Callable[[dict[str, Any]], dict[str, Any]]


def upgrade(
    state: dict[str, Any],
    *,
    from_version: int,
    to_version: int,
    migrations: Mapping[int, Migration],
    workflow: str,
    checkpoint_id: str | None = None,
) -> dict[str, Any]:
    """Apply ``migrations[v]`` (which turns version v into v+1) from ``from_version`` up.

    Raises:
        StateVersionError: the state is newer than the workflow, or a migration is missing.
    """
    if from_version > to_version:
        raise StateVersionError(
            f"state schema version {from_version} is newer than workflow {workflow!r} "
            f"(version {to_version}); deploy the newer code to load it",
            checkpoint_id=checkpoint_id,
        )
    for version in range(from_version, to_version):
        step = migrations.get(version)
        if step is None:
            raise StateVersionError(
                f"workflow {workflow!r} has no migration from state version {version} to {version + 1}",
                checkpoint_id=checkpoint_id,
            )
        state = step(dict(state))
        if not isinstance(state, dict):
            raise StateVersionError(
                f"migration of workflow {workflow!r} from version {version} returned "
                f"{type(state).__qualname__}, not a dict",
                checkpoint_id=checkpoint_id,
            )
    return state
