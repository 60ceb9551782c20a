"""Send one event from a child process: ``send_child.py send STORE_URL RUN_ID`` with
``SAVEGAME_TOPIC``, ``SAVEGAME_VALUE`` (JSON) and ``SAVEGAME_KEY``: a webhook sender the
crash tests SIGKILL at any moment, then run again with the same key, as a sender retries.
Prints ``DONE delivered`` or ``DONE dropped``.
"""

from __future__ import annotations

import json
import os
import sys

from savegame import send


def main() -> None:
    _, url, run_id = sys.argv[1:4]
    value = json.loads(os.environ["SAVEGAME_VALUE"])
    sent = send(
        run_id, os.environ["SAVEGAME_TOPIC"], value, key=os.environ["SAVEGAME_KEY"], store=url
    )
    sys.stdout.write(f"DONE {'delivered' if sent.delivered else 'dropped'}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
