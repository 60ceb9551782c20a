"""Errors become one clear line on stderr and an exit code, in one place.

Every command runs inside :class:`Group.invoke`, so no command catches
anything itself: a ``SavegameError`` (or any other failure) is reported as
``error: ...`` and a non-zero exit, with the traceback only under ``--debug``.
"""

from __future__ import annotations

import sys
import traceback
from typing import Any

import typer
from typer.core import TyperGroup

from savegame.errors import NotFoundError, RunStateError, SavegameError

#: Exit codes, so scripts can tell "no such run" from "the run failed".
EXIT_ERROR = 1
EXIT_NOT_FOUND = 3
EXIT_RUN_STATE = 4
EXIT_INTERRUPTED = 130


class CliError(Exception):
    """A mistake on the command line that the parser cannot see (a bad JSON input)."""


def _is_control_flow(exc: BaseException) -> bool:
    # Exit, Abort, usage errors: the parser's own signals, rendered by it.
    if isinstance(exc, (typer.Exit, typer.Abort)):
        return True
    return type(exc).__module__.split(".")[0] in ("click", "typer")


def one_line(exc: BaseException) -> str:
    """The message of ``exc`` on one line; unexpected errors also name their type."""
    text = " ".join(str(exc).split())
    if isinstance(exc, (SavegameError, CliError)):
        return text or type(exc).__name__
    name = type(exc).__name__
    return f"{name}: {text}" if text else name


def exit_code(exc: BaseException) -> int:
    if isinstance(exc, NotFoundError):
        return EXIT_NOT_FOUND
    if isinstance(exc, RunStateError):
        return EXIT_RUN_STATE
    if isinstance(exc, KeyboardInterrupt):
        return EXIT_INTERRUPTED
    return EXIT_ERROR


def report(exc: BaseException, *, debug: bool) -> int:
    """Write the error to stderr and return the exit code for it."""
    if debug:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
    message = "interrupted" if isinstance(exc, KeyboardInterrupt) else one_line(exc)
    sys.stderr.write(f"error: {message}\n")
    sys.stderr.flush()
    return exit_code(exc)


class Group(TyperGroup):
    """The root command group: runs a command and turns its failure into a line and a code."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (Exception, KeyboardInterrupt) as exc:
            if _is_control_flow(exc):
                raise
            code = report(exc, debug=bool(ctx.params.get("debug")))
            raise typer.Exit(code) from None
