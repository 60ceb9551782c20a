"""The store contract for the effect journal and the cancel flag.

Part of :class:`savegame.testing.contract.StoreContract`; subclass that, not this.
The journal is what makes effects exactly-once, so these tests pin the edge
cases where backends would otherwise drift: which entry wins a second intent,
what a stale writer leaves behind, and that every byte and microsecond survives.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from functools import partial

import pytest

from savegame.errors import ConflictError, EffectSettledError, LeaseLostError, NotFoundError
from savegame.model import EffectKind, EffectRecord, EffectStatus, RunStatus, utcnow
from savegame.stores.base import PutResult, Store
from savegame.testing._contract_base import TTL, ContractBase
from savegame.testing.builders import OTHER_OWNER, make_effect, next_record
from savegame.testing.together import together

__all__ = ["JournalContract"]


class JournalContract(ContractBase):
    """record_intent, record_result, the journal in put_checkpoint, listing, request_cancel."""

    # -- round trip -------------------------------------------------------------------
    def test_effect_round_trip_is_exact(self, store: Store) -> None:
        run, _, lease = self.start(store)
        now = utcnow()
        effect = make_effect(
            run.run_id,
            "req-\u00e9-1",
            kind=EffectKind.LLM,
            name="chat",
            step=3,
            node="plan",
            call_index=2,
            status=EffectStatus.DONE,
            arguments=b"\x00\xff{}\x00",
            result=b"\xff\x00result",
            error="partial: \u2603",
            metadata={"idempotent": True, "n": 1.5, "nested": {"a": [1, None, "x"]}},
            created_at=now.replace(microsecond=123457),
            completed_at=now + timedelta(seconds=1, microseconds=1),
            checksum="c0ffee",
        )
        assert store.record_intent(effect, lease_token=lease.token) == effect
        got = store.get_effect(run.run_id, effect.request_id)
        assert got == effect
        assert (got.arguments, got.result, got.checksum) == (
            effect.arguments,
            effect.result,
            "c0ffee",
        )
        assert store.list_effects(run.run_id) == [effect]

    def test_empty_bytes_and_none_stay_apart(self, store: Store) -> None:
        run, _, lease = self.start(store)
        empty = make_effect(run.run_id, "empty", arguments=b"", result=b"")
        none = make_effect(run.run_id, "none", arguments=b"", result=None)
        store.record_intent(empty, lease_token=lease.token)
        store.record_intent(none, lease_token=lease.token)
        assert store.get_effect(run.run_id, "empty").result == b""
        assert store.get_effect(run.run_id, "none").result is None

    # -- record_intent ----------------------------------------------------------------
    def test_second_intent_returns_the_first_entry_unchanged(self, store: Store) -> None:
        run, _, lease = self.start(store)
        first = make_effect(run.run_id, "req-1", arguments=b"first")
        assert store.record_intent(first, lease_token=lease.token) == first
        later = make_effect(
            run.run_id,
            "req-1",
            arguments=b"second",
            status=EffectStatus.DONE,
            result=b"r",
            created_at=first.created_at + timedelta(seconds=5),
        )
        assert store.record_intent(later, lease_token=lease.token) == first
        assert store.get_effect(run.run_id, "req-1") == first
        assert store.list_effects(run.run_id) == [first]

    def test_a_settled_entry_is_kept_over_a_new_intent(self, store: Store) -> None:
        run, _, lease = self.start(store)
        intent = make_effect(run.run_id, "req-1")
        store.record_intent(intent, lease_token=lease.token)
        for status in (EffectStatus.DONE, EffectStatus.FAILED, EffectStatus.REJECTED):
            done = store.record_result(
                run.run_id, "req-1", status=status, checksum="s", lease_token=lease.token
            )
            again = make_effect(run.run_id, "req-1", arguments=b"again")
            assert store.record_intent(again, lease_token=lease.token) == done

    def test_a_not_done_entry_is_replaced_by_the_new_intent(self, store: Store) -> None:
        run, _, lease = self.start(store)
        store.record_intent(make_effect(run.run_id, "req-1"), lease_token=lease.token)
        store.record_result(
            run.run_id, "req-1", status=EffectStatus.NOT_DONE, checksum="nd", lease_token=None
        )
        fresh = make_effect(run.run_id, "req-1", arguments=b"fresh")
        assert store.record_intent(fresh, lease_token=lease.token) == fresh
        assert store.get_effect(run.run_id, "req-1") == fresh

    def test_record_intent_is_fenced(self, store: Store) -> None:
        run, _, old = self.start(store, ttl=0.0)
        new = store.acquire_lease(run.run_id, OTHER_OWNER, TTL)
        effect = make_effect(run.run_id)
        with pytest.raises(LeaseLostError) as info:
            store.record_intent(effect, lease_token=old.token)
        assert (info.value.run_id, info.value.token) == (run.run_id, old.token)
        with pytest.raises(NotFoundError):
            store.get_effect(run.run_id, effect.request_id)
        assert store.list_effects(run.run_id) == []
        assert store.record_intent(effect, lease_token=new.token) == effect

    def test_concurrent_intents_for_one_request_id_store_one_entry(self, store: Store) -> None:
        run, _, lease = self.start(store)
        contenders = 6
        mine = [make_effect(run.run_id, "req-1", arguments=f"caller {i}".encode())
                for i in range(contenders)]  # fmt: skip
        returned = together(
            [partial(store.record_intent, effect, lease_token=lease.token) for effect in mine]
        )
        stored = store.get_effect(run.run_id, "req-1")
        assert returned == [stored] * contenders

    # -- record_intents ----------------------------------------------------------------
    def test_record_intents_journals_each_entry_as_record_intent_does(self, store: Store) -> None:
        run, _, lease = self.start(store)
        kept = make_effect(run.run_id, "kept", arguments=b"first")
        store.record_intent(kept, lease_token=lease.token)
        store.record_intent(make_effect(run.run_id, "undone"), lease_token=lease.token)
        store.record_result(
            run.run_id, "undone", status=EffectStatus.NOT_DONE, checksum="nd", lease_token=None
        )
        new = make_effect(run.run_id, "new", arguments=b"new")
        again = make_effect(run.run_id, "kept", arguments=b"second")
        fresh = make_effect(run.run_id, "undone", arguments=b"fresh")
        twice = make_effect(run.run_id, "new", arguments=b"twice")
        returned = store.record_intents([new, again, fresh, twice], lease_token=lease.token)
        # A stored entry wins over a new intent, a NOT_DONE one is replaced, and a request
        # id given twice in one call keeps its first entry.
        assert returned == [new, kept, fresh, new]
        assert {e.request_id: e for e in store.list_effects(run.run_id)} == {
            "kept": kept,
            "new": new,
            "undone": fresh,
        }
        assert store.record_intents([], lease_token=lease.token) == []

    def test_record_intents_is_fenced_and_writes_none_when_refused(self, store: Store) -> None:
        run, _, old = self.start(store, ttl=0.0)
        new = store.acquire_lease(run.run_id, OTHER_OWNER, TTL)
        entries = [make_effect(run.run_id, f"req-{i}") for i in range(3)]
        with pytest.raises(LeaseLostError) as info:
            store.record_intents(entries, lease_token=old.token)
        assert (info.value.run_id, info.value.token) == (run.run_id, old.token)
        assert store.list_effects(run.run_id) == []
        with pytest.raises(NotFoundError):
            store.record_intents([make_effect("no-such-run")], lease_token=new.token)
        assert store.record_intents(entries, lease_token=new.token) == entries

    def test_record_intents_refuses_entries_of_two_runs(self, store: Store) -> None:
        run_a, _, lease = self.start(store)
        run_b, _, _ = self.start(store)
        mixed = [make_effect(run_a.run_id, "a"), make_effect(run_b.run_id, "b")]
        with pytest.raises(ValueError, match="one run"):
            store.record_intents(mixed, lease_token=lease.token)
        assert store.list_effects() == []

    # -- record_result ----------------------------------------------------------------
    def test_record_result_settles_the_entry_and_merges_metadata(self, store: Store) -> None:
        run, _, lease = self.start(store)
        intent = make_effect(
            run.run_id, "req-1", metadata={"idempotent": True, "x": {"a": 1}, "keep": "me"}
        )
        store.record_intent(intent, lease_token=lease.token)
        before = utcnow()
        done = store.record_result(
            run.run_id,
            "req-1",
            status=EffectStatus.DONE,
            result=b"\x00sent",
            metadata={"x": {"b": 2}, "by": "ada"},
            checksum="after",
            lease_token=lease.token,
        )
        after = utcnow()
        assert (done.status, done.result, done.error, done.checksum) == (
            EffectStatus.DONE,
            b"\x00sent",
            None,
            "after",
        )
        assert done.metadata == {"idempotent": True, "x": {"b": 2}, "keep": "me", "by": "ada"}
        assert done.completed_at is not None and before <= done.completed_at <= after
        assert (done.arguments, done.created_at, done.kind, done.name) == (
            intent.arguments,
            intent.created_at,
            intent.kind,
            intent.name,
        )
        assert store.get_effect(run.run_id, "req-1") == done
        failed = store.record_result(
            run.run_id,
            "req-1",
            status=EffectStatus.FAILED,
            error="TimeoutError: smtp",
            checksum="failed",
            lease_token=lease.token,
        )
        assert (failed.status, failed.result, failed.error) == (
            EffectStatus.FAILED,
            None,
            "TimeoutError: smtp",
        )
        assert failed.metadata == done.metadata  # no metadata given: nothing merged, nothing lost
        assert store.get_effect(run.run_id, "req-1") == failed

    def test_record_result_without_a_token_bypasses_fencing(self, store: Store) -> None:
        run, _, old = self.start(store, ttl=0.0)
        intent = make_effect(run.run_id, "req-1", kind=EffectKind.APPROVAL)
        store.record_intent(intent, lease_token=old.token)
        store.acquire_lease(run.run_id, OTHER_OWNER, TTL)
        with pytest.raises(LeaseLostError):
            store.record_result(
                run.run_id, "req-1", status=EffectStatus.DONE, checksum="x", lease_token=old.token
            )
        assert store.get_effect(run.run_id, "req-1") == intent
        approved = store.record_result(
            run.run_id,
            "req-1",
            status=EffectStatus.DONE,
            metadata={"by": "ada"},
            checksum="approved",
            lease_token=None,
        )
        assert approved.status is EffectStatus.DONE
        assert store.get_effect(run.run_id, "req-1") == approved

    def test_record_result_with_expect_refuses_an_entry_settled_first(self, store: Store) -> None:
        run, _, lease = self.start(store)
        store.record_intent(
            make_effect(run.run_id, "gate", kind=EffectKind.APPROVAL), lease_token=lease.token
        )
        approved = store.record_result(
            run.run_id, "gate", status=EffectStatus.DONE, result=b"yes", checksum="a",
            lease_token=None, expect=EffectStatus.PENDING,
        )  # fmt: skip
        with pytest.raises(EffectSettledError) as info:
            store.record_result(
                run.run_id, "gate", status=EffectStatus.REJECTED, error="no", checksum="r",
                lease_token=None, expect=EffectStatus.PENDING,
            )  # fmt: skip
        assert (info.value.run_id, info.value.request_id) == (run.run_id, "gate")
        assert (info.value.status, info.value.expected) == ("done", "pending")
        assert store.get_effect(run.run_id, "gate") == approved  # nothing written

    def test_expect_checksum_writes_only_over_the_entry_as_read(self, store: Store) -> None:
        """A settle built on an entry read before it was re-sealed (rekey) would store a
        check over other bytes: it is refused, and nothing is written."""
        run, _, lease = self.start(store)
        read = store.record_intent(
            make_effect(run.run_id, "gate", kind=EffectKind.APPROVAL), lease_token=lease.token
        )
        store.rewrite(effects=[replace(read, arguments=b"resealed", checksum="new-check")])
        resealed = store.get_effect(run.run_id, "gate")
        with pytest.raises(EffectSettledError, match="changed since it was read"):
            store.record_result(
                run.run_id, "gate", status=EffectStatus.DONE, result=b"yes", checksum="a",
                lease_token=None, expect=EffectStatus.PENDING, expect_checksum=read.checksum,
            )  # fmt: skip
        assert store.get_effect(run.run_id, "gate") == resealed
        done = store.record_result(
            run.run_id, "gate", status=EffectStatus.DONE, result=b"yes", checksum="a",
            lease_token=None, expect=EffectStatus.PENDING, expect_checksum="new-check",
        )  # fmt: skip
        assert done.status is EffectStatus.DONE and done.checksum == "a"

    def test_concurrent_settles_with_expect_have_exactly_one_winner(self, store: Store) -> None:
        """Several people decide one gate at the same moment: one decision stands, the
        others are told, and the stored entry is the winner's, whole."""
        run, _, lease = self.start(store)
        store.record_intent(
            make_effect(run.run_id, "gate", kind=EffectKind.APPROVAL), lease_token=lease.token
        )
        contenders = 6
        outcomes = together([
            partial(
                store.record_result, run.run_id, "gate",
                status=EffectStatus.DONE if i % 2 else EffectStatus.REJECTED,
                error=f"by {i}", checksum=f"c{i}", metadata={"by": i}, lease_token=None,
                expect=EffectStatus.PENDING,
            )
            for i in range(contenders)
        ])  # fmt: skip
        won = [o for o in outcomes if isinstance(o, EffectRecord)]
        lost = [o for o in outcomes if isinstance(o, EffectSettledError)]
        assert len(won) == 1 and len(lost) == contenders - 1, outcomes
        stored = store.get_effect(run.run_id, "gate")
        assert stored == won[0]
        assert stored.error == f"by {stored.metadata['by']}"
        assert stored.checksum == f"c{stored.metadata['by']}"

    def test_record_result_for_an_unknown_entry_is_not_found(self, store: Store) -> None:
        run, _, lease = self.start(store)
        for run_id, token in ((run.run_id, lease.token), (run.run_id, None), ("no-run", None)):
            with pytest.raises(NotFoundError):
                store.record_result(
                    run_id, "no-such", status=EffectStatus.DONE, checksum="x", lease_token=token
                )
        assert store.list_effects() == []

    # -- put_checkpoint(effects=...) --------------------------------------------------
    def test_put_checkpoint_journals_effects_insert_if_absent(self, store: Store) -> None:
        run, first, lease = self.start(store)
        kept = make_effect(run.run_id, "req-kept", kind=EffectKind.READ)
        store.record_intent(kept, lease_token=lease.token)
        new = make_effect(run.run_id, "req-new", kind=EffectKind.READ, status=EffectStatus.DONE)
        clash = make_effect(run.run_id, "req-kept", arguments=b"other", status=EffectStatus.DONE)
        second = next_record(first)
        store.put_checkpoint(second, lease_token=lease.token, effects=[new, clash])
        assert store.latest_checkpoint(run.run_id) == second
        assert store.get_effect(run.run_id, "req-new") == new
        assert store.get_effect(run.run_id, "req-kept") == kept

    def test_put_checkpoint_replaces_a_not_done_entry_like_record_intent(
        self, store: Store
    ) -> None:
        run, first, lease = self.start(store)
        store.record_intent(make_effect(run.run_id, "req-1"), lease_token=lease.token)
        store.record_result(
            run.run_id, "req-1", status=EffectStatus.NOT_DONE, checksum="nd", lease_token=None
        )
        read = make_effect(run.run_id, "req-1", kind=EffectKind.READ, status=EffectStatus.DONE)
        store.put_checkpoint(next_record(first), lease_token=lease.token, effects=[read])
        assert store.get_effect(run.run_id, "req-1") == read

    def test_a_failed_checkpoint_write_journals_nothing(self, store: Store) -> None:
        run, first, old = self.start(store, ttl=0.0)
        new = store.acquire_lease(run.run_id, OTHER_OWNER, TTL)
        stale = make_effect(run.run_id, "req-stale", status=EffectStatus.DONE)
        with pytest.raises(LeaseLostError):
            store.put_checkpoint(next_record(first), lease_token=old.token, effects=[stale])
        second = next_record(first)
        store.put_checkpoint(second, lease_token=new.token)
        dup = make_effect(run.run_id, "req-dup", status=EffectStatus.DONE)
        with pytest.raises(ConflictError):
            store.put_checkpoint(second, lease_token=new.token, effects=[dup])
        assert store.list_effects(run.run_id) == []
        assert store.stats().checkpoints == 2

    def test_put_checkpoint_refuses_effects_of_another_run(self, store: Store) -> None:
        run, first, lease = self.start(store)
        other, _, _ = self.start(store)
        with pytest.raises(ValueError, match=other.run_id):
            store.put_checkpoint(
                next_record(first), lease_token=lease.token, effects=[make_effect(other.run_id)]
            )
        assert store.get_run(run.run_id).head_checkpoint_id == first.checkpoint_id
        assert store.list_effects() == []

    # -- list_effects -----------------------------------------------------------------
    def test_list_effects_oldest_first_filtered_and_limited(self, store: Store) -> None:
        run_a, _, lease_a = self.start(store)
        run_b, _, lease_b = self.start(store)
        t0 = utcnow()
        # Same created_at for b and a2: request id breaks the tie, not insertion order.
        specs = [
            (run_a.run_id, lease_a.token, "a3", EffectKind.WRITE, EffectStatus.DONE, 3),
            (run_a.run_id, lease_a.token, "a2", EffectKind.LLM, EffectStatus.DONE, 2),
            (run_b.run_id, lease_b.token, "a1-b", EffectKind.WRITE, EffectStatus.PENDING, 2),
            (run_a.run_id, lease_a.token, "z0", EffectKind.APPROVAL, EffectStatus.PENDING, 1),
        ]
        by_id: dict[str, EffectRecord] = {}
        for run_id, token, request_id, kind, status, micros in specs:
            effect = make_effect(
                run_id,
                request_id,
                kind=kind,
                status=status,
                created_at=t0 + timedelta(microseconds=micros),
            )
            by_id[request_id] = store.record_intent(effect, lease_token=token)

        def ids(run_id: str | None = None, **filters: object) -> list[str]:
            found = store.list_effects(run_id, **filters)  # type: ignore[arg-type]
            return [e.request_id for e in found]

        assert ids() == ["z0", "a1-b", "a2", "a3"]
        assert store.list_effects() == [by_id[i] for i in ("z0", "a1-b", "a2", "a3")]
        assert ids(run_a.run_id) == ["z0", "a2", "a3"]
        assert ids(run_b.run_id) == ["a1-b"]
        assert ids("no-such-run") == []
        assert ids(kinds=[EffectKind.WRITE]) == ["a1-b", "a3"]
        assert ids(kinds=[EffectKind.WRITE, EffectKind.APPROVAL]) == ["z0", "a1-b", "a3"]
        assert ids(statuses=[EffectStatus.PENDING]) == ["z0", "a1-b"]
        assert ids(run_a.run_id, kinds=[EffectKind.WRITE], statuses=[EffectStatus.DONE]) == ["a3"]
        assert ids(kinds=[]) == []
        assert ids(statuses=[EffectStatus.NOT_DONE]) == []
        assert ids(limit=2) == ["z0", "a1-b"]
        assert ids(run_a.run_id, limit=1) == ["z0"]

    # -- cancel -----------------------------------------------------------------------
    def test_request_cancel_sets_a_flag_that_outlives_checkpoints(self, store: Store) -> None:
        run, first, lease = self.start(store)
        other, _, _ = self.start(store)
        assert store.get_run(run.run_id).cancel_requested is False
        store.request_cancel(run.run_id)
        assert store.get_run(run.run_id).cancel_requested is True
        listed = {r.run_id: r.cancel_requested for r in store.list_runs()}
        assert listed == {run.run_id: True, other.run_id: False}
        # Sticky: a checkpoint the owner writes before it looks must not clear the request.
        store.put_checkpoint(next_record(first), lease_token=lease.token)
        store.request_cancel(run.run_id)  # asking twice is harmless
        got = store.get_run(run.run_id)
        assert (got.cancel_requested, got.status) == (True, RunStatus.RUNNING)

    def test_put_checkpoint_reports_the_cancel_flag_it_committed_with(self, store: Store) -> None:
        run, first, lease = self.start(store)
        _, other_first, other_lease = self.start(store)
        second = next_record(first)
        assert store.put_checkpoint(second, lease_token=lease.token) == PutResult(False)
        store.request_cancel(run.run_id)
        third = next_record(second)
        assert store.put_checkpoint(third, lease_token=lease.token) == PutResult(True)
        # A write that changes the status reads the flag too.
        ended = next_record(third, status=RunStatus.CANCELLED)
        assert store.put_checkpoint(ended, lease_token=lease.token) == PutResult(True)
        # Another run's flag is its own.
        written = store.put_checkpoint(next_record(other_first), lease_token=other_lease.token)
        assert written == PutResult(False)

    # -- housekeeping -----------------------------------------------------------------
    def test_delete_thread_removes_its_journal(self, store: Store) -> None:
        a, a_first, a_lease = self.start(store)
        b, _, b_lease = self.start(store)
        store.record_intent(make_effect(a.run_id, "a-1"), lease_token=a_lease.token)
        store.put_checkpoint(
            next_record(a_first),
            lease_token=a_lease.token,
            effects=[make_effect(a.run_id, "a-2", kind=EffectKind.READ)],
        )
        b_effect = store.record_intent(make_effect(b.run_id, "b-1"), lease_token=b_lease.token)
        assert store.delete_thread(a.thread_id) == 2  # checkpoints, not journal entries
        with pytest.raises(NotFoundError):
            store.get_effect(a.run_id, "a-1")
        assert store.list_effects() == [b_effect]
        stats = store.stats()
        assert (stats.runs, stats.checkpoints) == (1, 1)

    # -- optional capabilities --------------------------------------------------------
    def test_journal_and_cancel_flag_survive_reopening(self, store: Store) -> None:
        if not store.capabilities.persistent:
            pytest.skip(f"{type(store).__name__} does not claim persistent")
        run, _, lease = self.start(store)
        effect = store.record_intent(make_effect(run.run_id), lease_token=lease.token)
        store.request_cancel(run.run_id)
        with self._second_handle(store) as other:
            assert other.get_effect(run.run_id, effect.request_id) == effect
            assert other.get_run(run.run_id).cancel_requested is True

    def test_handles_share_journal_fencing(self, store: Store) -> None:
        if not store.capabilities.multi_process:
            pytest.skip(f"{type(store).__name__} does not claim multi_process")
        run, _, lease = self.start(store, ttl=0.0)
        with self._second_handle(store) as other:
            taken = other.acquire_lease(run.run_id, OTHER_OWNER, TTL)
            with pytest.raises(LeaseLostError):
                store.record_intent(make_effect(run.run_id), lease_token=lease.token)
            effect = other.record_intent(make_effect(run.run_id), lease_token=taken.token)
            assert (
                store.record_intent(
                    make_effect(run.run_id, arguments=b"x"), lease_token=taken.token
                )
                == effect
            )
