"""The default store: one SQLite file, safe for several processes on one machine.

Durability and concurrency come from SQLite itself: WAL mode, ``synchronous=FULL``
by default (a committed checkpoint survives a power loss; ``?synchronous=normal``
trades the last commits on power loss for speed), and every write in a
``BEGIN IMMEDIATE`` transaction so the fencing check and the write it guards
happen under one write lock, across processes as well as threads.

URLs: ``sqlite:///relative/path.db``, ``sqlite:////absolute/path.db``, each with
an optional ``?synchronous=normal``.

The package: the store in ``_store``, its schema and migrations in ``_schema``,
the SQL only SQLite runs in ``_statements`` (what it shares with PostgreSQL is
:mod:`savegame.stores._sql`).
"""

from savegame.stores.sqlite._store import SqliteStore, parse_url

__all__ = ["SqliteStore", "parse_url"]
