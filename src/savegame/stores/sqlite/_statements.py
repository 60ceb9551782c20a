"""The SQL of the SQLite store: the shared statements in SQLite's dialect, and its own.

Lists of ids travel as one JSON array parameter (``json_each``), so a call is
one statement however many ids it names and never meets SQLite's limit on
bound parameters.
"""

from __future__ import annotations

from savegame.stores import _common
from savegame.stores._sql.statements import SqliteDialect, Statements

SQL = Statements(SqliteDialect())

# The oldest runnable run: queued or running, with no owner or an expired lease
# (expired exactly when acquire_lease would take it over), optionally of some
# workflows (?2: a JSON array, or NULL for any) and code versions (?4, the same; ?3
# is CLAIM_WOKEN's clock, unused here). The status test repeats the
# partial index's WHERE word for word, so runs_claimable applies; INDEXED BY
# because without table statistics SQLite prefers runs_by_status and sorts
# every queued and running run, where the partial index walks them oldest
# first and stops at the first runnable one.
CLAIM = f"""
    SELECT run_id, lease_token FROM runs INDEXED BY runs_claimable
    WHERE status IN ({", ".join(f"'{s}'" for s in _common.CLAIMABLE)})
      AND (lease_owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at <= ?1)
      AND (?2 IS NULL OR workflow IN (SELECT value FROM json_each(?2)))
      AND (?4 IS NULL OR version IN (SELECT value FROM json_each(?4)))
    ORDER BY created_at, run_id LIMIT 1
"""

# The soonest woken waiting run (wake_at at or before ?3, this process's clock in
# microseconds) with no live lease, optionally of some workflows: runs_waking holds only
# waiting runs with a wake time, so a claim never reads a run that sleeps for a week.
CLAIM_WOKEN = """
    SELECT run_id, lease_token FROM runs INDEXED BY runs_waking
    WHERE status = 'waiting' AND wake_at IS NOT NULL AND wake_at <= ?3
      AND (lease_owner IS NULL OR lease_expires_at IS NULL OR lease_expires_at <= ?1)
      AND (?2 IS NULL OR workflow IN (SELECT value FROM json_each(?2)))
      AND (?4 IS NULL OR version IN (SELECT value FROM json_each(?4)))
    ORDER BY wake_at, run_id LIMIT 1
"""

# put_checkpoint's usual step keeps the lease and the status and finds no cancel
# request: one UPDATE fences, moves the head and tells the put the flag is clear (a
# row moved), and leaving status out of SET spares the two status indexes a rewrite
# (fewer pages to fsync). No row: the long way (SQL.move_head after a fence, then
# CANCEL_FLAG). UPDATE ... RETURNING cancel_requested (SQLite 3.35) was measured
# instead and cost more than the SELECT it spared: SQLite builds an ephemeral table
# for the returned row, and a step took 22k instructions more (callgrind, 400 steps).
# This way a step's put takes 13k fewer (-5 % of the put).
MOVE_HEAD_KEEPING_STATUS = (
    "UPDATE runs SET head_checkpoint_id = ?1, step = ?2, error = ?3, updated_at = ?4"
    " WHERE run_id = ?5 AND (?6 IS NULL OR lease_token = ?6) AND status = ?7"
    " AND cancel_requested = 0"
)

# The flag read when the put took the long way (not UPDATE ... RETURNING: see above).
CANCEL_FLAG = "SELECT cancel_requested FROM runs WHERE run_id = ?"

# A journal entry written if its request id is new, in one statement: the usual case
# (every LangGraph task write, every tool call's intent). A taken id writes nothing
# and the caller reads what is there (``_common.keeps`` decides whether it stays). Not
# ON CONFLICT DO NOTHING, which needs SQLite 3.24. Reading first, as the journal did,
# was one SELECT more an entry: 17 of the 104 statements of a 10-checkpoint LangGraph run.
INSERT_EFFECT_IF_ABSENT = SQL.replace_effect.replace("INSERT OR REPLACE", "INSERT OR IGNORE", 1)

COUNT_UNREFERENCED = (
    f"SELECT count(*), coalesce(sum(size), 0) FROM blobs WHERE {SQL.unreferenced_blob}"
)
DELETE_UNREFERENCED = f"DELETE FROM blobs WHERE {SQL.unreferenced_blob}"


def type_test(value: _common.Scalar) -> str:
    """The json_each condition for one metadata filter value; see MemoryStore for the same rules."""
    if value is None:
        return "type = 'null'"
    if isinstance(value, bool):
        return "type = 'true'" if value else "type = 'false'"
    if isinstance(value, (int, float)):
        return "type IN ('integer', 'real') AND value = ?"
    return "type = 'text' AND value = ?"
