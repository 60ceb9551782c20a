"""The Redis store's key layout and its version: what the scripts write, checked on open.

Key layout, ``P`` being the prefix ``{name}:``::

    P:run:<run_id>       hash: the run row, its lease (owner, token, expiry) and head
    P:cp:<checkpoint_id> hash: h (header JSON), p (payload), c (checksum), size, base,
                         blobs (digests), run, thread
    P:cps:<run_id>       zset, score 0: the run's checkpoint ids (lexicographic = creation order)
    P:tcps:<thread_id>   zset, score 0: the thread's checkpoint ids (for thread_head)
    P:fx:<run_id>        hash: request_id -> journal entry (see _rows)
    P:fxi:<run_id>       zset, score 0: the run's request ids, for a prefix's lexicographic range
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
refuses keys from a newer layout rather than misread them. An older layout is
migrated when a store opens it, before the store is used:

* 1 -> 2: ``P:fxi:<run_id>`` filled from the keys of ``P:fx:<run_id>``. A process
  of an older savegame still writing to the prefix would journal entries the
  index does not list; stop those before the first newer one opens the prefix
  (as for a SQL migration).
* 2 -> 3: nothing to do: the keys of waiting runs (``P:wake``, ``P:evs:<run_id>``, a run's
  ``wake_at``, ``wait_topics``, ``wait_need``) start empty; the mark keeps an older
  savegame from misreading a waiting run.
"""

from __future__ import annotations

from typing import cast

import redis

from savegame.errors import ConfigurationError

LAYOUT = 3
"""The key layout this code writes and understands. 3: waiting runs (``P:wake``,
``P:evs:*``, a run's wake fields), which start empty."""

# ARGV: P, run ids... Each run's request ids into its index, in one atomic step per
# batch, so a run deleted meanwhile gets no index back; ZADD in slices (Lua's unpack limit).
_INDEX_JOURNALS = r"""
for i = 2, #ARGV do
  local ids = redis.call('HKEYS', ARGV[1] .. 'fx:' .. ARGV[i])
  for j = 1, #ids, 1000 do
    local args = {}
    for k = j, math.min(j + 999, #ids) do
      args[#args + 1] = 0
      args[#args + 1] = ids[k]
    end
    redis.call('ZADD', ARGV[1] .. 'fxi:' .. ARGV[i], unpack(args))
  end
end
return 0
"""
_BATCH = 200


def check_layout(client: redis.Redis, p: str, prefix: str) -> None:
    """Record :data:`LAYOUT` for a new prefix ``p`` (``{prefix}:``), or check the one
    recorded, migrating an older one (idempotent: a migration cut short runs again).

    Raises:
        ConfigurationError: the keys were written by a newer savegame.
    """
    key = p + "layout"
    client.set(key, LAYOUT, nx=True)
    found = int(cast(bytes, client.get(key) or LAYOUT))
    if found > LAYOUT:
        raise ConfigurationError(
            f"the keys under Redis prefix {prefix!r} use layout {found}, written by a "
            f"newer savegame; this one reads layout {LAYOUT}"
        )
    if found < 2:
        index = client.register_script(_INDEX_JOURNALS)
        runs = [r.decode() for r in cast(list[bytes], client.zrange(p + "runs", 0, -1))]
        for start in range(0, len(runs), _BATCH):
            index(args=[p, *runs[start : start + _BATCH]])
    if found < LAYOUT:
        # Only after the migration: one cut short leaves the old number, and runs again.
        client.set(key, LAYOUT)
