"""Generator of the format-1 golden files (kept for the record; do not re-run).

``format1_records.json`` and ``format1.db`` were written by savegame at commit
eace8aa (format 1: the payload is the canonical JSON of the full state, the
checksum BLAKE2b-128 over identity + payload), before the storage engine
(format 2) existed. Re-running this script with a newer savegame would write
newer records, which is not what the golden files are for.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import sys
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import savegame
from savegame.effects import tool
from savegame.runtime import END, Workflow

HERE = Path(__file__).parent

STATE: dict[str, Any] = {
    "messages": [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}],
    "plan": {"steps": ["a", "b"], "cursor": 1},
    "raw": b"\x00\x01binary",
    "when": dt.datetime(2024, 5, 1, 12, 30, tzinfo=dt.timezone.utc),
    "id": uuid.UUID("12345678-1234-5678-1234-567812345678"),
    "price": Decimal("12.50"),
    "tags": {"x", "y"},
    "pair": (1, "two"),
    "big": 2**70,
    "doc": "lorem ipsum " * 200,
    "$sg:escaped": {"$sg:tuple": "not a tag"},
}


@tool
def lookup(q: str) -> str:
    return f"answer to {q}"


golden = Workflow("golden")


@golden.step(entry=True)
def first(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
    found = ctx.call(lookup, q=state["plan"]["steps"][0])
    return {"messages": [*state["messages"], {"role": "tool", "content": found}]}, "second"


@golden.step
def second(state: dict[str, Any], ctx: Any) -> tuple[dict[str, Any], str]:
    return {"plan": {**state["plan"], "cursor": 2}, "done": True}, END


def record_json(record: Any) -> dict[str, Any]:
    h = record.header
    return {
        "header": {
            "thread_id": h.thread_id,
            "run_id": h.run_id,
            "checkpoint_id": h.checkpoint_id,
            "parent_id": h.parent_id,
            "step": h.step,
            "node": h.node,
            "status": h.status.value,
            "next": h.next,
            "usage": h.usage.to_dict(),
            "metadata": dict(h.metadata),
            "created_at": h.created_at.isoformat(),
            "format_version": h.format_version,
            "state_version": h.state_version,
            "size": h.size,
        },
        "payload_b64": base64.b64encode(record.payload).decode(),
        "checksum": record.checksum,
    }


def main() -> None:
    db = HERE / "format1.db"
    db.unlink(missing_ok=True)
    url = f"sqlite:///{db}"
    result = savegame.run(
        golden, dict(STATE), run_id="golden-run-1", store=url, metadata={"user": "ada"}
    )
    store = savegame.open_store(url)
    records = [
        store.get_checkpoint(h.checkpoint_id)
        for h in reversed(store.list_checkpoints(result.run_id))
    ]
    out = {
        "written_by": "savegame format 1 (commit eace8aa)",
        "final_state_canonical_b64": base64.b64encode(
            savegame.codec.canonical(result.state)
        ).decode(),
        "records": [record_json(r) for r in records],
        "effects": [
            {
                "run_id": e.run_id,
                "request_id": e.request_id,
                "kind": e.kind.value,
                "name": e.name,
                "step": e.step,
                "node": e.node,
                "call_index": e.call_index,
                "status": e.status.value,
                "arguments_b64": base64.b64encode(e.arguments).decode(),
                "result_b64": None if e.result is None else base64.b64encode(e.result).decode(),
                "metadata": dict(e.metadata),
                "checksum": e.checksum,
            }
            for e in store.list_effects(result.run_id)
        ],
    }
    (HERE / "format1_records.json").write_text(json.dumps(out, indent=1) + "\n")
    store.close()
    print(len(records), "records", file=sys.stderr)


if __name__ == "__main__":
    main()
