"""The store contract for the storage engine: delta chains, blobs, pruning, rewrite, sizes.

Part of :class:`savegame.testing.contract.StoreContract`; subclass that, not this.
Stores never decode a payload, so these tests label headers with ``base_id``
and ``blobs`` freely; what they pin is what retention and re-encryption rely
on: a chain read stops at a keyframe or fails loudly, a blob's bytes never
change behind a checkpoint, and deleting removes exactly what was named.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from savegame.errors import ConflictError, CorruptRecordError, LeaseLostError, NotFoundError
from savegame.ids import new_id
from savegame.model import CheckpointRecord, EffectStatus, RunStatus
from savegame.stores.base import RunSize, Store
from savegame.testing._contract_base import TTL, ContractBase
from savegame.testing.builders import (
    OTHER_OWNER,
    OWNER,
    blob_digest,
    make_effect,
    make_record,
    make_run,
    next_record,
)

__all__ = ["EngineContract"]

BIG = b"\x00big blob \xff" * 20
SMALL = b"small \x00"
EMPTY = b""
X, Y, S = blob_digest(BIG), blob_digest(SMALL), blob_digest(b"shared")
Z = blob_digest(b"new Z")


class EngineContract(ContractBase):
    """get_chain, blobs, delete_checkpoints/runs, unreferenced blobs, rewrite, run_sizes, stats."""

    def _put(
        self,
        store: Store,
        previous: CheckpointRecord,
        token: int,
        *,
        base_id: str | None = None,
        checkpoint_id: str | None = None,
    ) -> CheckpointRecord:
        """Write the checkpoint after ``previous`` (no blobs) and return it."""
        record = next_record(previous, base_id=base_id, checkpoint_id=checkpoint_id)
        store.put_checkpoint(record, lease_token=token)
        return record

    # -- header ---------------------------------------------------------------------
    def test_base_id_and_blobs_round_trip_exactly(self, store: Store) -> None:
        run, first, lease = self.start(store)
        # Not sorted, with a repeat: the header's tuple comes back as written.
        digests = (Y, X, "sha256:\u00e9", Y)
        record = next_record(first, base_id=first.checkpoint_id, blobs=digests)
        given = {X: BIG, Y: SMALL, "sha256:\u00e9": EMPTY}
        store.put_checkpoint(record, lease_token=lease.token, blobs=given)
        got = store.get_checkpoint(record.checkpoint_id)
        assert got == record
        assert (got.header.base_id, got.header.blobs) == (first.checkpoint_id, digests)
        assert type(got.header.blobs) is tuple
        assert store.latest_checkpoint(run.run_id) == record
        assert store.thread_head(run.thread_id) == record
        assert store.list_checkpoints(run.run_id) == [record.header, first.header]
        assert store.get_chain(record.checkpoint_id) == [record, first]
        assert (first.header.base_id, store.get_checkpoint(first.checkpoint_id).header.blobs) == (
            None,
            (),
        )

    # -- get_chain --------------------------------------------------------------------
    def test_get_chain_follows_bases_down_to_a_keyframe(self, store: Store) -> None:
        run, first, lease = self.start(store)
        d1 = self._put(store, first, lease.token, base_id=first.checkpoint_id)
        d2 = self._put(store, d1, lease.token, base_id=d1.checkpoint_id)
        key = self._put(store, d2, lease.token)  # a keyframe: the chain stops here
        d3 = self._put(store, key, lease.token, base_id=key.checkpoint_id)
        assert store.get_chain(d2.checkpoint_id) == [d2, d1, first]
        assert store.get_chain(d3.checkpoint_id) == [d3, key]
        assert store.get_chain(key.checkpoint_id) == [key]
        assert store.get_chain(first.checkpoint_id) == [first]
        # A fork's first checkpoint may be a delta against its parent run's checkpoint.
        fork, fork_first = make_run(run.thread_id)
        fork_first = replace(
            fork_first, header=replace(fork_first.header, base_id=d3.checkpoint_id)
        )
        store.create_run(fork, fork_first, owner=OWNER, ttl=TTL)
        assert store.get_chain(fork_first.checkpoint_id) == [fork_first, d3, key]

    def test_get_chain_raises_not_found_for_a_missing_record_or_base(self, store: Store) -> None:
        _, first, lease = self.start(store)
        with pytest.raises(NotFoundError) as info:
            store.get_chain("no-such-checkpoint")
        assert info.value.ident == "no-such-checkpoint"
        orphan = self._put(store, first, lease.token, base_id="gone-base")
        with pytest.raises(NotFoundError) as info:
            store.get_chain(orphan.checkpoint_id)
        assert info.value.ident == "gone-base"
        d1 = self._put(store, orphan, lease.token, base_id=first.checkpoint_id)
        d2 = self._put(store, d1, lease.token, base_id=d1.checkpoint_id)
        assert store.delete_checkpoints([d1.checkpoint_id]) == 1
        with pytest.raises(NotFoundError) as info:
            store.get_chain(d2.checkpoint_id)
        assert info.value.ident == d1.checkpoint_id

    def test_get_chain_refuses_a_cycle(self, store: Store) -> None:
        _, first, lease = self.start(store)
        a_id, b_id = new_id(), new_id()
        a = self._put(store, first, lease.token, checkpoint_id=a_id, base_id=b_id)
        self._put(store, a, lease.token, checkpoint_id=b_id, base_id=a_id)
        with pytest.raises(CorruptRecordError):
            store.get_chain(a_id)

    # -- blobs ------------------------------------------------------------------------
    def test_blobs_written_with_a_checkpoint_are_readable(self, store: Store) -> None:
        _, first, lease = self.start(store)
        e = blob_digest(EMPTY)
        record = next_record(first, blobs=(X, Y, e))
        store.put_checkpoint(record, lease_token=lease.token, blobs={X: BIG, Y: SMALL, e: EMPTY})
        assert store.get_blobs([X, Y, e, "missing", X]) == {X: BIG, Y: SMALL, e: EMPTY}
        assert store.get_blobs([]) == {}
        assert store.missing_blobs([X, "missing", e, "other"]) == {"missing", "other"}
        assert store.missing_blobs([]) == set()

    def test_a_stored_blob_keeps_its_first_bytes(self, store: Store) -> None:
        _, first, lease = self.start(store)
        second = next_record(first, blobs=(X,))
        store.put_checkpoint(second, lease_token=lease.token, blobs={X: BIG})
        third = next_record(second, blobs=(X,))
        store.put_checkpoint(third, lease_token=lease.token, blobs={X: b"impostor"})
        assert store.get_blobs([X]) == {X: BIG}
        stats = store.stats()
        assert (stats.blobs, stats.blob_bytes) == (1, len(BIG))

    def test_a_failed_checkpoint_write_stores_no_blobs(self, store: Store) -> None:
        run, first, old = self.start(store, ttl=0.0)
        new = store.acquire_lease(run.run_id, OTHER_OWNER, TTL)
        with pytest.raises(LeaseLostError):
            store.put_checkpoint(
                next_record(first, blobs=(X,)), lease_token=old.token, blobs={X: BIG}
            )
        second = next_record(first)
        store.put_checkpoint(second, lease_token=new.token)
        with pytest.raises(ConflictError):
            store.put_checkpoint(second, lease_token=new.token, blobs={Y: SMALL})
        other, _, _ = self.start(store)
        with pytest.raises(ValueError):
            store.put_checkpoint(
                next_record(second, blobs=(S,)),
                lease_token=new.token,
                effects=[make_effect(other.run_id)],
                blobs={S: b"shared"},
            )
        assert store.missing_blobs([X, Y, S]) == {X, Y, S}
        assert store.get_blobs([X, Y, S]) == {}
        assert (store.stats().blobs, store.stats().blob_bytes) == (0, 0)

    # -- deletes ----------------------------------------------------------------------
    def test_delete_checkpoints_removes_exactly_those_named(self, store: Store) -> None:
        run, first, lease = self.start(store)
        c1 = next_record(first, blobs=(X,))
        store.put_checkpoint(c1, lease_token=lease.token, blobs={X: BIG})
        c2 = self._put(store, c1, lease.token)
        c3 = self._put(store, c2, lease.token)
        other, other_first, _ = self.start(store)
        ids = [c1.checkpoint_id, c2.checkpoint_id, "no-such-checkpoint", c1.checkpoint_id]
        assert store.delete_checkpoints(ids) == 2
        assert store.delete_checkpoints([]) == 0
        for gone in (c1, c2):
            with pytest.raises(NotFoundError):
                store.get_checkpoint(gone.checkpoint_id)
        assert store.list_checkpoints(run.run_id) == [c3.header, first.header]
        assert store.latest_checkpoint(run.run_id) == c3
        assert store.get_run(run.run_id).head_checkpoint_id == c3.checkpoint_id
        assert store.latest_checkpoint(other.run_id) == other_first
        assert store.stats().checkpoints == 3
        # The blob stays until asked for, then goes with its last reference.
        assert store.get_blobs([X]) == {X: BIG}
        assert store.delete_unreferenced_blobs() == (1, len(BIG))
        assert store.missing_blobs([X]) == {X}

    def test_delete_unreferenced_blobs_frees_only_what_nothing_refers_to(
        self, store: Store
    ) -> None:
        _, first_a, lease_a = self.start(store)
        run_b, first_b, lease_b = self.start(store)
        a1 = next_record(first_a, blobs=(S, X))
        store.put_checkpoint(a1, lease_token=lease_a.token, blobs={S: b"shared", X: BIG})
        a2 = next_record(a1, blobs=(S,))
        store.put_checkpoint(a2, lease_token=lease_a.token)  # S is stored already
        b1 = next_record(first_b, blobs=(Y,))
        # An extra blob no header names is stored too, and is free to go.
        orphan = blob_digest(b"orphan")
        store.put_checkpoint(b1, lease_token=lease_b.token, blobs={Y: SMALL, orphan: b"orphan"})
        assert store.delete_unreferenced_blobs() == (1, len(b"orphan"))
        assert store.delete_checkpoints([a1.checkpoint_id]) == 1
        assert store.delete_unreferenced_blobs() == (1, len(BIG))  # X; S is still in a2
        assert store.get_blobs([S, X, Y]) == {S: b"shared", Y: SMALL}
        assert store.delete_checkpoints([a2.checkpoint_id, b1.checkpoint_id]) == 2
        assert store.delete_unreferenced_blobs() == (2, len(b"shared") + len(SMALL))
        assert store.delete_unreferenced_blobs() == (0, 0)
        assert (store.stats().blobs, store.stats().blob_bytes) == (0, 0)
        assert store.get_run(run_b.run_id).head_checkpoint_id == b1.checkpoint_id

    def test_delete_runs_removes_runs_checkpoints_and_journal(self, store: Store) -> None:
        a, first_a, lease_a = self.start(store)
        b, first_b, lease_b = self.start(store, a.thread_id)
        c, first_c, _ = self.start(store)
        a1 = next_record(first_a, blobs=(X, S))
        store.put_checkpoint(a1, lease_token=lease_a.token, blobs={X: BIG, S: b"shared"})
        store.record_intent(make_effect(a.run_id, "a-req"), lease_token=lease_a.token)
        b_effect = make_effect(b.run_id, "b-req")
        store.record_intent(b_effect, lease_token=lease_b.token)
        # A fork whose first checkpoint refers to a blob its parent run wrote.
        fork, fork_first = make_run(c.thread_id)
        fork_first = replace(fork_first, header=replace(fork_first.header, blobs=(S,)))
        store.create_run(fork, fork_first, owner=OWNER, ttl=TTL)
        assert store.delete_runs([a.run_id, "no-such-run", a.run_id]) == 1
        assert store.delete_runs([]) == 0
        with pytest.raises(NotFoundError):
            store.get_run(a.run_id)
        with pytest.raises(NotFoundError):
            store.list_checkpoints(a.run_id)
        for gone in (first_a, a1):
            with pytest.raises(NotFoundError):
                store.get_checkpoint(gone.checkpoint_id)
        assert store.list_effects(a.run_id) == []
        assert store.list_effects() == [b_effect]
        assert [r.run_id for r in store.list_runs(thread_id=a.thread_id)] == [b.run_id]
        assert store.latest_checkpoint(b.run_id) == first_b
        assert store.latest_checkpoint(c.run_id) == first_c
        assert store.delete_unreferenced_blobs() == (1, len(BIG))  # S: the fork refers to it
        assert store.delete_thread(c.thread_id) == 2
        assert store.delete_unreferenced_blobs() == (1, len(b"shared"))
        assert store.stats().runs == 1

    # -- rewrite ----------------------------------------------------------------------
    def _rewrite_fixture(self, store: Store) -> tuple[str, list[CheckpointRecord], list[str]]:
        run, first, lease = self.start(store)
        c1 = next_record(first, base_id=first.checkpoint_id, blobs=(X, Y), metadata={"k": 1})
        store.put_checkpoint(c1, lease_token=lease.token, blobs={X: BIG, Y: SMALL})
        for request_id in ("e1", "e2"):
            store.record_intent(
                make_effect(run.run_id, request_id, metadata={"idempotent": True}),
                lease_token=lease.token,
            )
        store.record_result(
            run.run_id,
            "e1",
            status=EffectStatus.DONE,
            result=b"r1",
            checksum="s1",
            lease_token=None,
        )
        return run.run_id, [first, c1], ["e1", "e2"]

    def test_rewrite_replaces_exactly_the_named_records(self, store: Store) -> None:
        run_id, (first, c1), _ = self._rewrite_fixture(store)
        e1, e2 = store.get_effect(run_id, "e1"), store.get_effect(run_id, "e2")
        before = store.stats()
        # A record replaces the stored one whole (rekey: new format, metadata, blob names);
        # an effect its values, error, metadata and check; a run its metadata, error, check.
        new_c1 = replace(
            c1,
            payload=b"\x01sealed",
            checksum="new-sum",
            header=replace(
                c1.header, size=7, step=99, next="other", metadata={"k": 2}, format_version=4,
                blobs=(Y, Z),
            ),
        )  # fmt: skip
        new_e1 = replace(
            e1, arguments=b"\x02a", result=b"\x02r", checksum="e1-new", name="x",
            error="$sg:enc:k2:BBBB", metadata={"idempotent": True, "by": "ada"},
            status=EffectStatus.FAILED,
        )  # fmt: skip
        run_before = store.get_run(run_id)
        sealed_meta = {"user": "$sg:enc:k2:AAAA", "n": [1, None]}
        store.rewrite(
            records=[new_c1],
            effects=[new_e1],
            blobs={X: b"sealed X", Z: b"new Z"},
            runs=[
                replace(
                    run_before, metadata=sealed_meta, error="$sg:enc:k2:CCCC", checksum="m1:k2:x",
                    status=RunStatus.COMPLETED, workflow="other",
                )
            ],
        )  # fmt: skip
        assert store.get_run(run_id) == replace(
            run_before, metadata=sealed_meta, error="$sg:enc:k2:CCCC", checksum="m1:k2:x"
        )
        got = store.get_checkpoint(c1.checkpoint_id)
        assert got == new_c1
        # Listing reads the same header as a load.
        [listed] = [
            h for h in store.list_checkpoints(run_id) if h.checkpoint_id == c1.checkpoint_id
        ]
        assert listed == got.header
        assert store.get_checkpoint(first.checkpoint_id) == first
        assert store.get_effect(run_id, "e1") == replace(
            e1, arguments=b"\x02a", result=b"\x02r", checksum="e1-new",
            error="$sg:enc:k2:BBBB", metadata={"idempotent": True, "by": "ada"},
        )  # fmt: skip
        assert store.get_effect(run_id, "e2") == e2
        assert store.get_blobs([X, Y, Z]) == {X: b"sealed X", Y: SMALL, Z: b"new Z"}
        after = store.stats()
        assert after.blob_bytes == before.blob_bytes - len(BIG) + len(b"sealed X") + len(b"new Z")
        assert after.payload_bytes == before.payload_bytes - len(c1.payload) + len(b"\x01sealed")
        assert store.get_chain(c1.checkpoint_id) == [got, first]
        # The blob references follow the new header: X is no longer referred to.
        assert store.delete_unreferenced_blobs() == (1, len(b"sealed X"))
        assert store.get_blobs([X, Y, Z]) == {Y: SMALL, Z: b"new Z"}
        store.rewrite()  # nothing named, nothing changes
        assert store.get_checkpoint(c1.checkpoint_id) == got

    def test_rewrite_of_an_unknown_id_changes_nothing(self, store: Store) -> None:
        run_id, (_, c1), _ = self._rewrite_fixture(store)
        e1 = store.get_effect(run_id, "e1")
        new_c1 = replace(c1, payload=b"new", checksum="new")
        new_e1 = replace(e1, arguments=b"new", checksum="new")
        ghost = make_record(c1.header.thread_id, run_id)
        run_before = store.get_run(run_id)
        calls: list[Callable[[], None]] = [
            lambda: store.rewrite(records=[new_c1, ghost], effects=[new_e1]),
            lambda: store.rewrite(
                records=[new_c1], effects=[new_e1, make_effect(run_id, "no-such")]
            ),
            lambda: store.rewrite(
                records=[new_c1],
                runs=[run_before, replace(run_before, run_id="no-such-run")],
            ),
        ]
        for call in calls:
            with pytest.raises(NotFoundError):
                call()
        # A record naming a blob that is neither given nor stored: a conflict, nothing written.
        with pytest.raises(ConflictError):
            store.rewrite(
                records=[replace(new_c1, header=replace(c1.header, blobs=(X, "no-such-blob")))],
                blobs={X: b"new"},
            )
        # A record cannot move to another run.
        with pytest.raises(ValueError, match="not its own run"):
            store.rewrite(records=[replace(c1, header=replace(c1.header, run_id="other"))])
        assert store.get_checkpoint(c1.checkpoint_id) == c1
        assert store.get_effect(run_id, "e1") == e1
        assert store.get_blobs([X]) == {X: BIG}
        assert store.get_run(run_id) == run_before
        assert store.missing_blobs(["no-such-blob"]) == {"no-such-blob"}

    # -- sizes ------------------------------------------------------------------------
    def test_run_sizes_per_run_largest_payload_first(self, store: Store) -> None:
        big, big_first, lease = self.start(store)
        big_last = make_record(
            big.thread_id,
            big.run_id,
            parent_id=big_first.checkpoint_id,
            step=1,
            status=RunStatus.INTERRUPTED,
            state={"text": "x" * 500},
        )
        store.put_checkpoint(big_last, lease_token=lease.token)
        e1 = make_effect(big.run_id, "e1", arguments=b"12345")
        store.record_intent(e1, lease_token=lease.token)
        store.record_result(
            big.run_id,
            "e1",
            status=EffectStatus.DONE,
            result=b"123",
            checksum="c",
            lease_token=None,
        )
        store.record_intent(make_effect(big.run_id, "e2", arguments=b""), lease_token=lease.token)
        # Two fresh runs of one thread: equal payloads, so the run id breaks the tie.
        t1, t1_first, _ = self.start(store)
        t2, t2_first, _ = self.start(store, t1.thread_id)
        fresh = [
            RunSize(r.run_id, r.thread_id, RunStatus.RUNNING, 1, len(f.payload), 0, 0)
            for r, f in sorted(((t1, t1_first), (t2, t2_first)), key=lambda p: p[0].run_id)
        ]
        assert len(t1_first.payload) == len(t2_first.payload)
        expected_big = RunSize(
            big.run_id,
            big.thread_id,
            RunStatus.INTERRUPTED,
            2,
            len(big_first.payload) + len(big_last.payload),
            2,
            5 + 3,
        )
        assert store.run_sizes() == [expected_big, *fresh]
        assert store.run_sizes(thread_id=t1.thread_id) == fresh
        assert store.run_sizes(limit=2) == [expected_big, fresh[0]]
        assert store.run_sizes(thread_id="no-such-thread") == []

    def test_stats_count_blobs_and_effects(self, store: Store) -> None:
        empty = store.stats()
        assert (empty.blobs, empty.blob_bytes, empty.effects) == (0, 0, 0)
        run, first, lease = self.start(store)
        second = next_record(first, blobs=(X, Y))
        effect = make_effect(run.run_id, "read", status=EffectStatus.DONE, result=b"r")
        store.put_checkpoint(
            second, lease_token=lease.token, effects=[effect], blobs={X: BIG, Y: SMALL}
        )
        store.record_intent(make_effect(run.run_id, "write"), lease_token=lease.token)
        stats = store.stats()
        assert (stats.blobs, stats.blob_bytes, stats.effects) == (2, len(BIG) + len(SMALL), 2)
        assert (stats.runs, stats.checkpoints) == (1, 2)
