"""Generator of the format-2/3 golden files (kept for the record; do not re-run).

``format3.db`` and ``format3_states.json`` (SHA-256 of each checkpoint's
canonical state, and the key of the encrypted run) were written by savegame on
2026-12-01, when packs came in (format 3: a keyframe may hold packed lists;
records without packs are still format 2). Two runs in one SQLite file: one
plain, one encrypted with the key in the JSON, both with deltas, loose blobs
(a value over 16 KiB), packed keyframes whose packs hold tagged values, a packed
dict, and a final checkpoint. Re-running this script with a newer savegame would write newer
records, which is not what the golden files are for.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import uuid
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import savegame
from savegame import END, StepContext, StorageConfig, Workflow
from savegame.codec.crypto import Keyring

HERE = Path(__file__).parent
KEY = bytes(range(32))
PLAIN = StorageConfig(keyframe_every=4, pack_bytes=512, compress_threshold=256)
SEALED = replace(
    PLAIN, keyring=Keyring({"golden": KEY}, active="golden"), sensitive_metadata=frozenset({"user"})
)

wf = Workflow("golden-3")


@wf.step(entry=True)
def talk(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    n = len(state["log"])
    entry: dict[str, Any] = {"n": n, "text": f"message {n} " + "lorem ipsum " * 12}
    if n % 3 == 0:
        entry["at"] = dt.datetime(2026, 12, 1, 10, n % 60, tzinfo=dt.timezone.utc)
        entry["pair"] = (n, b"\x00\xff")
    results = {**state.get("results", {}), f"call-{n}": {"ok": n % 2 == 0, "out": entry["text"]}}
    update: dict[str, Any] = {"log": [*state["log"], entry], "n": n + 1, "results": results}
    if n == 5:
        update["doc"] = "a large document line\n" * 1000  # over 16 KiB: a blob even in a delta
    if n == 7:
        update["meta"] = {"id": uuid.UUID(int=n), "price": Decimal("1.25"), "tags": {"a", "b"}}
    return update, ("talk" if n < 13 else END)


def main() -> None:
    db = HERE / "format3.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    store = savegame.open_store(f"sqlite:///{db}")
    states: dict[str, str] = {}
    for run_id, storage in (("golden-plain", PLAIN), ("golden-sealed", SEALED)):
        savegame.run(
            wf, {"log": [], "n": 0}, store=store, storage=storage, run_id=run_id,
            metadata={"user": "ada@example.com"},
        )  # fmt: skip
        for header in savegame.client.history(run_id, store=store, storage=storage):
            cp = savegame.client.get_checkpoint(header.checkpoint_id, store=store, storage=storage)
            states[header.checkpoint_id] = hashlib.sha256(
                savegame.codec.canonical(cp.state)
            ).hexdigest()
    store.close()
    (HERE / "format3_states.json").write_text(
        json.dumps({"key_b64": base64.b64encode(KEY).decode(), "states": states}, indent=1) + "\n"
    )


if __name__ == "__main__":
    main()
