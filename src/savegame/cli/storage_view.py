"""Views for the storage commands: verify, prune, stats, rekey, and their progress bar."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from rich import progress as bars
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from savegame.cli.render import new_table, size, status
from savegame.cli.words import plural
from savegame.maintenance import PrunePlan, RekeyReport, StoreReport, VerifyReport

Advance = Callable[[int, int], None]
"""The maintenance functions' ``progress=``: called with (runs done, runs in all)."""


@contextmanager
def run_bar(label: str, *, enabled: bool) -> Iterator[Advance | None]:
    """A progress bar over runs on stderr; None (no bar) when disabled or stderr is not a terminal.

    stderr, so ``--json`` or a table on a piped stdout stays clean; transient, so
    the bar is gone once the report is printed.
    """
    if not enabled or not sys.stderr.isatty():
        yield None
        return
    columns = (
        bars.TextColumn("{task.description}"),
        bars.BarColumn(),
        bars.MofNCompleteColumn(),
        bars.TextColumn("runs"),
        bars.TimeElapsedColumn(),
    )
    with bars.Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield advance


def _counts(runs: int, checkpoints: int, blobs: int, effects: int) -> str:
    return (
        f"{plural(runs, 'run')}: {plural(checkpoints, 'checkpoint')}, "
        f"{plural(blobs, 'blob')}, {plural(effects, 'journal entry', 'journal entries')}"
    )


def _fields(out: Console, rows: Sequence[tuple[str, str]]) -> None:
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        out.print(f"{name:<{width}}  {value}", soft_wrap=True)


def verified(out: Console, report: VerifyReport) -> None:
    counts = _counts(report.runs, report.checkpoints, report.blobs, report.effects)
    if report.ok:
        out.print(Text.assemble(f"verified {counts}: ", ("no damage", "green")))
        return
    for kid, record_id in report.missing_keys.items():
        out.print(f"not checked: records under key {kid!r} (first: {record_id}); add that key")
    if not report.damaged:
        return
    found = plural(len(report.damaged), "damaged record")
    out.print(Text.assemble(f"verified {counts}: ", (found, "bold red")))
    table = new_table(found)
    table.add_column("kind")
    table.add_column("id", no_wrap=True)
    table.add_column("run", no_wrap=True)
    table.add_column("reason", overflow="fold")
    for d in report.damaged:
        # The id has its own column; keep the reason short.
        reason = d.reason.removeprefix(f"record {d.ident} is damaged: ")
        table.add_row(d.kind, d.ident, d.run_id, reason)
    out.print(table)


def pruned(out: Console, plan: PrunePlan) -> None:
    verb = "would delete" if plan.dry_run else "deleted"
    runs = plural(len(plan.runs), "finished run")
    rows = [
        (
            verb,
            f"{runs}, {plural(len(plan.checkpoints), 'checkpoint')} of other runs: "
            f"{size(plan.checkpoint_bytes)} of payloads",
        ),
        (
            "kept",
            f"{plural(plan.kept_as_base, 'checkpoint')} that kept ones load from (delta bases)",
        ),
        (
            "exempt",
            f"{plural(len(plan.exempt_runs), 'run')} waiting for a person "
            "(--include-waiting prunes them too)",
        ),
        *(
            [("skipped", f"{plural(len(plan.skipped), 'run')}: {escape(reason)}")]
            if (reason := next(iter(plan.skipped.values()), None))
            else []
        ),
        (
            "blobs",
            "unreferenced ones are found when deleting (not in a dry run)"
            if plan.dry_run
            else f"freed {plural(plan.blobs, 'blob')} ({size(plan.blob_bytes)})",
        ),
    ]
    _fields(out, rows)


def store_report(out: Console, report: StoreReport) -> None:
    t = report.totals
    on_disk = "unknown" if t.file_bytes is None else size(t.file_bytes)
    rows = (
        ("runs", str(t.runs)),
        ("checkpoints", f"{t.checkpoints} ({size(t.payload_bytes)} of payloads)"),
        ("blobs", f"{t.blobs} ({size(t.blob_bytes)})"),
        ("journal entries", str(t.effects)),
        ("on disk", on_disk),
    )
    _fields(out, rows)
    if not report.runs:
        return
    table = new_table(f"{plural(len(report.runs), 'run')} by size (largest first)")
    table.add_column("run", no_wrap=True)
    table.add_column("thread", overflow="fold")
    table.add_column("status")
    table.add_column("checkpoints", justify="right")
    table.add_column("payloads", justify="right")
    table.add_column("journal", justify="right")
    table.add_column("journal size", justify="right")
    for r in report.runs:
        table.add_row(
            r.run_id,
            "=" if r.thread_id == r.run_id else r.thread_id,
            status(r.status),
            str(r.checkpoints),
            size(r.payload_bytes),
            str(r.effects),
            size(r.effect_bytes),
        )
    out.print()
    out.print(table)


def rekeyed(out: Console, report: RekeyReport) -> None:
    counts = _counts(report.runs, report.checkpoints, report.blobs, report.effects)
    out.print(f"re-encrypted {counts} under key {report.key_id!r}")
    if report.schedules:
        out.print(f"signed {plural(report.schedules, 'schedule')} again")
    if report.adopted:
        out.print(f"signed {plural(report.adopted, 'record')} that carried no authentication")
    if report.collected:
        out.print(f"deleted {plural(report.collected, 'blob')} stored under their old names")
    if report.skipped:
        table = new_table(f"{plural(len(report.skipped), 'run')} left as they were")
        table.add_column("run", no_wrap=True)
        table.add_column("why", overflow="fold")
        for skipped in report.skipped:
            table.add_row(skipped.run_id, skipped.reason)
        out.print(table)
