"""Helpers the command modules share: JSON options, progress lines, how a run's end is shown."""

from __future__ import annotations

from typing import Any

import orjson

import savegame
from savegame.cli import jsonview, render
from savegame.cli.errors import CliError
from savegame.codec.values import from_data
from savegame.model import CheckpointHeader, RunResult, RunStatus


def parse_json(text: str, option: str) -> Any:
    """An option's JSON value, tagged values (``{"$sg:tuple": ...}``) revived as `show --json` prints them."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise CliError(f"{option} is not valid JSON: {exc}") from None
    return from_data(value)


def parse_object(text: str, option: str, what: str) -> dict[str, Any]:
    value = parse_json(text, option)
    if not isinstance(value, dict):
        raise CliError(f"{option} must be a JSON object of {what}, not {type(value).__name__}")
    return value


def progress(as_json: bool) -> savegame.Observer:
    if as_json:
        return savegame.Observer()
    out = render.console()

    def on_checkpoint(header: CheckpointHeader, seconds: float) -> None:
        render.progress(out, header, seconds)

    return savegame.Observer(on_checkpoint=on_checkpoint)


def finish(res: RunResult, *, as_json: bool, verb: str, store: str | None) -> None:
    """Show where a run ended; a paused run also shows what it waits for and how to go on."""
    waiting = (
        savegame.pending_interrupts(res.run_id, store=store)
        if res.status is RunStatus.INTERRUPTED
        else []
    )
    if as_json:
        jsonview.emit({**jsonview.result(res), "pending": [jsonview.pending(p) for p in waiting]})
        return
    out = render.console()
    render.result(out, res, verb=verb.replace("ended", "paused") if waiting else verb)
    if waiting:
        render.waiting(out, res.run_id, waiting, store)
