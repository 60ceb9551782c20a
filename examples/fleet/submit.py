"""Queue tickets for the workers: ``python submit.py TEXT ...`` prints each run's id.

The store is ``$SAVEGAME_STORE``, else ``sqlite:///savegame.db`` in the working
directory: the one ``savegame worker`` started in this folder uses.
"""

from __future__ import annotations

import sys

import savegame
from fleet import wf


def main() -> None:
    for text in sys.argv[1:]:
        info = savegame.submit(wf, {"text": text})
        print(f"queued {info.run_id} ({info.workflow_ref})")


if __name__ == "__main__":
    main()
