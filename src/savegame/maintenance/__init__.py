"""Keeping a store small and sound: retention, verification, re-encryption, sizes.

The public functions take ``store=`` as a Store or URL, like the rest of the API.
Where things are::

    _retention.py     RetentionPolicy, plan and prune (what may go, in which order)
    _integrity.py     verify: every record's check, reported by id
    _reencrypt.py     rekey: every record sealed again under the active key
"""

from __future__ import annotations

from dataclasses import dataclass

from savegame.codec.storage import StorageConfig
from savegame.maintenance import _integrity, _reencrypt
from savegame.maintenance._integrity import Damage, Progress, VerifyReport
from savegame.maintenance._reencrypt import RekeyReport
from savegame.maintenance._retention import PrunePlan, RetentionPolicy, prune
from savegame.stores import opened_store
from savegame.stores.base import RunSize, Store, StoreStats


def verify(
    *,
    store: Store | str | None = None,
    run_id: str | None = None,
    storage: StorageConfig | None = None,
    progress: Progress | None = None,
) -> VerifyReport:
    """Check every checkpoint, blob and journal entry (of one run, or all); report damage by id."""
    with opened_store(store, create=False) as handle:
        return _integrity.verify(handle, run_id=run_id, storage=storage, progress=progress)


def rekey(
    *,
    store: Store | str | None = None,
    run_id: str | None = None,
    storage: StorageConfig | None = None,
    progress: Progress | None = None,
    adopt: bool = False,
) -> RekeyReport:
    """Re-encrypt every payload, blob, journal entry and run row under the keyring's active
    key, and rename blobs to digests keyed by it (see :mod:`savegame.maintenance._reencrypt`).

    ``adopt``: also sign records that carry no authentication (a plain store being
    encrypted, records of an older savegame); rekey vouches for what it signs.
    """
    with opened_store(store, create=False) as handle:
        return _reencrypt.rekey(
            handle, storage=storage, run_id=run_id, progress=progress, adopt=adopt
        )


@dataclass(frozen=True, slots=True)
class StoreReport:
    """``savegame stats``: totals and the largest runs."""

    totals: StoreStats
    runs: list[RunSize]


def stats(
    *, store: Store | str | None = None, thread_id: str | None = None, limit: int = 50
) -> StoreReport:
    """Store totals and storage per run, largest first."""
    with opened_store(store, create=False) as handle:
        return StoreReport(handle.stats(), handle.run_sizes(thread_id=thread_id, limit=limit))


__all__ = [
    "Damage",
    "PrunePlan",
    "RekeyReport",
    "RetentionPolicy",
    "StoreReport",
    "VerifyReport",
    "prune",
    "rekey",
    "stats",
    "verify",
]
