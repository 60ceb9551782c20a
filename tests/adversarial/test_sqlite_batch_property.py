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
from dataclasses import dataclass
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from savegame.ids import new_id
from savegame.model import CheckpointRecord
from savegame.stores.base import Put, PutResult
from savegame.stores.sqlite import SqliteStore
from savegame.testing.builders import (
    OTHER_OWNER,
    OWNER,
    blob_digest,
    make_effect,
    make_run,
    next_record,
)

_KINDS = (
    "ok", "ok", "second", "journal", "blob", "stale", "no_run", "bad_args", "dup",
    "missing_blob",
)  # fmt: skip


@dataclass
class _Plan:
    kind: str
    run: int


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
        st.builds(_Plan, st.sampled_from(_KINDS), st.integers(0, 2)), min_size=1, max_size=12
    ),
    cancel=st.integers(-1, 2),
)
def test_a_batch_decides_each_put_as_one_put_at_a_time(plans: list[_Plan], cancel: int) -> None:
    run_ids = [new_id() for _ in range(3)]
    with tempfile.TemporaryDirectory() as tmp:
        batched, alone = SqliteStore(Path(tmp) / "b.db"), SqliteStore(Path(tmp) / "a.db")
        try:
            heads: list[CheckpointRecord] = []
            tokens: list[int] = []
            for rid in run_ids:
                run, first = make_run(run_id=rid)
                taken = set()
                for store in (batched, alone):
                    lease = store.create_run(run, first, owner=OWNER, ttl=60.0)
                    # Taken over on both, so a "stale" put carries a fenced token.
                    took = store.acquire_lease(rid, OTHER_OWNER, 60.0, takeover_token=lease.token)
                    taken.add(took.token)
                    if cancel >= 0 and rid == run_ids[cancel]:
                        store.request_cancel(rid)  # that run's puts take the long way
                heads.append(first)
                tokens.append(taken.pop())
            puts: list[Put] = []
            last: dict[int, CheckpointRecord] = {}
            for n, plan in enumerate(plans):
                i = plan.run
                prev = last.get(i, heads[i])
                if plan.kind in ("ok", "journal", "blob"):
                    data = f"blob {n}".encode()
                    rec = next_record(
                        prev, blobs=[blob_digest(data)] if plan.kind == "blob" else ()
                    )
                    puts.append(
                        Put(
                            rec, tokens[i],
                            effects=[make_effect(run_ids[i])] if plan.kind == "journal" else (),
                            blobs={blob_digest(data): data} if plan.kind == "blob" else None,
                        )
                    )  # fmt: skip
                    last[i] = rec
                elif plan.kind == "second":  # two steps of one run back to back
                    a = next_record(prev)
                    b = next_record(a)
                    puts += [Put(a, tokens[i]), Put(b, tokens[i])]
                    last[i] = b
                elif plan.kind == "stale":
                    puts.append(Put(next_record(prev), tokens[i] - 1))
                elif plan.kind == "no_run":
                    _, ghost = make_run()
                    puts.append(Put(ghost, 1))
                elif plan.kind == "bad_args":  # a journal entry of another run
                    other = run_ids[(i + 1) % 3]
                    puts.append(Put(next_record(prev), tokens[i], effects=[make_effect(other)]))
                elif plan.kind == "missing_blob":
                    gone = next_record(prev, blobs=[blob_digest(f"never stored {n}".encode())])
                    puts.append(Put(gone, tokens[i]))
                else:  # "dup": the head's own id again
                    puts.append(Put(next_record(prev, checkpoint_id=prev.checkpoint_id), tokens[i]))
            got = [_outcome(x) for x in batched.put_checkpoints(puts)]
            want: list[str] = []
            for put in puts:
                try:
                    done = alone.put_checkpoint(
                        put.record, lease_token=put.lease_token, effects=put.effects,
                        blobs=put.blobs,
                    )  # fmt: skip
                    want.append(_outcome(done))
                except Exception as exc:
                    want.append(type(exc).__name__)
            assert got == want
            assert _state(batched, run_ids) == _state(alone, run_ids)
            assert not batched._conn.in_transaction
        finally:
            batched.close()
            alone.close()
