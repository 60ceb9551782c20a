"""A store in PostgreSQL: for several processes on several machines.

Every write is one transaction on a pooled connection (psycopg 3 with
``psycopg_pool``). Fencing locks the run row (``SELECT ... FOR UPDATE``) in the
transaction that writes, so a takeover (which updates that row) and a stale
writer's checkpoint cannot interleave; leases are compare-and-set on the run
row, judged by the server's clock. Reads run as single autocommit statements.
A group commit's batch goes in one or two round trips (statements over arrays,
pipeline mode; see ``PostgresStore._pipelined``).

URLs: ``postgresql://user@host:5432/dbname`` (``postgres://`` too), with any
libpq parameter in the query plus these options:

* ``schema=NAME``: keep the tables in this schema (created if missing);
  default: the connection's current schema (usually ``public``).
* ``pool_min=N`` (default 1), ``pool_max=N`` (default 10): pool size.
* ``pool_timeout=SECONDS`` (default 30): how long a call waits for a free
  connection before ``psycopg_pool.PoolTimeout``.
* ``prepare_threshold=N`` (default 5, psycopg's): a statement run N times on a
  connection is prepared on the server, and later runs skip its parsing and
  planning. ``prepare_threshold=none`` never prepares: set it behind a pooler in
  transaction mode that does not track prepared statements (PgBouncer before 1.21,
  or with ``max_prepared_statements=0``), where a prepared statement can be missing
  on the next transaction's server connection.

``Store.url`` never carries the password: supply it in the URL you open, or
through ``PGPASSWORD`` / ``~/.pgpass`` so that reopening ``store.url`` works.

The package: the store in ``_store``, its schema and migrations in ``_schema``
(which needs no driver import), the SQL only PostgreSQL runs in ``_statements``
(what it shares with SQLite is :mod:`savegame.stores._sql`).
"""

from savegame.stores.postgres._store import PostgresStore, parse_url, public_url

__all__ = ["PostgresStore", "parse_url", "public_url"]
