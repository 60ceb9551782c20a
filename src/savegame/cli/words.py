"""How the CLI words what it prints: a count with its noun, a store option a shell reads back.

Standard library only: the error handler, which every command loads, uses it too.
"""

from __future__ import annotations

import shlex

from savegame.redaction import redact_url


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 step``, ``2 steps``; ``many`` for a noun that does not take an s (``entries``)."""
    return f"{n} {word if n == 1 else many or word + 's'}"


def store_tail(store: str | None) -> str:
    """`` --store URL`` for a command a hint suggests, or '' when no store was given.

    Without its password (whoever runs it supplies that as they did this time), and
    quoted for the shell where the URL holds what a shell would eat: ``?`` is a glob and
    ``&`` ends the command, so ``sqlite:///m.db?objects=s3://b&endpoint=...`` pasted
    unquoted would run something else than the hint says.
    """
    return f" --store {shlex.quote(redact_url(store))}" if store else ""
