"""The store contract for ``list_effects(request_prefix=...)``: one part of a journal.

Part of :class:`savegame.testing.contract.StoreContract`; subclass that, not this.
A prefix is literal text on every backend: SQL's ``%``, ``_`` and ``\\`` are not
patterns, Redis's ``[``, ``(`` and ``-`` are not range syntax, and the ends of
Unicode (U+10FFFF, the surrogate gap after U+D7FF) are where a computed upper
bound would go wrong. Every case is checked against ``str.startswith``.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from savegame.model import EffectKind, EffectStatus, utcnow
from savegame.stores.base import Store
from savegame.testing._contract_base import ContractBase
from savegame.testing.builders import make_effect, next_record

__all__ = ["PrefixContract"]

#: Request ids a hostile caller might store: SQL wildcards and escapes, Redis range
#: syntax, separators, multi-byte text and the last code points before each gap.
IDS = (
    "a", "a|1|0", "a|1|1", "a|10|0", "a|2|0", "ab", "a_b", "aXb", "a%b", "a%", "%", "%x",
    "_", "_y", "\\", "\\\\n", "\\%", "[a", "(a", "-", "+", "|", "||x", "\u00e9|1", "\u00e9|2",
    "e|1", "\u20ac", "\U0001f600x", "x\ud7ff", "x\ud7ffa", "x\ue000", "\U0010ffff",
    "\U0010ffffa", "a\U0010ffff", "b",
)  # fmt: skip
PREFIXES = (
    "", "a", "a|", "a|1|", "a|1", "a|1|0", "a|1|0|longer", "%", "_", "\\", "\\\\", "|",
    "a_", "a%", "[", "(", "-", "+", "\u00e9", "\u20ac", "\U0001f600", "x\ud7ff",
    "\U0010ffff", "a\U0010ffff", "zzz", "\x00", "a\x00", "\ud800", "\udfff",
)  # fmt: skip


class PrefixContract(ContractBase):
    """``list_effects(request_prefix=...)``: literal, per run, with the other filters."""

    def test_request_prefix_is_literal_text(self, store: Store) -> None:
        run, _, lease = self.start(store)
        other, _, other_lease = self.start(store)
        t0 = utcnow()
        # Created in reverse id order: the listing is by created_at, not by request id.
        order = list(reversed(IDS))
        for n, request_id in enumerate(order):
            effect = make_effect(run.run_id, request_id, created_at=t0 + timedelta(microseconds=n))
            store.record_intent(effect, lease_token=lease.token)
        store.record_intent(make_effect(other.run_id, "a|1|0"), lease_token=other_lease.token)
        for prefix in PREFIXES:
            found = store.list_effects(run.run_id, request_prefix=prefix)
            expected = [r for r in order if r.startswith(prefix)]
            assert [e.request_id for e in found] == expected, prefix
        assert store.list_effects(run.run_id, request_prefix="a|1|0")[0] == store.get_effect(
            run.run_id, "a|1|0"
        )
        assert store.list_effects("no-such-run", request_prefix="a") == []

    def test_request_prefix_combines_with_kinds_statuses_limit_and_runs(self, store: Store) -> None:
        run, first, lease = self.start(store)
        other, _, other_lease = self.start(store)
        t0 = utcnow()
        specs = [
            ("c1|t|0", EffectKind.READ, EffectStatus.DONE),
            ("c1|t|1", EffectKind.WRITE, EffectStatus.PENDING),
            ("c1|u|0", EffectKind.READ, EffectStatus.PENDING),
            ("c2|t|0", EffectKind.READ, EffectStatus.DONE),
        ]
        for n, (request_id, kind, status) in enumerate(specs):
            effect = make_effect(
                run.run_id, request_id, kind=kind, status=status,
                created_at=t0 + timedelta(microseconds=n),
            )  # fmt: skip
            store.record_intent(effect, lease_token=lease.token)
        # The checkpoint's own journal entries are listed by prefix too.
        store.put_checkpoint(
            next_record(first),
            lease_token=lease.token,
            effects=[
                make_effect(run.run_id, "c1|v|0", kind=EffectKind.READ, status=EffectStatus.DONE)
            ],
        )
        store.record_intent(make_effect(other.run_id, "c1|x|0"), lease_token=other_lease.token)

        def ids(run_id: str | None, **filters: object) -> list[str]:
            found = store.list_effects(run_id, request_prefix="c1|", **filters)  # type: ignore[arg-type]
            return [e.request_id for e in found]

        assert ids(run.run_id) == ["c1|t|0", "c1|t|1", "c1|u|0", "c1|v|0"]
        assert ids(run.run_id, kinds=[EffectKind.READ]) == ["c1|t|0", "c1|u|0", "c1|v|0"]
        assert ids(run.run_id, statuses=[EffectStatus.PENDING]) == ["c1|t|1", "c1|u|0"]
        assert ids(run.run_id, kinds=[EffectKind.READ], statuses=[EffectStatus.DONE]) == [
            "c1|t|0",
            "c1|v|0",
        ]
        assert ids(run.run_id, kinds=[]) == []
        assert ids(run.run_id, limit=2) == ["c1|t|0", "c1|t|1"]
        assert sorted(ids(None)) == ["c1|t|0", "c1|t|1", "c1|u|0", "c1|v|0", "c1|x|0"]
        assert ids(other.run_id) == ["c1|x|0"]

    def test_request_prefix_lists_a_replaced_entry_once_and_none_of_a_deleted_run(
        self, store: Store
    ) -> None:
        run, _, lease = self.start(store)
        not_done = make_effect(run.run_id, "p|0", status=EffectStatus.NOT_DONE)
        store.record_intent(not_done, lease_token=lease.token)
        again = store.record_intent(make_effect(run.run_id, "p|0"), lease_token=lease.token)
        assert store.list_effects(run.run_id, request_prefix="p|") == [again]
        assert again.status is EffectStatus.PENDING
        store.delete_runs([run.run_id])
        assert store.list_effects(run.run_id, request_prefix="p|") == []
        assert store.list_effects(request_prefix="") == []

    def test_request_prefix_survives_reopening(self, store: Store) -> None:
        if not store.capabilities.persistent:
            pytest.skip(f"{type(store).__name__} does not claim persistent")
        run, _, lease = self.start(store)
        effect = store.record_intent(make_effect(run.run_id, "r|1"), lease_token=lease.token)
        with self._second_handle(store) as other:
            assert other.list_effects(run.run_id, request_prefix="r|") == [effect]
