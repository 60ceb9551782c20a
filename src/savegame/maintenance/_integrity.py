"""Checking a store: ``savegame verify``.

It walks every run: its row's check, its checkpoints (each opened with its
checksum or authentication tag, each delta followed to its keyframe), their
blobs (every digest recomputed) and its journal. It reports damage by id and
changes nothing. With a keyring, records without the authentication it
requires (plaintext, or written before their headers were authenticated) are
reported too: ``savegame rekey`` (:mod:`savegame.maintenance._reencrypt`) rewrites them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from savegame.codec import (
    check_head,
    open_entry,
    open_record,
    unlisted_files,
    unseal_blob,
    verify_run,
    verify_schedule,
)
from savegame.codec.storage import StorageConfig, resolve
from savegame.errors import EncryptionKeyError, SavegameError
from savegame.model import RunInfo
from savegame.stores.base import ALL_EFFECTS, Store
from savegame.stores.schedules import schedules_of

Progress = Callable[[int, int], None]
"""Called with (runs done, runs in all)."""


@dataclass(frozen=True, slots=True)
class Damage:
    kind: str
    """run, checkpoint, blob, effect or schedule (whose ``run_id`` is empty)."""
    ident: str
    run_id: str
    reason: str


@dataclass
class VerifyReport:
    runs: int = 0
    checkpoints: int = 0
    blobs: int = 0
    effects: int = 0
    schedules: int = 0
    """Schedule rows checked (a whole-store verify only)."""
    damaged: list[Damage] = field(default_factory=list)
    missing_keys: dict[str, str] = field(default_factory=dict)
    """Key ids the keyring lacks -> the first record that needs it: not checked, not damage
    (add the key). A key id no key could have (empty, not text) is reported as damage."""

    @property
    def ok(self) -> bool:
        return not self.damaged and not self.missing_keys


def _plausible(key_id: str) -> bool:
    """Whether a key id could name a key (``Keyring`` refuses the others)."""
    return bool(key_id) and key_id.isprintable() and not any(c in key_id for c in ",: \t")


def runs_of(store: Store, run_id: str | None) -> list[RunInfo]:
    """The run named, or every run of the store."""
    return [store.get_run(run_id)] if run_id is not None else store.list_runs(limit=10_000_000)


def verify(
    store: Store,
    *,
    run_id: str | None = None,
    storage: StorageConfig | None = None,
    progress: Progress | None = None,
) -> VerifyReport:
    """Check every record of the store (or of one run); report damage, change nothing.

    A record that needs a key the keyring lacks is a setup problem, not damage: it is
    listed in ``missing_keys`` and the scan goes on (a forged key id must not stop it).
    """
    config = resolve(storage)
    report = VerifyReport()
    runs = runs_of(store, run_id)
    for done, run in enumerate(runs, start=1):
        report.runs += 1
        _verify_run(store, run, config, report)
        if progress is not None:
            progress(done, len(runs))
    if run_id is None and store.capabilities.schedules:
        _verify_schedules(store, config, report)
    return report


def _verify_schedules(store: Store, config: StorageConfig, report: VerifyReport) -> None:
    """Each schedule row's check (what decides what a worker starts)."""
    for row in schedules_of(store).list_schedules():
        report.schedules += 1
        try:
            verify_schedule(row, config)
        except EncryptionKeyError as exc:
            if not _plausible(exc.key_id):
                report.damaged.append(Damage("schedule", row.name, "", str(exc)))
            else:
                report.missing_keys.setdefault(exc.key_id, exc.record_id)
        except SavegameError as exc:
            report.damaged.append(Damage("schedule", row.name, "", str(exc)))


def _verify_run(store: Store, run: RunInfo, config: StorageConfig, report: VerifyReport) -> None:
    def damaged(kind: str, ident: str, exc: SavegameError) -> None:
        if isinstance(exc, EncryptionKeyError) and _plausible(exc.key_id):
            report.missing_keys.setdefault(exc.key_id, exc.record_id)
            return
        report.damaged.append(Damage(kind, ident, run.run_id, str(exc)))

    try:
        verify_run(run, config)
        check_head(run, store.latest_checkpoint(run.run_id))
    except SavegameError as exc:
        damaged("run", run.run_id, exc)  # and go on: what else of the run is damaged?
    try:
        headers = store.list_checkpoints(run.run_id)
    except SavegameError as exc:
        damaged("run", run.run_id, exc)
        headers = []
    digests: set[str] = set()
    for header in headers:
        report.checkpoints += 1
        try:
            record = store.get_checkpoint(header.checkpoint_id)
            _, body = open_record(record, config)
            if header.base_id is not None:
                store.get_chain(header.checkpoint_id)  # every base down to the keyframe
            unlisted = unlisted_files(record, body, config)
        except SavegameError as exc:
            damaged("checkpoint", header.checkpoint_id, exc)
            continue
        digests.update(header.blobs, unlisted)
        if unlisted:
            why = (
                f"its workspace refers to blob {unlisted[0]}, which its header does not list: "
                "export, prune and rekey do not see it (a fork written before savegame listed them)"
            )
            report.damaged.append(Damage("checkpoint", header.checkpoint_id, run.run_id, why))
    stored = store.get_blobs(sorted(digests)) if digests else {}
    for digest in sorted(digests):
        report.blobs += 1
        if digest not in stored:
            report.damaged.append(Damage("blob", digest, run.run_id, "missing"))
            continue
        try:
            unseal_blob(digest, stored[digest], config, full=True)
        except SavegameError as exc:
            damaged("blob", digest, exc)
    try:
        effects = store.list_effects(run.run_id, limit=ALL_EFFECTS)
    except SavegameError as exc:
        damaged("run", run.run_id, exc)
        return
    for effect in effects:
        report.effects += 1
        try:
            open_entry(effect, config)
        except SavegameError as exc:
            damaged("effect", f"{effect.run_id}/{effect.request_id}", exc)
