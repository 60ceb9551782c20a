"""The ``savegame`` command line: thin commands over the public API (typer + rich).

Only this package imports typer and rich; ``import savegame`` never does.
"""

from __future__ import annotations

from savegame.cli.app import app


def main() -> None:
    """Entry point of the ``savegame`` console script and ``python -m savegame``."""
    app(prog_name="savegame")


__all__ = ["app", "main"]
