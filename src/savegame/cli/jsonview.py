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

from savegame.codec.values import to_data
from savegame.effects.decisions import PendingInterrupt
from savegame.model import Checkpoint, CheckpointHeader, RunInfo, RunResult, Usage
from savegame.runtime.control import Effect


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


def run(info: RunInfo) -> dict[str, Any]:
    return {
        "run_id": info.run_id,
        "thread_id": info.thread_id,
        "workflow": info.workflow,
        "workflow_ref": info.workflow_ref,
        "status": info.status.value,
        "step": info.step,
        "head_checkpoint_id": info.head_checkpoint_id,
        "created_at": info.created_at,
        "updated_at": info.updated_at,
        "error": info.error,
        "cancel_requested": info.cancel_requested,
    }


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
    }


def dumps(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_UTC_Z).decode()


def emit(value: Any) -> None:
    """Print one JSON document on stdout."""
    typer.echo(dumps(value))


def emit_many(items: Iterable[dict[str, Any]]) -> None:
    emit(list(items))
