"""Where the user's code is imported from: the working directory, or ``--app-dir DIR``.

A run's workflow is stored as ``module:attr`` (``fleet:wf``, as ``python submit.py``
records it after ``from fleet import wf``). The ``savegame`` console script's import
path starts with its own folder, not the one it was started in, so without this a
worker started beside ``fleet.py`` could not import it. As ``python -m``, uvicorn
(``--app-dir``) and celery do, the working directory comes first on the path, and
``--app-dir`` puts another folder before it. Kept apart from the command modules: the
root command calls it for every command, before anything heavy is imported.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

AppDirOption = Annotated[
    Path | None,
    typer.Option(
        "--app-dir",
        metavar="DIR",
        exists=True,
        file_okay=False,
        show_default=False,
        help="Import the workflow's module (module:attr) from this folder "
        "(default: the working directory, then PYTHONPATH).",
    ),
]


def importable(folder: str | Path | None = None) -> None:
    """Put ``folder`` (default: the working directory) first on the import path, unless
    it is on it already."""
    try:
        where = os.path.abspath(folder if folder is not None else os.getcwd())
    except OSError:  # the working directory was removed under us: nothing to import from
        return
    if where not in sys.path:
        sys.path.insert(0, where)
