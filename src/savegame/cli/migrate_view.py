"""Views for ``savegame migrate langgraph``: the progress bar and the summary."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich import progress as bars
from rich.console import Console
from rich.text import Text

from savegame.cli.render import size
from savegame.cli.words import plural

if TYPE_CHECKING:  # LangGraph is imported only when the command runs
    from savegame.integrations.langgraph import MigrationReport, ThreadResult


class _Rate(bars.ProgressColumn):
    """Threads per second so far (rich's own speed column counts bytes)."""

    def render(self, task: bars.Task) -> Text:
        elapsed = task.elapsed or 0.0
        rate = task.completed / elapsed if elapsed > 0 else 0.0
        return Text(f"{rate:.1f} threads/s")


@dataclass
class Hooks:
    """What ``migrate`` calls as it goes (both None: no bar)."""

    on_start: Callable[[int], None] | None = None
    on_thread: Callable[[ThreadResult], None] | None = None


@contextmanager
def thread_bar(*, enabled: bool, console: Console | None = None) -> Iterator[Hooks]:
    """A bar over threads with their rate and the time left, on stderr (a terminal only:
    ``--json`` and a piped summary stay clean); transient, gone once the summary prints."""
    if console is None:
        if not enabled or not sys.stderr.isatty():
            yield Hooks()
            return
        console = Console(stderr=True)
    columns = (
        bars.TextColumn("{task.description}"),
        bars.BarColumn(),
        bars.MofNCompleteColumn(),
        bars.TextColumn("threads"),
        _Rate(),
        bars.TextColumn("eta"),
        bars.TimeRemainingColumn(),
    )
    with bars.Progress(*columns, console=console, transient=True) as bar:
        task = bar.add_task("migrating", total=None)

        def start(total: int) -> None:
            bar.update(task, total=total)

        def done(result: ThreadResult) -> None:
            bar.update(task, advance=1, description=f"migrating {result.thread_id[:24]}")

        yield Hooks(start, done)


def _ratio(before: int, after: int) -> str:
    if not before or not after:
        return ""
    return f" (1/{before / after:.1f})" if after <= before else f" ({after / before:.2f}x)"


def summary(out: Console, report: MigrationReport) -> None:
    moved = report.migrated
    verb = "would migrate" if report.dry_run else "migrated"
    rate = f"{report.threads_per_second:.1f} threads/s"
    out.print(
        f"{verb} {plural(len(moved), 'thread')} ({plural(report.checkpoints, 'checkpoint')}, "
        f"{plural(report.writes, 'pending write')}) from {report.source} to {report.target} "
        f"in {report.seconds:.1f}s ({rate})"
        + (", newest checkpoints only" if report.latest_only else ""),
        highlight=False,
        soft_wrap=True,
    )
    if moved and not report.dry_run:
        out.print(
            f"bytes: {size(report.bytes_before)} in the source -> {size(report.bytes_after)} in "
            f"savegame{_ratio(report.bytes_before, report.bytes_after)}",
            highlight=False,
        )
    elif moved:
        out.print(f"bytes: {size(report.bytes_before)} in the source", highlight=False)
    if report.already:
        out.print(f"already migrated (left as they are): {len(report.already)}", highlight=False)
    if report.skipped:
        out.print(f"skipped {len(report.skipped)}:", highlight=False)
        for r in report.skipped:
            where = f"{r.path}: " if r.path else ""
            at = f" (checkpoint {r.checkpoint_id})" if r.checkpoint_id else ""
            out.print(f"  {r.thread_id}  {where}{r.reason}{at}", highlight=False, soft_wrap=True)


def _result(r: ThreadResult) -> dict[str, Any]:
    return {
        "thread_id": r.thread_id,
        "status": r.status,
        "checkpoints": r.checkpoints,
        "writes": r.writes,
        "namespaces": r.namespaces,
        "bytes_before": r.bytes_before,
        "bytes_after": r.bytes_after,
        "reason": r.reason,
        "path": r.path,
        "checkpoint_id": r.checkpoint_id,
    }


def as_json(report: MigrationReport) -> dict[str, Any]:
    return {
        "source": report.source,
        "target": report.target,
        "dry_run": report.dry_run,
        "latest_only": report.latest_only,
        "threads": {
            "migrated": len(report.migrated),
            "already": len(report.already),
            "skipped": len(report.skipped),
        },
        "checkpoints": report.checkpoints,
        "writes": report.writes,
        "bytes_before": report.bytes_before,
        "bytes_after": report.bytes_after,
        "blob_bytes": report.blob_bytes,
        "source_bytes": report.source_bytes,
        "target_bytes": report.target_bytes,
        "seconds": report.seconds,
        "threads_per_second": report.threads_per_second,
        "results": [_result(r) for r in report.results],
    }
