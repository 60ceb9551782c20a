"""Errors become one clear line on stderr and an exit code, in one place.

Every command runs inside :class:`Group.invoke`, so no command catches
anything itself: a ``SavegameError`` (or any other failure) is reported as
``error: ...`` and a non-zero exit, with the traceback only under ``--debug``.
With ``--json`` the line is a JSON object instead, ``{"error": ..., "code": ...,
"type": ...}``, on stderr too: stdout holds only a command's result, so a
program reading it never takes an error for data. The parser's own usage
errors (a bad ``--limit``) take the same form under ``--json``. Warnings that
savegame logs (a Redis that may lose writes) are one ``warning: ...`` line
each (``{"warning": ...}`` under ``--json``).

Exit codes, so scripts can tell what to do next:

====  =====================================================================
0     done (a run that paused for a person also exits 0 and says so)
1     any other error (a step raised, a cancel that timed out, ...)
2     usage error, nothing was done: the parser's own (unknown option,
      missing argument, a number out of range), a value it cannot check
      (UsageError: bad JSON, a bad duration, options that do not go
      together) or a ConfigurationError (fix the setup: an id with a
      newline, a bad store URL, a workflow that is not one or whose module
      does not import, a store that cannot be opened: StoreUnavailableError
      names it, on every backend)
3     NotFoundError: no such run, checkpoint or pending interrupt
4     RunStateError: the run cannot do that now (resume a completed run,
      approve a run that waits for nothing); EffectSettledError: someone
      else decided the gate first
5     InDoubtEffectError: a write may have happened; settle it with
      ``savegame resolve`` (the run is needs_attention)
6     NonDeterminismError: a re-executed step called something else than
      its journal holds; ``savegame replay``: a recorded run diverged from
      the code
7     CompensationError: undoing an effect failed (compensation_failed)
8     ApprovalRejected that reached the command line
9     damaged data: ``savegame verify`` found damaged records, or a record
      failed its checksum or did not decode (CorruptRecordError); ``savegame
      verify`` names them, ``savegame resume --from`` picks an older checkpoint
130   interrupted (Ctrl-C). A run the first Ctrl-C stopped at a step boundary
      says so in place of ``error: ...``: ``run X stopped at step N: savegame
      resume X continues it``
====  =====================================================================
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

import orjson
import typer
from typer.core import TyperGroup

from savegame.cli.handles import command_scope
from savegame.cli.words import store_tail
from savegame.errors import (
    ApprovalRejected,
    CompensationError,
    ConfigurationError,
    CorruptRecordError,
    EffectSettledError,
    InDoubtEffectError,
    NonDeterminismError,
    NotFoundError,
    RunStateError,
    SavegameError,
)
from savegame.redaction import redact

#: Exit codes (the table in the module docstring).
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_RUN_STATE = 4
EXIT_IN_DOUBT = 5
EXIT_NON_DETERMINISM = 6
EXIT_COMPENSATION = 7
EXIT_REJECTED = 8
EXIT_DAMAGED = 9
EXIT_INTERRUPTED = 130


class CliError(Exception):
    """A failure the CLI reports itself, in one line (a cancel that timed out: exit 1)."""


class UsageError(CliError):
    """A mistake on the command line the parser cannot see (bad JSON, a duration past its
    limit, options that do not go together): exit 2, as for the parser's own."""


class DamageFound(CliError):
    """``savegame verify`` found damaged records (after it listed them)."""


class Diverged(CliError):
    """``savegame replay``: a recorded run diverged from the code (after the report)."""


_CODES: tuple[tuple[type[BaseException], int], ...] = (
    (NotFoundError, EXIT_NOT_FOUND),
    (RunStateError, EXIT_RUN_STATE),
    (EffectSettledError, EXIT_RUN_STATE),
    (InDoubtEffectError, EXIT_IN_DOUBT),
    (NonDeterminismError, EXIT_NON_DETERMINISM),
    (Diverged, EXIT_NON_DETERMINISM),
    (CompensationError, EXIT_COMPENSATION),
    (ApprovalRejected, EXIT_REJECTED),
    (CorruptRecordError, EXIT_DAMAGED),
    (DamageFound, EXIT_DAMAGED),
    (UsageError, EXIT_USAGE),
    (ConfigurationError, EXIT_USAGE),
    (KeyboardInterrupt, EXIT_INTERRUPTED),
)


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
    return next((code for kind, code in _CODES if isinstance(exc, kind)), EXIT_ERROR)


def _stopped(exc: BaseException, store: str | None) -> str | None:
    """What to say of a run a Ctrl-C stopped at a boundary, or None for another error."""
    if not isinstance(exc, KeyboardInterrupt):
        return None
    from savegame.runtime import stopped_at  # only here: the runtime is no light import

    result = stopped_at(exc)
    if result is None:
        return None
    tail = store_tail(store)
    resume = f"savegame resume {result.run_id}{tail}"
    return f"run {result.run_id} stopped at step {result.step}: {resume} continues it"


def report(
    exc: BaseException,
    *,
    debug: bool,
    as_json: bool = False,
    store: str | None = None,
    urls: Sequence[str] = (),
) -> int:
    """Write the error to stderr and return the exit code for it (``store``: the one the
    command was given, for a command it suggests; ``urls``: every URL the command was
    given, whose secrets the line must not show, whoever wrote the message)."""
    if debug:
        shown = traceback.format_exception(type(exc), exc, exc.__traceback__)
        sys.stderr.write(redact("".join(shown), store, *urls))
    code = exit_code(exc)
    stopped = _stopped(exc, store)
    if stopped is not None:
        message = stopped
    elif isinstance(exc, KeyboardInterrupt):
        message = "interrupted"
    elif _is_control_flow(exc):
        message = " ".join(exc.format_message().split())  # type: ignore[attr-defined]
        code = int(getattr(exc, "exit_code", EXIT_USAGE))
    else:
        message = one_line(exc)
    message = redact(message, store, *urls)
    if as_json:
        line = orjson.dumps({"error": message, "code": code, "type": type(exc).__name__}).decode()
    else:
        line = message if stopped is not None else f"error: {message}"
    sys.stderr.write(line + "\n")
    sys.stderr.flush()
    return code


class _WarningLine(logging.Formatter):
    def __init__(self, as_json: bool, urls: Sequence[str]) -> None:
        super().__init__()
        self._as_json = as_json
        self._urls = urls

    def format(self, record: logging.LogRecord) -> str:
        text = redact(" ".join(_text(record).split()), *self._urls)
        return orjson.dumps({"warning": text}).decode() if self._as_json else f"warning: {text}"


def _text(record: logging.LogRecord) -> str:
    # stamina logs each retry as the bare event name, its details in the record's extras;
    # unformatted, a person sees "stamina.retry_scheduled" and nothing else.
    if record.msg != "stamina.retry_scheduled":
        return record.getMessage()
    fields = record.__dict__
    return (
        f"retry {fields.get('stamina.retry_num')} in {fields.get('stamina.wait_for')} s "
        f"after {fields.get('stamina.caused_by')}"
    )


@contextmanager
def warnings_to_stderr(as_json: bool, urls: Sequence[str] = ()) -> Iterator[None]:
    """savegame's warnings (its loggers, WARNING and up) and stamina's retries (the waits
    of savegame's retries) as one line each, while a command runs (``urls``: as for
    :func:`report`)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(_WarningLine(as_json, urls))
    loggers = [logging.getLogger("savegame"), logging.getLogger("stamina")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


P = TypeVar("P", bound=Sequence[Any])


def without_flag_types(params: P) -> P:
    """Flags (``--json``, ``--done/--not-done``, ``--help``) take no value, so their help
    shows no type: typer would print ``<bool>`` beside each, as if one were expected.

    Applied to every command's options by the root group (:class:`Group`), so
    a flag declared anywhere needs nothing of its own.
    """
    for param in params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""  # what the help shows in the value's place
    return params


_JSON = "savegame.json"
_STORE = "savegame.store"
_URLS = "savegame.urls"


def _option(args: Sequence[str], name: str) -> str | None:
    """The value given to option ``name`` (``--store URL`` or ``--store=URL``), or None."""
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(name + "="):
            return arg[len(name) + 1 :]
    return None


def _is_usage_error(exc: BaseException) -> bool:
    # The parser's own (a bad --limit, an unknown option): it has a message and a code.
    return _is_control_flow(exc) and hasattr(exc, "format_message")


class Group(TyperGroup):
    """The root command group: runs a command and turns its failure into a line and a code."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # Read before the parser sees them, so even its own errors know --json was asked.
        given = args[: args.index("--")] if "--" in args else args
        ctx.meta[_JSON] = "--json" in given
        ctx.meta[_STORE] = _option(given, "--store")
        # Every URL given (--store, --to, a migration's source) and the default store's.
        urls = [arg for arg in args if "://" in arg]
        ctx.meta[_URLS] = [*urls, os.environ.get("SAVEGAME_STORE") or ""]
        return super().parse_args(ctx, args)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        command = super().get_command(ctx, cmd_name)
        if command is not None:
            without_flag_types(command.get_params(ctx))
        return command

    def get_params(self, ctx: Any) -> Any:
        return without_flag_types(super().get_params(ctx))

    def invoke(self, ctx: Any) -> Any:
        as_json = bool(ctx.meta.get(_JSON))
        urls = ctx.meta.get(_URLS, ())
        try:
            with warnings_to_stderr(as_json, urls), command_scope():
                return super().invoke(ctx)
        except (Exception, KeyboardInterrupt) as exc:
            if _is_control_flow(exc) and not (as_json and _is_usage_error(exc)):
                raise
            debug = bool(ctx.params.get("debug"))
            store = ctx.meta.get(_STORE)
            code = report(exc, debug=debug, as_json=as_json, store=store, urls=urls)
            raise typer.Exit(code) from None
