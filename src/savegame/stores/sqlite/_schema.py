"""The SQLite schema as append-only migrations.

Never edit a released migration: add a new one at the end. Each migration is a
tuple of statements run in one ``BEGIN IMMEDIATE`` transaction together with
its row in ``savegame_schema``, so two processes opening a new file at once
apply it exactly once and a crash mid-migration leaves the previous version.

Units: ``created_at``, ``updated_at`` and ``expires_at`` are integer
microseconds since the epoch (exact round trips of the model's datetimes);
``lease_expires_at`` is epoch seconds as REAL, like ``Lease.expires_at``.
``completed_at`` (effects) is integer microseconds too. JSON columns hold
orjson text; ``arguments``, ``result``, ``payload`` and ``blobs.data`` are opaque BLOBs.
"""

from __future__ import annotations

import sqlite3
import time

from savegame.errors import ConfigurationError
from savegame.stores.sqlite import _queues as queues

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    # 1: runs, checkpoints, leases on the run row.
    (
        """
        CREATE TABLE runs (
            run_id TEXT PRIMARY KEY,
            thread_id TEXT NOT NULL,
            workflow TEXT NOT NULL,
            workflow_ref TEXT,
            status TEXT NOT NULL,
            step INTEGER NOT NULL,
            head_checkpoint_id TEXT,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            error TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            lease_owner TEXT,
            lease_token INTEGER NOT NULL DEFAULT 0,
            lease_expires_at REAL
        )
        """,
        "CREATE INDEX runs_by_thread ON runs (thread_id, created_at)",
        "CREATE INDEX runs_by_status ON runs (status, created_at)",
        """
        CREATE TABLE checkpoints (
            checkpoint_id TEXT PRIMARY KEY,
            run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
            thread_id TEXT NOT NULL,
            parent_id TEXT,
            step INTEGER NOT NULL,
            node TEXT,
            status TEXT NOT NULL,
            next TEXT,
            usage TEXT NOT NULL,
            metadata TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            expires_at INTEGER,
            format_version INTEGER NOT NULL,
            state_version INTEGER NOT NULL,
            size INTEGER NOT NULL,
            checksum TEXT NOT NULL,
            payload BLOB NOT NULL
        )
        """,
        "CREATE INDEX checkpoints_by_run ON checkpoints (run_id, checkpoint_id)",
        "CREATE INDEX checkpoints_by_thread ON checkpoints (thread_id, checkpoint_id)",
    ),
    # 2: the effect journal and the cancel flag.
    (
        """
        CREATE TABLE effects (
            run_id TEXT NOT NULL REFERENCES runs (run_id) ON DELETE CASCADE,
            request_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            name TEXT NOT NULL,
            step INTEGER NOT NULL,
            node TEXT NOT NULL,
            call_index INTEGER NOT NULL,
            status TEXT NOT NULL,
            arguments BLOB NOT NULL,
            result BLOB,
            error TEXT,
            metadata TEXT NOT NULL,
            created_at INTEGER NOT NULL,
            completed_at INTEGER,
            checksum TEXT NOT NULL,
            PRIMARY KEY (run_id, request_id)
        )
        """,
        # list_effects(run_id): a range scan already in the listing order.
        "CREATE INDEX effects_by_run ON effects (run_id, created_at, request_id)",
        # list_effects(kinds=..., statuses=...) across runs: the pending-approvals
        # and in-doubt queries, which must not scan every journal entry ever made.
        "CREATE INDEX effects_by_kind_status ON effects (kind, status, created_at, request_id)",
        # NOT NULL with a constant default: SQLite fills existing rows without a table rewrite.
        "ALTER TABLE runs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0",
    ),
    # 3: the storage engine: delta bases, blobs and who refers to them.
    (
        "ALTER TABLE checkpoints ADD COLUMN base_id TEXT",
        # The header's digests in their order (a JSON array) for an exact round
        # trip; checkpoint_blobs is the same set, indexed, for pruning.
        "ALTER TABLE checkpoints ADD COLUMN blobs TEXT NOT NULL DEFAULT '[]'",
        # (3 also created checkpoints_by_base here; 5 drops it, see there.)
        "CREATE INDEX checkpoints_by_base ON checkpoints (base_id) WHERE base_id IS NOT NULL",
        # A rowid table: blobs are large values, which WITHOUT ROWID tables store badly.
        """
        CREATE TABLE blobs (
            digest TEXT PRIMARY KEY,
            data BLOB NOT NULL,
            size INTEGER NOT NULL
        )
        """,
        # Filled with the checkpoint row and removed with it (cascade), so
        # delete_unreferenced_blobs is one anti-join on the digest index.
        """
        CREATE TABLE checkpoint_blobs (
            checkpoint_id TEXT NOT NULL REFERENCES checkpoints (checkpoint_id) ON DELETE CASCADE,
            digest TEXT NOT NULL,
            PRIMARY KEY (checkpoint_id, digest)
        ) WITHOUT ROWID
        """,
        "CREATE INDEX checkpoint_blobs_by_digest ON checkpoint_blobs (digest)",
    ),
    # 4: a worker fleet claims the oldest runnable run; only queued and running
    # runs are in the index, so finished history never slows a claim.
    (
        "CREATE INDEX runs_claimable ON runs (created_at, run_id)"
        " WHERE status IN ('queued', 'running')",
    ),
    # 5: no query ever used checkpoints_by_base (retention walks bases from the
    # headers it already read), and every delta insert paid for it in WAL pages.
    ("DROP INDEX IF EXISTS checkpoints_by_base",),
    # 6: the run row's own check (RunInfo.checksum): its workflow reference is what
    # resume imports. A constant default: SQLite fills old rows without a rewrite.
    ("ALTER TABLE runs ADD COLUMN checksum TEXT NOT NULL DEFAULT ''",),
    # 7: list_runs pages by keyset (created_at, run_id) newest first, of all runs or of
    # one workflow: without these a page of the web UI sorted the whole table.
    (
        "CREATE INDEX runs_by_created ON runs (created_at, run_id)",
        "CREATE INDEX runs_by_workflow ON runs (workflow, created_at, run_id)",
    ),
    # 8: waiting runs (timers, events, child runs). wake_at is integer microseconds
    # (WOKEN_MICROS, 0, once its events arrived); wait_topics a JSON array like blobs.
    (
        "ALTER TABLE runs ADD COLUMN wake_at INTEGER",
        "ALTER TABLE runs ADD COLUMN wait_topics TEXT NOT NULL DEFAULT '[]'",
        "ALTER TABLE runs ADD COLUMN wait_need INTEGER NOT NULL DEFAULT 0",
        # A worker finds the woken runs soonest first without a look at any other run.
        "CREATE INDEX runs_waking ON runs (wake_at, run_id)"
        " WHERE status = 'waiting' AND wake_at IS NOT NULL",
        # The wake check: a run's pending events by topic, only those entries indexed.
        "CREATE INDEX effects_pending_events ON effects (run_id, name)"
        " WHERE kind = 'event' AND status = 'pending'",
    ),
    # 9: schedules (stores/_sql/schedules.py). next_at is the cursor, integer
    # microseconds like wake_at; input and metadata JSON text.
    (
        """
        CREATE TABLE schedules (
            name TEXT PRIMARY KEY,
            workflow TEXT NOT NULL,
            workflow_ref TEXT NOT NULL,
            cron TEXT NOT NULL,
            input TEXT NOT NULL,
            missed TEXT NOT NULL,
            catchup_window REAL NOT NULL,
            next_at INTEGER NOT NULL,
            created_at INTEGER NOT NULL,
            updated_at INTEGER NOT NULL,
            paused INTEGER NOT NULL DEFAULT 0,
            fired INTEGER NOT NULL DEFAULT 0,
            last_run_id TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            checksum TEXT NOT NULL DEFAULT ''
        )
        """,
        # A worker's tick reads the due ones only.
        "CREATE INDEX schedules_due ON schedules (next_at) WHERE NOT paused",
    ),
    # 10: queues with limits for the worker fleet (sqlite/_queues.py).
    queues.MIGRATION,
    # 11: a schedule's queue: its occurrences' runs go in it (stores/_sql/schedules.py).
    (
        "ALTER TABLE schedules ADD COLUMN queue TEXT",
        "ALTER TABLE schedules ADD COLUMN priority INTEGER NOT NULL DEFAULT 0",
    ),
    # 12: the code version a run started under, from its metadata (runtime/_versions.py),
    # for claim_run(versions=...). NULL: a run from before runs had one.
    ("ALTER TABLE runs ADD COLUMN version TEXT",),
)

#: The schema version this code writes and understands.
SCHEMA_VERSION = len(MIGRATIONS)


def current_version(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT max(version) FROM savegame_schema").fetchone()
    return int(row[0] or 0)


def _newer(path: str, found: int) -> ConfigurationError:
    return ConfigurationError(
        f"{path} has savegame schema version {found}, newer than this savegame "
        f"understands ({SCHEMA_VERSION}); upgrade savegame"
    )


def enable_wal(conn: sqlite3.Connection, timeout: float) -> None:
    """Put the file in WAL mode, retrying while other processes do the same.

    Switching a new file to WAL needs an exclusive lock, and SQLite answers
    "database is locked" at once rather than through the busy handler when
    several processes open a brand-new file together.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.005)


def migrate(conn: sqlite3.Connection, path: str) -> int:
    """Bring the database at ``path`` to :data:`SCHEMA_VERSION`; return the version found.

    Raises:
        ConfigurationError: the file was written by a newer savegame.
    """
    # Up to date (every open but the first of each version): a plain read, no write
    # lock, so opening a store never waits behind another process's write.
    try:
        found = current_version(conn)
    except sqlite3.OperationalError:
        found = 0  # no schema table yet
    if found == SCHEMA_VERSION:
        return found
    if found > SCHEMA_VERSION:
        raise _newer(path, found)
    # IMMEDIATE takes the write lock before reading the version again, so a second
    # process waits here and then sees the migrations already applied.
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS savegame_schema ("
            " version INTEGER PRIMARY KEY, applied_at REAL NOT NULL)"
        )
        found = current_version(conn)
        if found > SCHEMA_VERSION:
            raise _newer(path, found)
        for version in range(found + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[version - 1]:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO savegame_schema (version, applied_at) VALUES (?, ?)",
                (version, time.time()),
            )
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return found
