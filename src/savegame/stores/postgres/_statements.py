"""The SQL of the PostgreSQL store: the shared statements in PostgreSQL's dialect, and its own.

JSON columns arrive already parsed (the store registers orjson as the
connection's JSON loader); ``bytea`` arrives as ``bytes``. Lists of ids travel
as one array parameter, so a call is one statement however many ids it names.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from savegame.model import EffectStatus
from savegame.stores import _common
from savegame.stores._sql.rows import EFFECT_COLS, RECORD_COLS
from savegame.stores._sql.statements import EFFECT_FIELDS, PG_NOW, PostgresDialect, Statements

SQL = Statements(PostgresDialect())

#: Epoch seconds on the server's clock: every process judges lease expiry by one clock.
NOW = PG_NOW

# Unowned (owner None): NULL + ttl leaves no expiry, so the run is claimable at once.
INSERT_RUN = f"{SQL.insert_run} ON CONFLICT (run_id) DO NOTHING RETURNING lease_expires_at, {NOW}"

# A thread's lock for create_run(sole=True): the two-key form, a key space apart from the
# one-key lock of the schema's migrations.
LOCK_THREAD = "SELECT pg_advisory_xact_lock(hashtext(%s), hashtext(%s))"

INSERT_CHECKPOINT = f"{SQL.insert_checkpoint} ON CONFLICT (checkpoint_id) DO NOTHING"

INSERT_CHECKPOINTS = f"""
    INSERT INTO checkpoints ({RECORD_COLS})
    SELECT thread_id, run_id, checkpoint_id, parent_id, step, node, status, next, usage::json,
        metadata::json, created_at, expires_at, format_version, state_version, size, base_id,
        '{{}}', checksum, payload
    FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[], %b::bigint[], %b::text[],
                %b::text[], %b::text[], %b::text[], %b::text[], %b::bigint[], %b::bigint[],
                %b::int[], %b::int[], %b::bigint[], %b::text[], %b::text[], %b::bytea[])
        AS v(thread_id, run_id, checkpoint_id, parent_id, step, node, status, next, usage,
             metadata, created_at, expires_at, format_version, state_version, size, base_id,
             checksum, payload)
    ON CONFLICT (checkpoint_id) DO NOTHING
"""

# The fenced UPDATE takes the row lock the fence would and checks the token in the
# same round trip; only a miss asks why (SQL.fence) and moves the head unfenced.
MOVE_HEAD_FENCED = (
    f"{SQL.move_head} AND (%s::bigint IS NULL OR lease_token = %s) RETURNING cancel_requested"
)
MOVE_HEAD = f"{SQL.move_head} RETURNING cancel_requested"

# A lone plain put without a journal (a run's usual step, group commit's batch of one):
# MOVE_HEAD_FENCED and INSERT_CHECKPOINT as one statement, one round trip in autocommit
# where BEGIN, the two and COMMIT take four. Guarded as WRITE_PLAIN is (below): it fails,
# writing nothing, unless the fence held and the id was free, and the store then writes
# the put the one-statement-at-a-time way, which says why. Scalars, not WRITE_PLAIN's
# arrays: a one-element array costs the client more to send than a round trip. The
# parameters: MOVE_HEAD_FENCED's, then INSERT_CHECKPOINT's.
WRITE_ONE = f"""
    WITH moved AS ({MOVE_HEAD_FENCED}), inserted AS ({INSERT_CHECKPOINT} RETURNING 1)
    SELECT 1 / ((SELECT count(*) FROM moved) = 1 AND (SELECT count(*) FROM inserted) = 1)::int,
        coalesce((SELECT cancel_requested FROM moved), false)
"""

# Group commit's plain puts (no blobs, no waiting, a run once), however many, in two
# statements: the fenced head moves, then the inserts. A column per parameter, in the
# order of a put's MOVE_HEAD_FENCED (but wait_topics, empty; the token once) and of
# RECORD_COLS (but blobs, empty); RETURNING names the rows written, so the store sees
# which fence held or id was free (it rolls back on any miss). The run ids come twice:
# ANY() keeps the plan on the primary key however many rows the planner expects unnest
# to give. %b: the arrays travel in binary (in text, psycopg quotes each element through
# a regular expression: the payloads' hex, the JSON's quotes; 3 ms a batch of 20 here).
MOVE_HEADS = """
    UPDATE runs SET head_checkpoint_id = v.checkpoint_id, status = v.status, step = v.step,
        error = v.error, updated_at = v.updated_at, wake_at = v.wake_at, wait_topics = '{}',
        wait_need = v.wait_need
    FROM unnest(%b::text[], %b::text[], %b::bigint[], %b::text[], %b::bigint[], %b::bigint[],
                %b::int[], %b::text[], %b::bigint[])
        AS v(checkpoint_id, status, step, error, updated_at, wake_at, wait_need, run_id, token)
    WHERE runs.run_id = ANY(%b::text[]) AND runs.run_id = v.run_id
      AND (v.token IS NULL OR runs.lease_token = v.token)
    RETURNING runs.run_id, runs.cancel_requested
"""

# The oldest runnable run, locked: queued or running, with no owner or an expired
# lease (expired exactly when acquire_lease would take it over, by the server's
# clock), optionally of some workflows and code versions (NULL: any). The status test
# repeats the
# partial index's predicate word for word so the planner can use runs_claimable;
# FOR UPDATE re-checks a row changed since the snapshot, and SKIP LOCKED passes
# over rows other claimers hold, so LIMIT 1 yields the next free one.
CLAIM = f"""
    SELECT run_id, lease_token, queue FROM runs
    WHERE status IN ({", ".join(f"'{s}'" for s in _common.CLAIMABLE)})
      AND (lease_owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at <= {NOW})
      AND (%(workflows)s::text[] IS NULL OR workflow = ANY(%(workflows)s::text[]))
      AND (%(versions)s::text[] IS NULL OR version = ANY(%(versions)s::text[]))
    ORDER BY created_at, run_id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
"""

# The soonest woken waiting run, locked, as CLAIM takes a runnable one: wake_at at or
# before the claimer's clock (microseconds: the clock the due times were computed on),
# the partial index runs_waking's predicate repeated word for word.
CLAIM_WOKEN = f"""
    SELECT run_id, lease_token, queue FROM runs
    WHERE status = 'waiting' AND wake_at IS NOT NULL AND wake_at <= %(now)s::bigint
      AND (lease_owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at <= {NOW})
      AND (%(workflows)s::text[] IS NULL OR workflow = ANY(%(workflows)s::text[]))
      AND (%(versions)s::text[] IS NULL OR version = ANY(%(versions)s::text[]))
    ORDER BY wake_at, run_id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
"""

TAKE_LEASE = f"{SQL.take_lease} RETURNING lease_expires_at"
RENEW_LEASE = f"{SQL.renew_lease} RETURNING lease_owner, lease_expires_at"

# Insert-if-absent in one statement; the WHERE is _common.keeps in SQL: only a
# NOT_DONE entry is replaced. RETURNING yields nothing when the old entry stays.
UPSERT_EFFECT = (
    f"{SQL.replace_effect} WHERE effects.status = '{EffectStatus.NOT_DONE.value}'"
    f" RETURNING {EFFECT_COLS}"
)

# The plain puts' journal entries in one statement, UPSERT_EFFECT's rule (only a
# NOT_DONE entry is replaced); a request id twice in it fails the statement (ON CONFLICT
# cannot change a row twice), and the store then writes the batch one put at a time.
_INSERT_EFFECTS = f"""
    INSERT INTO effects ({EFFECT_COLS})
    SELECT run_id, request_id, kind, name, step, node, call_index, status, arguments, result,
        error, metadata::json, created_at, completed_at, checksum
    FROM unnest(%b::text[], %b::text[], %b::text[], %b::text[], %b::bigint[], %b::text[],
                %b::bigint[], %b::text[], %b::bytea[], %b::bytea[], %b::text[], %b::text[],
                %b::bigint[], %b::bigint[], %b::text[])
        AS v({EFFECT_COLS})
"""
UPSERT_EFFECTS = (
    SQL.dialect.replacing(_INSERT_EFFECTS, "run_id, request_id", EFFECT_FIELDS)
    + f" WHERE effects.status = '{EffectStatus.NOT_DONE.value}'"
)


def _write_plain(journal: bool, guarded: bool) -> str:
    # MOVE_HEADS, INSERT_CHECKPOINTS (and UPSERT_EFFECTS) as one statement: the plain
    # puts' whole write, one round trip. Data-modifying CTEs all run to completion; the
    # first column then says whether every fence held and every id was free. Guarded,
    # it is 1 / that: the statement fails (and so its transaction, nothing of it
    # written) unless all were, SQL's way to raise without a function (a one-row
    # SELECT, so it is always evaluated; the counts are subqueries, never folded at plan
    # time). The parameters: MOVE_HEADS', INSERT_CHECKPOINTS', UPSERT_EFFECTS' (with a
    # journal), then the number of puts twice.
    journaled = f", journaled AS ({UPSERT_EFFECTS})" if journal else ""
    ok = (
        "(SELECT count(*) FROM moved) = %s::bigint AND (SELECT count(*) FROM inserted) = %s::bigint"
    )
    return f"""
    WITH moved AS ({MOVE_HEADS}), inserted AS ({INSERT_CHECKPOINTS} RETURNING 1){journaled}
    SELECT {f"1 / ({ok})::int" if guarded else ok}, ARRAY(SELECT run_id FROM moved WHERE cancel_requested)
    """


WRITE_PLAIN = {(j, g): _write_plain(j, g) for j in (False, True) for g in (False, True)}
"""By (with a journal, guarded): one row, whether all were written (guarded: 1, or the
statement failed) and the ids of the runs whose cancel was requested. A batch of only
plain puts runs the guarded one in autocommit; beside other puts, in a pipeline, the
store reads the first column (a failed statement there would abort the pipeline)."""

# Counted as they go, in one statement (see delete_unreferenced_blobs for the lock).
DELETE_UNREFERENCED = (
    f"WITH gone AS (DELETE FROM blobs WHERE {SQL.unreferenced_blob} RETURNING size)"
    " SELECT count(*), coalesce(sum(size), 0) FROM gone"
)


def metadata_filter(wanted: Mapping[str, _common.Scalar]) -> tuple[str, list[Any]] | None:
    """A WHERE condition (on alias ``c``) that narrows a history to a metadata filter.

    A prefilter, not the rule: the caller keeps only rows that pass
    :func:`_common.matches`, so every backend agrees on JSON types (``True``
    never matches ``1``, ``None`` matches a present null). A row whose JSON
    holds ``\\u0000`` passes unchecked, because PostgreSQL's JSON operators
    refuse to de-escape it; CASE fixes the evaluation order, so neither that
    row nor a value of another JSON type ever reaches an operator or cast.

    Returns:
        The condition and its parameters ("true" for no filter), or None when
        no row can match.
    """
    where: list[str] = []
    params: list[Any] = []
    for key, value in wanted.items():
        kind = "json_typeof(c.metadata -> %s::text)"
        if value is None:
            where.append(f"{kind} = 'null'")
            params.append(key)
        elif isinstance(value, bool):
            where.append(f"{kind} = 'boolean' AND (c.metadata ->> %s::text) = %s::text")
            params.extend((key, key, "true" if value else "false"))
        elif isinstance(value, (int, float)):
            if isinstance(value, float) and not math.isfinite(value):
                return None  # stored JSON holds no NaN or infinity
            # numeric compares integers exactly; float8 reads the stored shortest repr exactly.
            cast = "numeric" if isinstance(value, int) else "float8"
            where.append(
                f"CASE WHEN {kind} = 'number'"
                f" THEN (c.metadata ->> %s::text)::{cast} = %s::{cast} ELSE false END"
            )
            params.extend((key, key, value))
        else:
            where.append(f"{kind} = 'string' AND (c.metadata ->> %s::text) = %s::text")
            params.extend((key, key, value))
    if not where:
        return "true", []
    guard = r"strpos(c.metadata::text, '\u0000') > 0"
    return f"CASE WHEN {guard} THEN true ELSE ({' AND '.join(where)}) END", params
