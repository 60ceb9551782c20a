"""Batches of puts planned by hypothesis, for the differential tests of a store's
``put_checkpoints`` against one ``put_checkpoint`` at a time (Redis, SQLite).

A plan names a kind of put and one of three runs; :func:`build_puts` turns plans into
the batch, each run's puts following on from its last one. Kinds: ``ok``, ``second``
(two steps of one run back to back), ``journal`` (with an entry), ``blob`` (naming and
bringing a blob), and the refused ones: ``stale`` (a fenced token), ``no_run``,
``bad_args`` (an entry of another run), ``dup`` (the head's own id again),
``missing_blob`` (naming a blob neither stored nor brought).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from savegame.model import CheckpointRecord
from savegame.stores.base import BatchStore, Put, PutResult
from savegame.testing.builders import (
    OTHER_OWNER,
    OWNER,
    blob_digest,
    make_effect,
    make_run,
    next_record,
)


@dataclass
class Plan:
    kind: str
    run: int


def start_runs(
    stores: Sequence[BatchStore], run_ids: list[str], *, cancelled: str | None = None
) -> tuple[list[CheckpointRecord], list[int]]:
    """Each run created on every store and taken over there (so a ``stale`` put carries
    a fenced token), ``cancelled`` asked to cancel; their first records and tokens."""
    heads: list[CheckpointRecord] = []
    tokens: list[int] = []
    for rid in run_ids:
        run, first = make_run(run_id=rid)
        taken = set()
        for store in stores:
            lease = store.create_run(run, first, owner=OWNER, ttl=60.0)
            took = store.acquire_lease(rid, OTHER_OWNER, 60.0, takeover_token=lease.token)
            taken.add(took.token)
            if rid == cancelled:
                store.request_cancel(rid)  # that run's puts take the long way
        assert len(taken) == 1
        heads.append(first)
        tokens.append(taken.pop())
    return heads, tokens


def build_puts(
    plans: list[Plan], run_ids: list[str], heads: list[CheckpointRecord], tokens: list[int]
) -> list[Put]:
    puts: list[Put] = []
    last: dict[int, CheckpointRecord] = {}
    for n, plan in enumerate(plans):
        i = plan.run
        prev = last.get(i, heads[i])
        if plan.kind in ("ok", "journal", "blob"):
            data = f"blob {n}".encode()
            rec = next_record(prev, blobs=[blob_digest(data)] if plan.kind == "blob" else ())
            puts.append(
                Put(
                    rec, tokens[i],
                    effects=[make_effect(run_ids[i])] if plan.kind == "journal" else (),
                    blobs={blob_digest(data): data} if plan.kind == "blob" else None,
                )
            )  # fmt: skip
            last[i] = rec
        elif plan.kind == "second":
            a = next_record(prev)
            b = next_record(a)
            puts += [Put(a, tokens[i]), Put(b, tokens[i])]
            last[i] = b
        elif plan.kind == "stale":
            puts.append(Put(next_record(prev), tokens[i] - 1))
        elif plan.kind == "no_run":
            _, ghost = make_run()
            puts.append(Put(ghost, 1))
        elif plan.kind == "bad_args":
            other = run_ids[(i + 1) % len(run_ids)]
            puts.append(Put(next_record(prev), tokens[i], effects=[make_effect(other)]))
        elif plan.kind == "missing_blob":
            gone = next_record(prev, blobs=[blob_digest(f"never stored {n}".encode())])
            puts.append(Put(gone, tokens[i]))
        else:
            assert plan.kind == "dup", plan.kind
            puts.append(Put(next_record(prev, checkpoint_id=prev.checkpoint_id), tokens[i]))
    return puts


def one_at_a_time(store: BatchStore, puts: list[Put]) -> list[PutResult | Exception]:
    """What ``put_checkpoint`` says of each put, in order: the batch's reference."""
    done: list[PutResult | Exception] = []
    for put in puts:
        try:
            done.append(
                store.put_checkpoint(
                    put.record, lease_token=put.lease_token, effects=put.effects,
                    blobs=put.blobs,
                )
            )  # fmt: skip
        except Exception as exc:
            done.append(exc)
    return done
