"""A store on a Redis server, shared by processes on any number of machines.

URLs: ``redis://[user[:password]@]host[:port][/db]`` and ``rediss://`` (TLS),
with an optional ``?prefix=name`` (default ``savegame``) so several stores, or
tests, share one database without seeing each other. Other query options go to
redis-py (``socket_timeout=5``).

The key layout is drawn in :mod:`savegame.stores.redis._scripts`, which writes every key.
Every write is one Lua script (:mod:`savegame.stores.redis._scripts`), so the
fencing check and everything it guards happen in one atomic step. Lease expiry
is judged by the Redis server's clock (``TIME`` inside the scripts), so clients
with skewed clocks agree on it; ``Lease.expires_at`` is server epoch seconds.
Record timestamps (``created_at``, ``updated_at``) are the client's, as elsewhere.

Durability is the server's: a checkpoint survives a Redis restart only with
``appendonly yes``, and a power loss only with ``appendfsync always``
(``everysec`` may lose the last second). Opening a store reads those settings
and, when they promise less, logs one warning per process and server on the
``savegame.stores.redis`` logger.
"""

from savegame.stores.redis._store import DEFAULT_PREFIX, RedisStore, durability, parse_url

__all__ = ["DEFAULT_PREFIX", "RedisStore", "durability", "parse_url"]
