"""The effect journal of the Redis store: intents, results, listings, the cancel flag.

A base of :class:`savegame.stores.redis.RedisStore`, split from it by concept.
An entry is one value of the run's ``fx`` hash (see :mod:`savegame.stores.redis._rows`);
every fenced write is one script.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from savegame.errors import NotFoundError
from savegame.model import EffectKind, EffectRecord, EffectStatus
from savegame.stores import _common
from savegame.stores.base import Delivery
from savegame.stores.redis import _rows as rows
from savegame.stores.redis._client import RedisClient


class RedisJournal(RedisClient):
    """``record_intent``, ``record_result``, ``get_effect``, ``list_effects``, ``request_cancel``."""

    def record_intent(self, effect: EffectRecord, *, lease_token: int) -> EffectRecord:
        return self.record_intents([effect], lease_token=lease_token)[0]

    def record_intents(
        self, effects: Sequence[EffectRecord], *, lease_token: int
    ) -> list[EffectRecord]:
        entries = _common.check_intents(effects)
        if not entries:
            return []
        run_id = entries[0].run_id
        pairs = [part for e in entries for part in (e.request_id, rows.entry(e))]
        reply = self._call("record_intent", run_id, str(lease_token), *pairs)
        stored = self._checked(reply, run_id, token=lease_token)[1:]
        return [rows.effect(run_id, e.request_id, s) for e, s in zip(entries, stored, strict=True)]

    def record_result(
        self,
        run_id: str,
        request_id: str,
        *,
        status: EffectStatus,
        result: bytes | None = None,
        error: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        checksum: str,
        lease_token: int | None,
        expect: EffectStatus | None = None,
        expect_checksum: str | None = None,
    ) -> EffectRecord:
        fenced = "" if lease_token is None else str(lease_token)
        current = cast(bytes | None, self._client.hget(self._key("fx", run_id), request_id))
        while True:
            # Optimistic: settle what we read, and write it only if it is still what is stored.
            settled, new = None, b""
            if current is not None:
                settled = _common.settled(
                    rows.effect(run_id, request_id, current), status=status, result=result,
                    error=error, metadata=metadata, checksum=checksum, expect=expect, expect_checksum=expect_checksum,
                )  # fmt: skip
                new = rows.entry(settled)
            reply = self._call("record_result", run_id, fenced, request_id, current or b"", new)
            code = self._checked(reply, run_id, token=lease_token)[0]
            if code == b"nofx":
                raise NotFoundError("effect", f"{run_id}/{request_id}")
            if code == b"retry":
                current = reply[1]
                continue
            assert settled is not None  # "ok" means the stored entry was the one we settled
            return settled

    def get_effect(self, run_id: str, request_id: str) -> EffectRecord:
        data = cast(bytes | None, self._client.hget(self._key("fx", run_id), request_id))
        if data is None:
            raise NotFoundError("effect", f"{run_id}/{request_id}")
        return rows.effect(run_id, request_id, data)

    def list_effects(
        self,
        run_id: str | None = None,
        *,
        kinds: Sequence[EffectKind] | None = None,
        statuses: Sequence[EffectStatus] | None = None,
        request_prefix: str | None = None,
        limit: int = 10_000,
    ) -> list[EffectRecord]:
        """Journal entries oldest first; see :meth:`savegame.stores.base.Store.list_effects`."""
        wanted_kinds = None if kinds is None else {EffectKind(k) for k in kinds}
        wanted_statuses = None if statuses is None else {EffectStatus(s) for s in statuses}
        run_ids = self._ids(self._p + "runs") if run_id is None else [run_id]
        if request_prefix is None:
            journals = self._pipeline(run_ids, "hgetall", "fx")
        else:
            journals = self._prefixed(run_ids, request_prefix)
        found = [
            effect
            for rid, journal in zip(run_ids, journals, strict=True)
            for request_id, data in journal.items()
            for effect in [rows.effect(rid, request_id.decode(), data)]
            if (wanted_kinds is None or effect.kind in wanted_kinds)
            and (wanted_statuses is None or effect.status in wanted_statuses)
        ]
        found.sort(key=_common.effect_order)
        return found[: max(limit, 0)]

    def _prefixed(self, run_ids: list[str], prefix: str) -> list[dict[bytes, bytes]]:
        """Each run's entries whose request ids start with ``prefix``: a lexicographic range
        of the run's ``fxi`` index (byte order, as ``_common.prefix_range`` reads it), then
        those fields of its ``fx`` hash. An id listed but gone (its run deleted between
        the two reads) is left out."""
        bounds = _common.prefix_range(prefix)
        if bounds is None:
            return [{} for _ in run_ids]
        low = b"[" + bounds[0].encode() if bounds[0] else b"-"
        high = b"+" if bounds[1] is None else b"(" + bounds[1].encode()
        ids: list[list[bytes]] = self._pipeline(run_ids, "zrangebylex", "fxi", low, high)
        pipe = self._client.pipeline(transaction=False)
        for rid, found in zip(run_ids, ids, strict=True):
            if found:
                pipe.hmget(self._key("fx", rid), found)
        values = iter(pipe.execute())
        return [
            {k: v for k, v in zip(found, next(values), strict=True) if v is not None}
            if found
            else {}
            for found in ids
        ]

    def deliver_event(self, event: EffectRecord) -> Delivery:
        event = _common.check_event(event)
        reply = self._checked(
            self._call("deliver_event", event.run_id, event.request_id, rows.entry(event)),
            event.run_id,
            token=None,
        )
        if reply[0] == b"dup":
            return Delivery(rows.effect(event.run_id, event.request_id, reply[1]), False)
        return Delivery(event, True)

    def request_cancel(self, run_id: str) -> None:
        self._checked(self._call("request_cancel", run_id), run_id, token=None)
