"""Prunes a store in a child process and SIGKILLs itself after its K-th batch of deletes.

Usage: prune_child.py STORE_URL BATCH_SIZE KILL_AFTER

Keeps each run's newest checkpoint (``keep_last=1``), deleting ``BATCH_SIZE``
checkpoints per store call. Prints ``BATCH <n> <deleted>`` (flushed) once the
n-th ``delete_checkpoints`` call has returned, then dies by SIGKILL right after
call KILL_AFTER: the cut falls between two committed batches, as when a prune
is killed in the middle. Prints ``DONE <checkpoints>`` if it gets to the end.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Sequence
from typing import Any, cast

from savegame import Store, open_store
from savegame.client import prune
from savegame.maintenance import RetentionPolicy


class KilledAfter:
    """The real store, but the process dies right after the k-th delete_checkpoints call."""

    def __init__(self, inner: Store, kill_after: int) -> None:
        self._inner = inner
        self._kill_after = kill_after
        self._calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def delete_checkpoints(self, checkpoint_ids: Sequence[str]) -> int:
        deleted = self._inner.delete_checkpoints(checkpoint_ids)
        self._calls += 1
        sys.stdout.write(f"BATCH {self._calls} {deleted}\n")
        sys.stdout.flush()
        if self._calls == self._kill_after:
            os.kill(os.getpid(), signal.SIGKILL)
        return deleted


def main() -> None:
    url, batch_size, kill_after = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    store = open_store(url)
    wrapped = cast(Store, KilledAfter(store, kill_after))
    result = prune(RetentionPolicy(keep_last=1), store=wrapped, batch_size=batch_size)
    sys.stdout.write(f"DONE {len(result.checkpoints)}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
