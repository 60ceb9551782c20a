"""Helpers the command modules share: JSON and duration options, progress lines, how a run's end is shown."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import orjson
from rich.text import Text

import savegame
from savegame.cli import jsonview, render
from savegame.cli.errors import UsageError
from savegame.cli.words import store_tail
from savegame.codec import from_data
from savegame.errors import SavegameError
from savegame.model import CheckpointHeader, RunResult, RunStatus
from savegame.runtime import as_workflow, load


def parse_json(text: str, option: str) -> Any:
    """An option's JSON value, tagged values (``{"$sg:tuple": ...}``) revived as `show --json` prints them."""
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise UsageError(f"{option} is not valid JSON: {exc}") from None
    try:
        return from_data(value)
    except Exception as exc:
        # Whatever a malformed tag makes the reviver raise ({"$sg:tuple": 5} is a TypeError,
        # a bad "$sg:datetime" a ValueError, a registered type's constructor anything), the
        # mistake is in the option's text.
        detail = str(exc) if isinstance(exc, SavegameError) else f"{type(exc).__name__}: {exc}"
        raise UsageError(f"{option} holds a tagged value that does not decode: {detail}") from None


def parse_object(text: str, option: str, what: str) -> dict[str, Any]:
    value = parse_json(text, option)
    if not isinstance(value, dict):
        raise UsageError(f"{option} must be a JSON object of {what}, not {type(value).__name__}")
    return value


def parse_input(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    # The same tagged form `show --json` prints, so a state can be fed back in.
    return parse_object(text, "--input", "state keys")


def load_workflow(ref: str) -> Any:
    target = load(ref)
    as_workflow(target, ref)  # refuse a non-workflow here, naming the reference the user typed
    return target


_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_PART = re.compile(r"([0-9]+)([smhdw])")


def _quoted(text: str) -> str:
    # A 5,000-digit argument is not echoed whole into the one error line.
    return repr(text if len(text) <= 40 else text[:37] + "...")


def parse_duration(text: str | None, option: str, *, at_most: timedelta) -> timedelta | None:
    """``30s``, ``15m``, ``12h``, ``7d``, ``2w`` or a sum such as ``1d12h``, up to ``at_most``."""
    if text is None:
        return None
    spec = text.strip().lower()
    parts = _PART.findall(spec)
    if not parts or "".join(n + u for n, u in parts) != spec:
        raise UsageError(
            f"{option} {_quoted(text)} is not a duration: a whole number and a unit "
            "(s, m, h, d, w), e.g. 30s, 15m, 12h, 7d, 2w or 1d12h"
        )
    # Summed in whole seconds and checked before a timedelta is made: a huge number is
    # refused for its size, not by an OverflowError (or int()'s 4,300-digit limit).
    limit = int(at_most.total_seconds())
    total = 0
    for number, unit in parts:
        digits = number.lstrip("0") or "0"
        fits = len(digits) <= len(str(limit))
        total += int(digits) * _SECONDS[unit] if fits else limit + 1
    if total > limit:
        days = at_most.days
        raise UsageError(
            f"{option} {_quoted(text)} is too long: at most {days}d ({days // 365} years)"
        )
    return timedelta(seconds=total)


def progress(as_json: bool) -> savegame.client.Observer:
    if as_json:
        return savegame.client.Observer()
    out = render.console()

    def on_checkpoint(header: CheckpointHeader, seconds: float) -> None:
        render.progress(out, header, seconds)

    return savegame.client.Observer(on_checkpoint=on_checkpoint)


def finish(
    sg: savegame.Savegame,
    res: RunResult,
    *,
    as_json: bool,
    verb: str,
    store: str | None,
    quiet: bool = False,
) -> None:
    """Show where a run ended; a paused run also shows what it waits for and how to go on
    (``quiet``: only the run's id and status). ``store``: the --store given, for the hints."""
    if quiet and not as_json:
        render.quiet(render.console(), res.run_id, res.status)
        return
    # A run asleep may wait for a person too: an approval with a deadline.
    waiting = (
        sg.pending(res.run_id) if res.status in (RunStatus.INTERRUPTED, RunStatus.WAITING) else []
    )
    if as_json:
        jsonview.emit({**jsonview.result(res), "pending": [jsonview.pending(p) for p in waiting]})
        return
    out = render.console()
    asleep = res.status is RunStatus.WAITING
    paused = bool(waiting) or asleep
    render.result(out, res, verb=verb.replace("ended", "paused") if paused else verb)
    if waiting:
        render.waiting(out, res.run_id, waiting, store)
    if asleep and waiting:
        for p in waiting:
            if p.expires_at is not None:
                out.print(
                    f"  deadline:  {p.expires_at.isoformat(timespec='seconds')} "
                    f"(then {p.on_expiry}, by a worker or `savegame resume {res.run_id} --wait`)",
                    soft_wrap=True,
                )
    elif asleep:
        head = sg.checkpoint(res.checkpoint_id).metadata.get("waiting")
        what = head.get("for") if isinstance(head, dict) else None
        tail = store_tail(store)
        out.print(Text.assemble(("waiting for: ", "yellow"), str(what)), soft_wrap=True)
        out.print(
            f"  a worker continues it once woken, or: savegame resume {res.run_id}{tail} --wait",
            soft_wrap=True,
        )
