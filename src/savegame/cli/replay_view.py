"""``savegame replay``'s report: coloured lines, or JSON."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.text import Text

from savegame.cli.jsonview import change, header
from savegame.codec import to_data
from savegame.inspect import Divergence, ReplayedCall, ReplayReport, RunReplay

_STYLES = {"ok": "green", "bad": "bold red", "old": "red", "new": "green", "dim": "dim", "": ""}


def show(console: Console, report: ReplayReport) -> None:
    for style, line in report.lines():
        console.print(Text(line, style=_STYLES.get(style, "")), soft_wrap=True)


def _call(call: ReplayedCall | None) -> dict[str, Any] | None:
    if call is None:
        return None
    return {
        "kind": call.kind,
        "name": call.name,
        "node": call.node,
        "arguments": to_data(call.arguments, "arguments"),
    }


def _divergence(d: Divergence | None) -> dict[str, Any] | None:
    if d is None:
        return None
    return {
        "step": d.step,
        "node": d.node,
        "position": d.position,
        "call": d.call,
        "reason": d.reason,
        "asked": _call(d.asked),
        "recorded": _call(d.recorded),
        "changes": [change(c) for c in d.changes],
    }


def _run(run: RunReplay) -> dict[str, Any]:
    state = run.state
    return {
        "run_id": run.run_id,
        "workflow": run.workflow,
        "source": run.source,
        "identical": run.identical,
        "recorded": run.recorded.value,
        "steps": run.steps,
        "reused": run.reused,
        "note": run.note,
        "divergence": _divergence(run.divergence),
        "live": None
        if run.live is None
        else {
            "status": run.live.status.value,
            "step": run.live.step,
            "called": list(run.live.called),
            "error": run.live.error,
            "changes": [change(c) for c in run.live.changes],
        },
        "state": None
        if state is None
        else {
            "step": state.step,
            "recorded": header(state.diff.a),
            "replayed": header(state.diff.b),
            "changes": [change(c) for c in state.diff.changes],
        },
    }


def as_json(report: ReplayReport) -> dict[str, Any]:
    return {"identical": report.identical, "runs": [_run(r) for r in report.runs]}
