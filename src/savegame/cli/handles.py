"""The store handle a command opens on ``--store``: one per command, closed when it ends.

A command resolves its ``--store`` to one handle with :func:`connected`, where its first
call would have opened the store (so a mistake in its own arguments is reported first,
and creates nothing), and calls the handle's methods. The root group runs every command
inside :func:`command_scope` (``errors.Group.invoke``), which closes the handles the
command opened when it ends, whether it succeeded or not, before its error is reported.

Light on purpose: ``savegame --help`` imports it (with the root group); ``savegame`` itself
is imported lazily, so reading ``savegame.connect`` costs nothing until a command opens
a store.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from contextvars import ContextVar

import savegame

_OPENED: ContextVar[ExitStack | None] = ContextVar("savegame_cli_opened", default=None)
"""What closes the handles of the command being run (None outside one)."""


@contextmanager
def command_scope() -> Iterator[None]:
    """Run a command inside: the handles it opens are closed when it leaves."""
    with ExitStack() as opened:
        token = _OPENED.set(opened)
        try:
            yield
        finally:
            _OPENED.reset(token)


def connected(store: str | None, *, create: bool = False) -> savegame.Savegame:
    """The command's handle on the store ``store`` (its ``--store``) names.

    ``create``: make a missing SQLite file; only commands that start runs or declare
    something do. The others refuse it: no such store, exit 3.

    Raises:
        RuntimeError: called outside a command (a bug: the root group holds the scope).
    """
    opened = _OPENED.get()
    if opened is None:
        raise RuntimeError("connected() is for a command run by savegame's root group")
    return opened.enter_context(savegame.connect(store, create=create))
