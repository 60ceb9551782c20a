"""A worker process for the fleet test: ``worker_main.py STORE_URL [idle seconds [poll]]``.

Tags its step records with SAVEGAME_HOST so the test can tell the hosts apart.
"""

from __future__ import annotations

import logging
import sys

from savegame import Worker


def main() -> None:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    url = sys.argv[1]
    idle = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
    poll = float(sys.argv[3]) if len(sys.argv) > 3 else 0.05
    worker = Worker(url, concurrency=2, lease_ttl=2.0, poll=poll)
    worker.install_signal_handlers()
    stats = worker.run(idle_exit=idle)
    print(
        f"claimed={stats.claimed} finished={len(stats.finished)} errors={stats.errors} "
        f"scheduled={stats.scheduled}",
        flush=True,
    )


if __name__ == "__main__":
    main()
