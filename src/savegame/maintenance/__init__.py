"""Keeping a store small and sound: retention, verification, re-encryption, sizes.

The public functions take ``store=`` as a Store or URL, like the rest of the API.
Where things are::

    _retention.py     RetentionPolicy, plan and prune (what may go, in which order;
                      a FOREIGN workflow's runs by its framework's rules)
    _integrity.py     verify: every record's check, reported by id
    _reencrypt.py     rekey: every record sealed again under the active key
    _archive.py       the export file: frames, checks, records as JSON by their fields
    _transfer.py      export_run and import_run: read, check everything, then write
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from savegame.codec.storage import StorageConfig
from savegame.maintenance import _integrity, _reencrypt, _transfer
from savegame.maintenance._integrity import Damage, Progress, VerifyReport
from savegame.maintenance._reencrypt import RekeyReport
from savegame.maintenance._retention import (
    FOREIGN,
    ForeignRun,
    PrunePlan,
    RetentionPolicy,
    RetentionRules,
    Verdict,
    prune,
)
from savegame.maintenance._transfer import TransferReport
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


def export_run(
    ident: str, path: str | os.PathLike[str], *, store: Store | str | None = None
) -> TransferReport:
    """Write a run, or every run of a thread, to one portable file at ``path``.

    The file (docs/export.md) holds the run rows, checkpoints, journal entries and
    every blob the checkpoints refer to, as stored: encrypted records stay
    encrypted, so no key is needed. It is versioned and checksummed, and replaces
    ``path`` only once written whole.

    Raises:
        NotFoundError: ``ident`` is neither a run nor a thread.
    """
    with opened_store(store) as handle:
        return _transfer.export_run(handle, ident, path)


def import_run(
    path: str | os.PathLike[str],
    *,
    store: Store | str | None = None,
    storage: StorageConfig | None = None,
    thread: str | None = None,
) -> TransferReport:
    """Load an export file into ``store`` (any backend); nothing is written unless all of
    it checks.

    Every record is checked first: the file's own checksums, then each record's check
    under ``storage`` (its keyring authenticates encrypted exports, as ``verify`` does).
    A write that fails midway deletes the runs the import created. What a killed import
    left is replaced; a run another import is writing is refused.

    Args:
        thread: import the file's runs into this thread (a new one) instead of their own.

    Raises:
        DamagedExportError: the file is damaged, truncated or not an export (which record,
            where), or unpacks to more than its growth budget (a decompression bomb).
        CorruptRecordError: a record fails its own check (edited, or under other keys), or
            a payload or blob inside it states more than is left of that budget.
        EncryptionKeyError: the records need a key ``storage`` does not hold.
        RunExistsError: the store has a run with an id the file holds, or another import
            (alive) is writing it.
        ThreadExistsError: the store has the thread of one of the file's runs, with other
            runs: import it with ``thread=``.
    """
    with opened_store(store) as handle:
        return _transfer.import_run(handle, path, storage, thread=thread)


__all__ = [
    "FOREIGN",
    "Damage",
    "ForeignRun",
    "Progress",
    "PrunePlan",
    "RekeyReport",
    "RetentionPolicy",
    "RetentionRules",
    "StoreReport",
    "TransferReport",
    "Verdict",
    "VerifyReport",
    "export_run",
    "import_run",
    "prune",
    "rekey",
    "stats",
    "verify",
]
