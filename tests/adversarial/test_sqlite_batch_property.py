"""Attacks on SqliteStore.put_checkpoints: the batch written without a savepoint a put.

The batch's statements go in one transaction with no savepoint each; a refusal anywhere
rolls the whole transaction back and the batch is written again put by put under
savepoints. A bug there writes a put twice (once optimistically, once again), keeps half
of the refused put, or loses a put that was fine. So: a differential property against
one put at a time (every outcome, every run's head, its checkpoints, its journal and the
blobs stored must match), refusals of every kind anywhere in the batch.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from savegame.ids import new_id
from savegame.stores.base import PutResult
from savegame.stores.sqlite import SqliteStore
from tests.adversarial.batch_plans import Plan, build_puts, one_at_a_time, start_runs

_KINDS = (
    "ok", "ok", "second", "journal", "blob", "stale", "no_run", "bad_args", "dup",
    "missing_blob",
)  # fmt: skip


def _outcome(x: PutResult | Exception) -> str:
    return f"written {x.cancel_requested}" if isinstance(x, PutResult) else type(x).__name__


def _state(store: SqliteStore, run_ids: list[str]) -> object:
    runs = []
    for rid in run_ids:
        info = store.get_run(rid)
        runs.append(
            (
                info.head_checkpoint_id, info.step, info.status,
                [h.checkpoint_id for h in store.list_checkpoints(rid)],
                [(e.request_id, e.status) for e in store.list_effects(rid)],
            )
        )  # fmt: skip
    blobs = store._conn.execute("SELECT digest FROM blobs ORDER BY digest").fetchall()
    refs = store._conn.execute(
        "SELECT checkpoint_id, digest FROM checkpoint_blobs ORDER BY 1, 2"
    ).fetchall()
    return runs, blobs, refs


@settings(max_examples=40, deadline=None)
@given(
    plans=st.lists(
        st.builds(Plan, st.sampled_from(_KINDS), st.integers(0, 2)), min_size=1, max_size=12
    ),
    cancel=st.integers(-1, 2),
)
def test_a_batch_decides_each_put_as_one_put_at_a_time(plans: list[Plan], cancel: int) -> None:
    run_ids = [new_id() for _ in range(3)]
    with tempfile.TemporaryDirectory() as tmp:
        batched, alone = SqliteStore(Path(tmp) / "b.db"), SqliteStore(Path(tmp) / "a.db")
        try:
            heads, tokens = start_runs(
                [batched, alone], run_ids, cancelled=run_ids[cancel] if cancel >= 0 else None
            )
            puts = build_puts(plans, run_ids, heads, tokens)
            got = [_outcome(x) for x in batched.put_checkpoints(puts)]
            assert got == [_outcome(x) for x in one_at_a_time(alone, puts)]
            assert _state(batched, run_ids) == _state(alone, run_ids)
            assert not batched._conn.in_transaction
        finally:
            batched.close()
            alone.close()
