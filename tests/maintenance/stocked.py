"""A store with a few runs in it, for the maintenance tests."""

from __future__ import annotations

from typing import Any

from savegame import (
    END,
    StepContext,
    Workflow,
)
from savegame.codec.storage import StorageConfig

# Small packs, so a short run already stores some (packs are blobs).
PLAIN = StorageConfig(keyframe_every=3, blob_threshold=100, pack_bytes=512)


def chatty() -> Workflow:
    wf = Workflow("chatty")

    @wf.step(entry=True)
    def talk(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        n = len(state.get("log", []))
        entry = {"n": n, "text": f"message {n} " + "lorem ipsum " * 20}
        return {"log": [*state.get("log", []), entry]}, ("talk" if n < 7 else END)

    return wf
