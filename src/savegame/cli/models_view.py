"""How ``savegame models`` shows a run's model calls: a table and totals, or JSON."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.text import Text

from savegame.cli import jsonview
from savegame.cli.render import EFFECT_STYLE, new_table, when
from savegame.cli.words import plural
from savegame.inspect import ModelCallRecord, ModelUsage, RunModelUsage


def _cost(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.6f}"


def _usage_cells(u: ModelUsage) -> tuple[str, ...]:
    cost = _cost(u.cost_usd)
    if 0 < u.unpriced_calls < u.calls:  # unknown, though some calls had a price: say how many
        cost += f" ({u.unpriced_calls} of {u.calls} unpriced)"
    return (str(u.calls), str(u.input_tokens), str(u.output_tokens), str(u.cached_tokens),
            cost)  # fmt: skip


def table(
    out: Console, run_id: str, calls: Sequence[ModelCallRecord], usage: RunModelUsage
) -> None:
    if not calls:
        out.print(f"run {run_id} made no model calls")
        return
    listing = new_table(f"run {run_id}: {plural(len(calls), 'model call')}")
    for name in ("request id", "step/node", "model", "answered by", "status", "in", "out",
                 "cached", "cost", "at (UTC)"):  # fmt: skip
        right = name in ("in", "out", "cached", "cost")
        listing.add_column(name, no_wrap=name == "request id", justify="right" if right else "left")
    for call in calls:
        r = call.response
        notes = [n for n, on in (("reused", call.reused),
                                 (f"{call.abandoned_streams} abandoned", call.abandoned_streams))
                 if on]  # fmt: skip
        listing.add_row(
            call.request_id,
            f"{call.step}/{call.node}",
            call.model,
            (r.model or "") if r else "",
            Text(" ".join([call.status.value, *notes]), style=EFFECT_STYLE.get(call.status, "")),
            str(r.input_tokens) if r else "",
            str(r.output_tokens) if r else "",
            str(r.cached_tokens) if r else "",
            _cost(r.cost_usd) if r else "",
            when(call.created_at),
        )
    out.print(listing)
    totals = new_table("per model (the calls this run paid for)")
    for name in ("model", "calls", "in", "out", "cached", "cost"):
        totals.add_column(name, justify="left" if name == "model" else "right")
    for model, u in sorted(usage.models.items()):
        totals.add_row(model, *_usage_cells(u))
    totals.add_row(Text("total", style="bold"), *_usage_cells(usage.total))
    if usage.reused.calls:
        totals.add_row(Text("reused (a fork's, paid by its origin)", style="dim"),
                       *_usage_cells(usage.reused))  # fmt: skip
    out.print(totals)


def _usage(u: ModelUsage) -> dict[str, Any]:
    return {
        "calls": u.calls,
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "cached_tokens": u.cached_tokens,
        "cost_usd": u.cost_usd,
        "unpriced_calls": u.unpriced_calls,
    }


def _call(c: ModelCallRecord) -> dict[str, Any]:
    r = c.response
    return {
        "request_id": c.request_id,
        "step": c.step,
        "node": c.node,
        "model": c.model,
        "status": c.status.value,
        "reused": c.reused,
        "abandoned_streams": c.abandoned_streams,
        "response_model": None if r is None else r.model,
        "input_tokens": None if r is None else r.input_tokens,
        "output_tokens": None if r is None else r.output_tokens,
        "cached_tokens": None if r is None else r.cached_tokens,
        "cost_usd": None if r is None else r.cost_usd,
        "stop_reason": None if r is None else r.stop_reason,
        "messages": None if c.request is None else len(c.request.messages),
        "created_at": c.created_at,
        "completed_at": c.completed_at,
    }


def emit(run_id: str, calls: Sequence[ModelCallRecord], usage: RunModelUsage) -> None:
    jsonview.emit(
        {
            "run_id": run_id,
            "calls": [_call(c) for c in calls],
            "models": {model: _usage(u) for model, u in sorted(usage.models.items())},
            "total": _usage(usage.total),
            "reused": _usage(usage.reused),
        }
    )
