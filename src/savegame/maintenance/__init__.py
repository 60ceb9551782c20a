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
from savegame.maintenance import _archive, _integrity, _reencrypt, _transfer
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
from savegame.stores.base import RunSize, Store, StoreStats


def verify(
    *,
    store: Store,
    run_id: str | None = None,
    storage: StorageConfig | None = None,
    progress: Progress | None = None,
) -> VerifyReport:
    """Check every checkpoint, blob and journal entry (of one run, or all); report damage by
    id.

    The operation behind :meth:`savegame.Savegame.verify`, which documents it, on the open
    ``store``.
    """
    return _integrity.verify(store, run_id=run_id, storage=storage, progress=progress)


def rekey(
    *,
    store: Store,
    run_id: str | None = None,
    storage: StorageConfig | None = None,
    progress: Progress | None = None,
    adopt: bool = False,
) -> RekeyReport:
    """Re-encrypt every payload, blob, journal entry and run row under the keyring's active
    key, and rename blobs to digests keyed by it (see
    :mod:`savegame.maintenance._reencrypt`).

    The operation behind :meth:`savegame.Savegame.rekey`, which documents it, on the open
    ``store``.
    """
    return _reencrypt.rekey(store, storage=storage, run_id=run_id, progress=progress, adopt=adopt)


@dataclass(frozen=True, slots=True)
class StoreReport:
    """``savegame stats``: totals and the largest runs."""

    totals: StoreStats
    runs: list[RunSize]


def stats(*, store: Store, thread_id: str | None = None, limit: int = 50) -> StoreReport:
    """Store totals and storage per run, largest first.

    The operation behind :meth:`savegame.Savegame.stats`, which documents it, on the open
    ``store``.
    """
    return StoreReport(store.stats(), store.run_sizes(thread_id=thread_id, limit=limit))


def export_run(ident: str, path: str | os.PathLike[str], *, store: Store) -> TransferReport:
    """Write a run, or every run of a thread, to one portable file at ``path``.

    The operation behind :meth:`savegame.Savegame.export`, which documents it, on the open
    ``store``.
    """
    return _transfer.export_run(store, ident, path)


def is_export(path: str | os.PathLike[str]) -> bool:
    """Whether the file at ``path`` starts as an export file does (its magic), so a folder of
    them can hold a README beside them; whether it is whole is for :func:`import_run`."""
    with open(path, "rb") as given:
        return given.read(len(_archive.MAGIC)) == _archive.MAGIC


def import_run(
    path: str | os.PathLike[str],
    *,
    store: Store,
    storage: StorageConfig | None = None,
    thread: str | None = None,
) -> TransferReport:
    """Load an export file into ``store`` (any backend); nothing is written unless all of it
    checks.

    The operation behind :meth:`savegame.Savegame.import_run`, which documents it, on the
    open ``store``.
    """
    return _transfer.import_run(store, path, storage, thread=thread)


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
    "is_export",
    "prune",
    "rekey",
    "stats",
    "verify",
]
