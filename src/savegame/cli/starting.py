"""What ``run`` and ``submit`` say when their run id exists or their thread is busy."""

from __future__ import annotations

import savegame
from savegame.cli import render
from savegame.model import RunInfo


def starting(observer: savegame.client.Observer, as_json: bool) -> savegame.client.Observer:
    """``observer`` with a line for a run that exists and for a wait on a busy thread
    (none under ``--json``: stdout is the JSON)."""
    if as_json:
        return observer

    def on_existing(info: RunInfo, action: str) -> None:
        where = f"run {info.run_id} exists ({info.status.value} at step {info.step})"
        if action == "continue":
            render.console().print(f"{where}: continuing it", soft_wrap=True)
        else:
            render.console().print(f"{where}: nothing executed, as it stands:", soft_wrap=True)

    def on_wait(info: RunInfo) -> None:
        render.console().print(
            f"thread {info.thread_id} has an unfinished run {info.run_id} "
            f"({info.status.value}): waiting for it to finish",
            soft_wrap=True,
        )

    observer.on_existing = on_existing
    observer.on_wait = on_wait
    return observer
