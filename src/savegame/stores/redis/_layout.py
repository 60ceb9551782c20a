"""The Redis store's key layout and its version: what the scripts write, checked on open.

Key layout, ``P`` being the prefix ``{name}:``::

    P:run:<run_id>       hash: the run row, its lease (owner, token, expiry) and head
    P:cp:<checkpoint_id> hash: h (header JSON), p (payload), c (checksum), size, base,
                         blobs (digests), run, thread
    P:cps:<run_id>       zset, score 0: the run's checkpoint ids (lexicographic = creation order)
    P:tcps:<thread_id>   zset, score 0: the thread's checkpoint ids (for thread_head)
    P:fx:<run_id>        hash: request_id -> journal entry (see _rows)
    P:runs               zset: run ids scored by created_at (microseconds)
    P:status:<status>    zset: the same, per run status (claim_run merges queued and running)
    P:truns:<thread_id>  zset: the same, per thread
    P:threads            zset: thread ids scored by the latest updated_at of their runs
    P:blob:<digest>      string: blob bytes
    P:blobs              set: stored digests;   P:refs  hash: digest -> referring checkpoints
    P:wake               zset: waiting runs with a wake time, scored by it (0: woken by events)
    P:evs:<run_id>       hash: request_id -> topic of the run's pending event entries
    P:layout             this key layout's version

Like the SQL schemas, the layout is versioned: ``P:layout`` holds the version
that wrote the keys, set by the first store to open the prefix, and a store
refuses keys from a newer layout rather than misread them.
"""

from __future__ import annotations

from typing import cast

import redis

from savegame.errors import ConfigurationError

LAYOUT = 2
"""The key layout this code writes and understands. 2: waiting runs (``P:wake``,
``P:evs:*``, a run's wake fields); layout 1 keys read as they are."""


def check_layout(client: redis.Redis, p: str, prefix: str) -> None:
    """Record :data:`LAYOUT` for a new prefix ``p`` (``{prefix}:``), or check the one recorded.

    Raises:
        ConfigurationError: the keys were written by a newer savegame.
    """
    key = p + "layout"
    client.set(key, LAYOUT, nx=True)
    found = int(cast(bytes, client.get(key) or LAYOUT))
    if found < LAYOUT:
        # Every layout so far only adds keys: an older one is this one without them, and
        # the mark keeps an older savegame from misreading a waiting run.
        client.set(key, LAYOUT)
        found = LAYOUT
    if found > LAYOUT:
        raise ConfigurationError(
            f"the keys under Redis prefix {prefix!r} use layout {found}, written by a "
            f"newer savegame; this one reads layout {LAYOUT}"
        )
