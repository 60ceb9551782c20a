"""Machine-readable views: records as JSON-compatible dicts, written with orjson.

States go through savegame's codec (``to_data``), so tagged values such as
tuples, datetimes or Decimals survive as ``{"$sg:<tag>": ...}`` objects and
a program reading the output can revive them with ``savegame.codec``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import orjson
import typer

from savegame.codec import to_data
from savegame.control import Effect
from savegame.effects import PendingInterrupt
from savegame.inspect import Change, ChangeKind, StateDiff
from savegame.maintenance import PrunePlan, RekeyReport, StoreReport, TransferReport, VerifyReport
from savegame.model import Checkpoint, CheckpointHeader, RunInfo, RunResult, Usage
from savegame.runtime import OwnerGone


def _usage(usage: Usage) -> dict[str, Any]:
    return usage.to_dict()


def header(h: CheckpointHeader) -> dict[str, Any]:
    return {
        "run_id": h.run_id,
        "thread_id": h.thread_id,
        "checkpoint_id": h.checkpoint_id,
        "parent_id": h.parent_id,
        "step": h.step,
        "node": h.node,
        "status": h.status.value,
        "next": h.next,
        "created_at": h.created_at,
        "size": h.size,
        "usage": _usage(h.usage),
        "metadata": to_data(dict(h.metadata), "metadata"),
        "state_version": h.state_version,
    }


def checkpoint(cp: Checkpoint) -> dict[str, Any]:
    return {**header(cp.header), "state": to_data(cp.state)}


def change(c: Change) -> dict[str, Any]:
    out: dict[str, Any] = {"path": list(c.path), "pointer": c.pointer, "kind": c.kind.value}
    if c.kind in (ChangeKind.GREW, ChangeKind.SHRANK):
        out.update(at=c.at, count=len(c.items), items=to_data(list(c.items), "items"))
    else:
        if c.kind is not ChangeKind.ADDED:
            out["old"] = to_data(c.old, "old")
        if c.kind is not ChangeKind.REMOVED:
            out["new"] = to_data(c.new, "new")
    return out


def diff(d: StateDiff) -> dict[str, Any]:
    return {
        "a": header(d.a),
        "b": header(d.b),
        "same": d.same,
        "changes": [change(c) for c in d.changes],
    }


def run(info: RunInfo) -> dict[str, Any]:
    return {
        "run_id": info.run_id,
        "thread_id": info.thread_id,
        "workflow": info.workflow,
        "workflow_ref": info.workflow_ref,
        "version": info.version,
        "status": info.status.value,
        "step": info.step,
        "head_checkpoint_id": info.head_checkpoint_id,
        "created_at": info.created_at,
        "updated_at": info.updated_at,
        "error": info.error,
        "cancel_requested": info.cancel_requested,
        "wake_at": info.wake_at,
    }


def owner_gone(gone: OwnerGone | None, continue_with: str) -> dict[str, Any] | None:
    """A run's dead owner, and the command that continues the run (None: not gone)."""
    if gone is None:
        return None
    return {"owner": gone.owner, "reason": gone.reason, "continue_with": continue_with}


def result(res: RunResult) -> dict[str, Any]:
    return {
        "run_id": res.run_id,
        "thread_id": res.thread_id,
        "status": res.status.value,
        "step": res.step,
        "checkpoint_id": res.checkpoint_id,
        "usage": _usage(res.usage),
        "state": to_data(res.state),
        "interrupt_id": res.interrupt_id,
    }


def effect(e: Effect) -> dict[str, Any]:
    return {
        "run_id": e.run_id,
        "request_id": e.request_id,
        "kind": e.kind.value,
        "name": e.name,
        "step": e.step,
        "node": e.node,
        "status": e.status.value,
        "arguments": to_data(e.arguments, "arguments"),
        "result": to_data(e.result, "result"),
        "error": e.error,
        "metadata": to_data(e.metadata, "metadata"),
        "replay": e.metadata.get("replay"),
        "created_at": e.created_at,
        "completed_at": e.completed_at,
    }


def pending(p: PendingInterrupt) -> dict[str, Any]:
    return {
        "run_id": p.run_id,
        "interrupt_id": p.interrupt_id,
        "kind": p.kind.value,
        "name": p.name,
        "payload": to_data(p.payload, "payload"),
        "step": p.step,
        "node": p.node,
        "created_at": p.created_at,
        "expires_at": p.expires_at,
        "on_expiry": p.on_expiry,
    }


def verified(report: VerifyReport) -> dict[str, Any]:
    return {
        "ok": report.ok,
        "runs": report.runs,
        "checkpoints": report.checkpoints,
        "blobs": report.blobs,
        "effects": report.effects,
        "damaged": [
            {"kind": d.kind, "id": d.ident, "run_id": d.run_id, "reason": d.reason}
            for d in report.damaged
        ],
        "missing_keys": dict(report.missing_keys),
    }


def pruned(plan: PrunePlan) -> dict[str, Any]:
    return {
        "dry_run": plan.dry_run,
        "runs": plan.runs,
        "checkpoints": plan.checkpoints,
        "checkpoint_bytes": plan.checkpoint_bytes,
        "kept_as_base": plan.kept_as_base,
        "exempt_runs": plan.exempt_runs,
        "skipped": dict(plan.skipped),
        "blobs": plan.blobs,
        "blob_bytes": plan.blob_bytes,
    }


def store_report(report: StoreReport) -> dict[str, Any]:
    t = report.totals
    return {
        "totals": {
            "runs": t.runs,
            "checkpoints": t.checkpoints,
            "payload_bytes": t.payload_bytes,
            "blobs": t.blobs,
            "blob_bytes": t.blob_bytes,
            "effects": t.effects,
            "file_bytes": t.file_bytes,
        },
        "runs": [
            {
                "run_id": r.run_id,
                "thread_id": r.thread_id,
                "status": r.status.value,
                "checkpoints": r.checkpoints,
                "payload_bytes": r.payload_bytes,
                "effects": r.effects,
                "effect_bytes": r.effect_bytes,
            }
            for r in report.runs
        ],
    }


def rekeyed(report: RekeyReport) -> dict[str, Any]:
    return {
        "key_id": report.key_id,
        "runs": report.runs,
        "checkpoints": report.checkpoints,
        "blobs": report.blobs,
        "effects": report.effects,
        "schedules": report.schedules,
        "collected": report.collected,
        "adopted": report.adopted,
        "skipped": [{"run_id": s.run_id, "reason": s.reason} for s in report.skipped],
    }


def transfer(report: TransferReport, path: str) -> dict[str, Any]:
    return {
        "path": path,
        "run_ids": list(report.run_ids),
        "checkpoints": report.checkpoints,
        "effects": report.effects,
        "blobs": report.blobs,
        "bytes": report.bytes,
    }


def dumps(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_UTC_Z).decode()


def emit(value: Any) -> None:
    """Print one JSON document on stdout."""
    typer.echo(dumps(value))


def emit_many(items: Iterable[dict[str, Any]]) -> None:
    emit(list(items))
