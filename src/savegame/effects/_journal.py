"""A run's journal as one execution sees it: loaded once, written through to the store."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from savegame.codec import open_entry, seal_entry
from savegame.codec.storage import StorageConfig
from savegame.effects._prompts import parts_of
from savegame.model import EffectKind, EffectRecord, EffectStatus, utcnow
from savegame.stores.base import ALL_EFFECTS, Store


class Journal:
    """In-memory index of a run's effects plus the store writes that keep it durable.

    Read results are buffered and saved with the next checkpoint (same
    transaction); write intents/results, model responses, durable reads and
    interrupts are committed at once because a crash must not lose them (and
    the reads buffered before them with them).

    Entries are kept twice: as stored (values encrypted when a keyring is
    configured) and opened (plaintext values, what ``get`` returns), so a
    settle re-uses the stored arguments instead of encrypting them again.
    """

    def __init__(
        self,
        store: Store,
        run_id: str,
        lease_token: int,
        entries: list[EffectRecord],
        *,
        storage: StorageConfig | None = None,
    ) -> None:
        self._store = store
        self.run_id = run_id
        self._token = lease_token
        self.storage = storage
        self._stored = {entry.request_id: entry for entry in entries}
        self._by_id = {entry.request_id: open_entry(entry, storage) for entry in entries}
        self._buffered: list[EffectRecord] = []
        self._parts: set[str] | None = None

    def _keep(self, stored: EffectRecord) -> EffectRecord:
        self._stored[stored.request_id] = stored
        view = open_entry(stored, self.storage)
        self._by_id[stored.request_id] = view
        if self._parts is not None:
            self._parts.update(parts_of(view))
        return view

    def parts(self) -> set[str]:
        """The digests of the prompt parts this journal's model calls hold in full
        (:mod:`savegame.effects._prompts`); read from the entries once, then kept up."""
        if self._parts is None:
            self._parts = set()
            for entry in self._by_id.values():
                self._parts.update(parts_of(entry))
        return self._parts

    @property
    def store(self) -> Store:
        return self._store

    def fetch(self, kinds: Sequence[EffectKind]) -> list[EffectRecord]:
        """The run's entries of ``kinds`` as the store holds them now, verified, opened and
        kept: entries written by others since the journal was loaded (events sent to the
        run) join it, in the store's order."""
        found = self._store.list_effects(self.run_id, kinds=kinds, limit=ALL_EFFECTS)
        return [self._keep(entry) for entry in found]

    def get(self, request_id: str) -> EffectRecord | None:
        return self._by_id.get(request_id)

    def entries(self) -> list[EffectRecord]:
        """Every entry, verified and opened, in the order the store listed them."""
        return list(self._by_id.values())

    def intent(self, effect: EffectRecord) -> EffectRecord:
        """Commit ``effect`` (insert-if-absent) and return what the store holds.

        Reads buffered for the next checkpoint are committed first: a write (or
        an interrupt, or a model call) may depend on what they returned, and if
        the process dies before the checkpoint, the re-executed step must see
        the same values, or the replayed write would no longer match.
        """
        for read in self.take_buffered():
            self._keep(self._store.record_intent(read, lease_token=self._token))
        stored = self._store.record_intent(
            seal_entry(effect, self.storage), lease_token=self._token
        )
        return self._keep(stored)

    def settle(
        self,
        effect: EffectRecord,
        status: EffectStatus,
        *,
        result: bytes | None = None,
        error: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        fenced: bool = True,
        expect: EffectStatus | None = None,
    ) -> EffectRecord:
        """Commit the outcome of a journaled call (``expect``: only if it is still in
        that status; else EffectSettledError and nothing is written)."""
        current = self._stored.get(effect.request_id, effect)
        done = seal_entry(
            replace(
                current,
                status=status,
                result=result,
                error=error,
                metadata={**effect.metadata, **(metadata or {})},
                completed_at=utcnow(),
            ),
            self.storage,
        )
        stored = self._store.record_result(
            effect.run_id,
            effect.request_id,
            status=status,
            result=done.result,
            error=done.error,
            metadata=metadata,
            checksum=done.checksum,
            lease_token=self._token if fenced else None,
            expect=expect,
            expect_checksum=current.checksum or None,
        )
        return self._keep(stored)

    def buffer(self, effect: EffectRecord) -> None:
        """Keep a read's result for the next checkpoint's transaction."""
        entry = seal_entry(replace(effect, completed_at=utcnow()), self.storage)
        self._keep(entry)
        self._buffered.append(entry)

    def take_buffered(self) -> list[EffectRecord]:
        taken, self._buffered = self._buffered, []
        return taken
