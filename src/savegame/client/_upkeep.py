"""The handle's upkeep: moving runs between stores, retention, verification, re-encryption, sizes."""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime

from savegame import maintenance
from savegame.client._bound import Bound
from savegame.maintenance import (
    Progress,
    PrunePlan,
    RekeyReport,
    RetentionPolicy,
    RetentionRules,
    StoreReport,
    TransferReport,
    VerifyReport,
)


class Upkeep(Bound):
    """Keeping the handle's store small and sound, and moving runs in and out of it."""

    def export(self, ident: str, path: str | os.PathLike[str]) -> TransferReport:
        """Write a run, or every run of a thread, to one portable file at ``path``.

        The file (docs/export.md) holds the run rows, checkpoints, journal entries and
        every blob the checkpoints refer to, as stored: encrypted records stay
        encrypted, so no key is needed. It is versioned and checksummed, and replaces
        ``path`` only once written whole.

        Raises:
            NotFoundError: ``ident`` is neither a run nor a thread.
        """
        with self._using() as s:
            return maintenance.export_run(ident, path, store=s)

    def import_run(
        self, path: str | os.PathLike[str], *, thread: str | None = None
    ) -> TransferReport:
        """Load an export file into the handle's store (any backend); nothing is written
        unless all of it checks.

        Every record is checked first: the file's own checksums, then each record's check
        under the handle's storage settings (its keyring authenticates encrypted exports,
        as :meth:`verify` does). A write that fails midway deletes the runs the import
        created. What a killed import left is replaced; a run another import is writing is
        refused.

        Args:
            thread: import the file's runs into this thread (a new one) instead of their own.

        Raises:
            DamagedExportError: the file is damaged, truncated or not an export (which record,
                where), or unpacks to more than its growth budget (a decompression bomb).
            CorruptRecordError: a record fails its own check (edited, or under other keys), or
                a payload or blob inside it states more than is left of that budget.
            EncryptionKeyError: the records need a key the keyring does not hold.
            RunExistsError: the store has a run with an id the file holds, or another import
                (alive) is writing it.
            ThreadExistsError: the store has the thread of one of the file's runs, with other
                runs: import it with ``thread=``.
        """
        with self._using() as s:
            return maintenance.import_run(path, store=s, storage=self.storage, thread=thread)

    def prune(
        self,
        policy: RetentionPolicy,
        *,
        dry_run: bool = False,
        now: datetime | None = None,
        batch_size: int = 500,
        rules: Mapping[str, RetentionRules] | None = None,
    ) -> PrunePlan:
        """Apply ``policy``: delete the checkpoints and runs it lets go, then unreferenced blobs.

        Args:
            policy: what to keep.
            dry_run: only report what would go.
            now: the time the rules count from (default: now).
            batch_size: checkpoints deleted per store call; each call is short, and a
                prune stopped between two leaves every remaining checkpoint loadable.
            rules: per ``FOREIGN`` workflow, its framework's retention (LangGraph's:
                ``savegame.integrations.langgraph.retention()``); runs of a workflow
                without rules are left alone and listed in ``skipped``.

        Raises:
            ConfigurationError: ``batch_size`` is below 1.
        """
        with self._using() as s:
            return maintenance.prune(
                policy, store=s, dry_run=dry_run, now=now, batch_size=batch_size, rules=rules
            )

    def verify(
        self, *, run_id: str | None = None, progress: Progress | None = None
    ) -> VerifyReport:
        """Check every checkpoint, blob and journal entry (of one run, or all); report damage by id."""
        with self._using() as s:
            return maintenance.verify(
                store=s, run_id=run_id, storage=self.storage, progress=progress
            )

    def stats(self, *, thread_id: str | None = None, limit: int = 50) -> StoreReport:
        """Store totals and storage per run, largest first."""
        with self._using() as s:
            return maintenance.stats(store=s, thread_id=thread_id, limit=limit)

    def rekey(
        self,
        *,
        run_id: str | None = None,
        progress: Progress | None = None,
        adopt: bool = False,
    ) -> RekeyReport:
        """Re-encrypt every payload, blob, journal entry and run row under the keyring's active
        key, and rename blobs to digests keyed by it (see :mod:`savegame.maintenance._reencrypt`).

        ``adopt``: also sign records that carry no authentication (a plain store being
        encrypted, records of an older savegame); rekey vouches for what it signs.
        """
        with self._using() as s:
            return maintenance.rekey(
                store=s, run_id=run_id, storage=self.storage, progress=progress, adopt=adopt
            )
