"""How ``savegame schedule`` shows schedules: a table, or JSON."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console

from savegame.cli.render import new_table, short, when
from savegame.cli.words import plural
from savegame.stores.schedules import ScheduleRecord as Schedule


def as_json(s: Schedule) -> dict[str, Any]:
    return {
        "name": s.name,
        "workflow": s.workflow,
        "workflow_ref": s.workflow_ref,
        "cron": s.cron,
        "input": dict(s.input),
        "missed": s.missed.value,
        "catchup_window": s.catchup_window,
        "next_at": s.next_at.isoformat(),
        "paused": s.paused,
        "fired": s.fired,
        "last_run_id": s.last_run_id,
        "created_at": s.created_at.isoformat(),
        "queue": s.queue,
        "priority": s.priority,
    }


def table(out: Console, items: Sequence[Schedule]) -> None:
    if not items:
        out.print("no schedules")
        return
    t = new_table(plural(len(items), "schedule"))
    t.add_column("name", no_wrap=True)
    t.add_column("workflow", overflow="fold")
    t.add_column("cron (UTC)", no_wrap=True)
    t.add_column("missed")
    t.add_column("queue", overflow="fold")
    t.add_column("next (UTC)", no_wrap=True)
    t.add_column("runs", justify="right")
    t.add_column("last run", overflow="fold")
    for s in items:
        t.add_row(
            s.name,
            s.workflow,
            s.cron,
            s.missed.value,
            s.queue or "-",
            "paused" if s.paused else when(s.next_at),
            str(s.fired),
            short(s.last_run_id or "-"),
        )
    out.print(t)


def one(out: Console, s: Schedule, verb: str) -> None:
    state = "paused" if s.paused else f"next at {when(s.next_at)} UTC"
    queue = "" if s.queue is None else f" in queue {s.queue}"
    out.print(
        f"schedule {s.name} {verb}: {s.workflow}{queue} at {s.cron!r}, {state}", soft_wrap=True
    )
