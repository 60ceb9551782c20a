"""The PostgreSQL schema as append-only migrations.

Never edit a released migration: add a new one at the end. ``{s}`` in a
statement is the quoted schema name; statements are plain ``CREATE TABLE`` /
``CREATE INDEX`` (never ``CONCURRENTLY``) so :func:`migrate` can run inside a
transaction the caller already has open, and a failed migration leaves the
previous version.

Units (as in the SQLite store): ``created_at``, ``updated_at``, ``expires_at``
and ``completed_at`` are integer microseconds since the epoch, exact round
trips of the model's datetimes; ``lease_expires_at`` is epoch seconds as
``double precision``, like ``Lease.expires_at``, taken from the server's clock
so processes on different machines agree on when a lease expires. JSON columns
are ``json`` (orjson text kept verbatim, unlike ``jsonb``, which would reorder
keys and refuse ``\\u0000``). Identifier columns use ``COLLATE "C"`` so ids sort
by code point, as Python compares strings: history order and ``before`` paging
must not depend on the database's locale.

Only :mod:`savegame.stores.postgres` imports this module; it needs no driver import.
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING, Any

from savegame.errors import ConfigurationError
from savegame.stores.postgres import _queues as queues

if TYPE_CHECKING:
    import psycopg

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 1: runs (with their lease), checkpoints, the effect journal, blobs.
    (
        """
        CREATE TABLE {s}.runs (
            run_id text COLLATE "C" PRIMARY KEY,
            thread_id text COLLATE "C" NOT NULL,
            workflow text NOT NULL,
            workflow_ref text,
            status text NOT NULL,
            step bigint NOT NULL,
            head_checkpoint_id text COLLATE "C",
            created_at bigint NOT NULL,
            updated_at bigint NOT NULL,
            error text,
            metadata json NOT NULL,
            lease_owner text,
            lease_token bigint NOT NULL DEFAULT 0,
            lease_expires_at double precision,
            cancel_requested boolean NOT NULL DEFAULT false
        )
        """,
        "CREATE INDEX runs_by_created ON {s}.runs (created_at, run_id)",
        "CREATE INDEX runs_by_thread ON {s}.runs (thread_id, created_at)",
        "CREATE INDEX runs_by_status ON {s}.runs (status, created_at)",
        """
        CREATE TABLE {s}.checkpoints (
            checkpoint_id text COLLATE "C" PRIMARY KEY,
            run_id text COLLATE "C" NOT NULL REFERENCES {s}.runs (run_id) ON DELETE CASCADE,
            thread_id text COLLATE "C" NOT NULL,
            parent_id text COLLATE "C",
            step bigint NOT NULL,
            node text,
            status text NOT NULL,
            next text,
            usage json NOT NULL,
            metadata json NOT NULL,
            created_at bigint NOT NULL,
            expires_at bigint,
            format_version integer NOT NULL,
            state_version integer NOT NULL,
            size bigint NOT NULL,
            base_id text COLLATE "C",
            blobs text[] NOT NULL,
            checksum text NOT NULL,
            payload bytea NOT NULL
        )
        """,
        "CREATE INDEX checkpoints_by_run ON {s}.checkpoints (run_id, checkpoint_id)",
        "CREATE INDEX checkpoints_by_thread ON {s}.checkpoints (thread_id, checkpoint_id)",
        # (Dropped again by 3: no query used it.)
        "CREATE INDEX checkpoints_by_base ON {s}.checkpoints (base_id) WHERE base_id IS NOT NULL",
        """
        CREATE TABLE {s}.effects (
            run_id text COLLATE "C" NOT NULL REFERENCES {s}.runs (run_id) ON DELETE CASCADE,
            request_id text COLLATE "C" NOT NULL,
            kind text NOT NULL,
            name text NOT NULL,
            step bigint NOT NULL,
            node text NOT NULL,
            call_index bigint NOT NULL,
            status text NOT NULL,
            arguments bytea NOT NULL,
            result bytea,
            error text,
            metadata json NOT NULL,
            created_at bigint NOT NULL,
            completed_at bigint,
            checksum text NOT NULL,
            PRIMARY KEY (run_id, request_id)
        )
        """,
        # list_effects(run_id): a range scan already in the listing order.
        "CREATE INDEX effects_by_run ON {s}.effects (run_id, created_at, request_id)",
        # Pending approvals and in-doubt calls across runs, without a full scan.
        "CREATE INDEX effects_by_kind_status ON {s}.effects (kind, status, created_at, request_id)",
        """
        CREATE TABLE {s}.blobs (
            digest text COLLATE "C" PRIMARY KEY,
            data bytea NOT NULL,
            size bigint NOT NULL
        )
        """,
        # The set of header.blobs per checkpoint, removed with it (cascade), so
        # delete_unreferenced_blobs is one anti-join on the digest index. No
        # foreign key to blobs: a blob row may arrive in the same transaction
        # after its reference (see PostgresStore._insert_checkpoint).
        """
        CREATE TABLE {s}.checkpoint_blobs (
            checkpoint_id text COLLATE "C" NOT NULL
                REFERENCES {s}.checkpoints (checkpoint_id) ON DELETE CASCADE,
            digest text COLLATE "C" NOT NULL,
            PRIMARY KEY (checkpoint_id, digest)
        )
        """,
        "CREATE INDEX checkpoint_blobs_by_digest ON {s}.checkpoint_blobs (digest)",
    ),
    # 2: a worker fleet claims the oldest runnable run; only queued and running
    # runs are in the index, so finished history never slows a claim.
    (
        "CREATE INDEX runs_claimable ON {s}.runs (created_at, run_id)"
        " WHERE status IN ('queued', 'running')",
    ),
    # 3: no query ever used checkpoints_by_base (retention walks bases from the
    # headers it already read), and every delta insert paid for it.
    ("DROP INDEX IF EXISTS {s}.checkpoints_by_base",),
    # 4: the run row's own check (RunInfo.checksum): its workflow reference is what
    # resume imports. A constant default fills old rows without a table rewrite.
    ("ALTER TABLE {s}.runs ADD COLUMN checksum text NOT NULL DEFAULT ''",),
    # 5: waiting runs (timers, events, child runs). wake_at is integer microseconds
    # (WOKEN_MICROS, 0, once its events arrived) on the clocks of the processes that
    # compute due times and claim; wait_topics the topics it waits for.
    (
        "ALTER TABLE {s}.runs ADD COLUMN wake_at bigint",
        "ALTER TABLE {s}.runs ADD COLUMN wait_topics text[] NOT NULL DEFAULT '{{}}'",
        "ALTER TABLE {s}.runs ADD COLUMN wait_need integer NOT NULL DEFAULT 0",
        # A worker finds the woken runs soonest first without a look at any other run.
        "CREATE INDEX runs_waking ON {s}.runs (wake_at, run_id)"
        " WHERE status = 'waiting' AND wake_at IS NOT NULL",
        # The wake check: a run's pending events by topic, only those entries indexed.
        "CREATE INDEX effects_pending_events ON {s}.effects (run_id, name)"
        " WHERE kind = 'event' AND status = 'pending'",
    ),
    # 6: schedules (stores/_sql/schedules.py). next_at is the cursor, integer
    # microseconds like wake_at; input and metadata JSON text.
    (
        """
        CREATE TABLE {s}.schedules (
            name text PRIMARY KEY,
            workflow text NOT NULL,
            workflow_ref text NOT NULL,
            cron text NOT NULL,
            input text NOT NULL,
            missed text NOT NULL,
            catchup_window double precision NOT NULL,
            next_at bigint NOT NULL,
            created_at bigint NOT NULL,
            updated_at bigint NOT NULL,
            paused boolean NOT NULL DEFAULT false,
            fired bigint NOT NULL DEFAULT 0,
            last_run_id text,
            metadata text NOT NULL DEFAULT '{{}}',
            checksum text NOT NULL DEFAULT ''
        )
        """,
        # A worker's tick reads the due ones only.
        "CREATE INDEX schedules_due ON {s}.schedules (next_at) WHERE NOT paused",
    ),
    # 7: queues with limits for the worker fleet (postgres/_queues.py).
    queues.MIGRATION,
    # 8: a schedule's queue: its occurrences' runs go in it (stores/_sql/schedules.py).
    (
        "ALTER TABLE {s}.schedules ADD COLUMN queue text",
        "ALTER TABLE {s}.schedules ADD COLUMN priority integer NOT NULL DEFAULT 0",
    ),
    # 9: the code version a run started under, from its metadata (runtime/_versions.py),
    # for claim_run(versions=...). NULL: a run from before runs had one.
    ("ALTER TABLE {s}.runs ADD COLUMN version text",),
)

#: The schema version this code writes and understands.
SCHEMA_VERSION = len(MIGRATIONS)


def quote_ident(name: str) -> str:
    """``name`` as a PostgreSQL identifier, quoted (embedded quotes doubled).

    Raises:
        ConfigurationError: an empty name or one with a NUL character.
    """
    if not name or "\x00" in name:
        raise ConfigurationError(f"bad PostgreSQL schema name {name!r}")
    return '"' + name.replace('"', '""') + '"'


def lock_key(schema: str) -> int:
    """The advisory-lock key of ``schema``'s migrations: the same in every process."""
    digest = hashlib.blake2b(f"savegame.schema:{schema}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def _one(conn: psycopg.Connection[Any], query: str, params: tuple[Any, ...] = ()) -> Any:
    row = conn.execute(query, params).fetchone()
    return None if row is None else row[0]


def migrate(conn: psycopg.Connection[Any], schema: str | None = None) -> int:
    """Bring ``schema`` (default: the connection's current schema) to :data:`SCHEMA_VERSION`.

    Runs in a transaction of its own, or in a savepoint when ``conn`` is
    already inside one (then the migration commits with the caller's
    transaction, and the advisory lock is held until then). Two processes
    opening a fresh schema at once serialise on ``pg_advisory_xact_lock``:
    the second waits, then finds the migrations applied. Call it at the
    default READ COMMITTED level, so the statements after the lock see what
    the first opener committed.

    Returns:
        The version found before migrating (0 for a fresh schema).
    Raises:
        ConfigurationError: the schema was written by a newer savegame, or there
            is no current schema to put the tables in.
    """
    with conn.transaction():
        if schema is None:
            schema = _one(conn, "SELECT current_schema()")
            if schema is None:
                raise ConfigurationError(
                    "no schema to create savegame's tables in: the search_path names none "
                    "that exists; pass ?schema=NAME"
                )
        s = quote_ident(schema)
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key(schema),))
        # Under the lock: IF NOT EXISTS alone races when two openers create at once.
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {s}")
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {s}.savegame_schema ("
            " version integer PRIMARY KEY,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        found = int(_one(conn, f"SELECT coalesce(max(version), 0) FROM {s}.savegame_schema"))
        if found > SCHEMA_VERSION:
            raise ConfigurationError(
                f"PostgreSQL schema {schema!r} has savegame schema version {found}, newer than "
                f"this savegame understands ({SCHEMA_VERSION}); upgrade savegame"
            )
        for version in range(found + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[version - 1]:
                conn.execute(statement.format(s=s))
            conn.execute(f"INSERT INTO {s}.savegame_schema (version) VALUES (%s)", (version,))
    return found
