"""Checking a store and re-encrypting it: ``savegame verify`` and ``savegame rekey``.

Both walk every run's checkpoints, their blobs and their journal. Verification
opens each record with its checksum or authentication tag and follows each
delta to its keyframe; it reports damage by id and changes nothing. Re-keying
seals every payload, blob and journal value again under the keyring's active
key (plaintext records too, which is how a store starts being encrypted), in
batches through ``Store.rewrite``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace

from savegame.codec import blobs as blobcodec
from savegame.codec import envelope
from savegame.codec.journal import opened as open_effect
from savegame.codec.journal import sealed as seal_effect
from savegame.codec.storage import StorageConfig, resolve
from savegame.errors import ConfigurationError, EncryptionKeyError, NotFoundError, SavegameError
from savegame.model import CheckpointRecord, RunInfo
from savegame.stores.base import ALL_EFFECTS, Store

Progress = Callable[[int, int], None]
"""Called with (runs done, runs in all)."""

BATCH = 200


@dataclass(frozen=True, slots=True)
class Damage:
    kind: str
    """checkpoint, blob or effect."""
    ident: str
    run_id: str
    reason: str


@dataclass
class VerifyReport:
    runs: int = 0
    checkpoints: int = 0
    blobs: int = 0
    effects: int = 0
    damaged: list[Damage] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.damaged


def _runs(store: Store, run_id: str | None) -> list[RunInfo]:
    return [store.get_run(run_id)] if run_id is not None else store.list_runs(limit=10_000_000)


def verify(
    store: Store,
    *,
    run_id: str | None = None,
    storage: StorageConfig | None = None,
    progress: Progress | None = None,
) -> VerifyReport:
    """Check every record of the store (or of one run); report damage, change nothing."""
    config = resolve(storage)
    report = VerifyReport()
    runs = _runs(store, run_id)
    for done, run in enumerate(runs, start=1):
        report.runs += 1
        digests: set[str] = set()
        for header in store.list_checkpoints(run.run_id):
            report.checkpoints += 1
            try:
                record = store.get_checkpoint(header.checkpoint_id)
                envelope.open_record(record, config)
                if header.base_id is not None:
                    store.get_chain(header.checkpoint_id)  # every base down to the keyframe
            except SavegameError as exc:
                report.damaged.append(
                    Damage("checkpoint", header.checkpoint_id, run.run_id, str(exc))
                )
                continue
            digests.update(header.blobs)
        stored = store.get_blobs(sorted(digests)) if digests else {}
        for digest in sorted(digests):
            report.blobs += 1
            if digest not in stored:
                report.damaged.append(Damage("blob", digest, run.run_id, "missing"))
                continue
            try:
                blobcodec.unseal(digest, stored[digest], config, full=True)
            except EncryptionKeyError:
                raise
            except SavegameError as exc:
                report.damaged.append(Damage("blob", digest, run.run_id, str(exc)))
        for effect in store.list_effects(run.run_id, limit=ALL_EFFECTS):
            report.effects += 1
            try:
                open_effect(effect, config)
            except EncryptionKeyError:
                raise
            except SavegameError as exc:
                report.damaged.append(
                    Damage("effect", f"{effect.run_id}/{effect.request_id}", run.run_id, str(exc))
                )
        if progress is not None:
            progress(done, len(runs))
    return report


@dataclass
class RekeyReport:
    runs: int = 0
    checkpoints: int = 0
    blobs: int = 0
    effects: int = 0
    key_id: str = ""


def _batches(items: list[CheckpointRecord]) -> Iterator[list[CheckpointRecord]]:
    for start in range(0, len(items), BATCH):
        yield items[start : start + BATCH]


def rekey(
    store: Store,
    *,
    storage: StorageConfig | None = None,
    run_id: str | None = None,
    progress: Progress | None = None,
) -> RekeyReport:
    """Seal every payload, blob, journal value and sensitive metadata value (in checkpoint
    headers and run rows) again under the active key.

    The keyring must still hold every key the store was written with (old keys
    read, the active one writes). Plaintext records are read and encrypted.
    Run it while no process writes to the runs it re-keys.

    Raises:
        ConfigurationError: no keyring is configured.
        CorruptRecordError: a record fails its check (nothing of that batch is rewritten).
    """
    config = resolve(storage)
    if config.keyring is None:
        raise ConfigurationError(
            "rekey needs a keyring (SAVEGAME_KEYS or storage=StorageConfig(keyring=...))"
        )
    reader = replace(config, accept_plaintext=True)
    report = RekeyReport(key_id=config.keyring.active)
    runs = _runs(store, run_id)
    for done, run in enumerate(runs, start=1):
        report.runs += 1
        records: list[CheckpointRecord] = []
        digests: set[str] = set()
        for header in store.list_checkpoints(run.run_id):
            record = store.get_checkpoint(header.checkpoint_id)
            if record.header.format_version < 2:
                continue  # format 1 has no envelope to seal; it loads as it is (see docs)
            is_delta, body = envelope.open_record(record, reader)
            header = envelope.reseal_metadata(record.header, reader, config)
            fresh = envelope.seal(
                header,
                body,
                delta=is_delta,
                storage=config,
            )
            # Same identity: payload, checksum, size and the resealed metadata change.
            records.append(
                replace(
                    fresh,
                    header=replace(
                        record.header, size=fresh.header.size, metadata=fresh.header.metadata
                    ),
                )
            )
            digests.update(header.blobs)
        for batch in _batches(records):
            store.rewrite(records=batch)
        report.checkpoints += len(records)
        if digests:
            stored = store.get_blobs(sorted(digests))
            missing = digests - stored.keys()
            if missing:
                raise NotFoundError("blob", sorted(missing)[0])
            resealed = {
                # full: a blob under another's name must not get sealed as if it were sound.
                name: blobcodec.seal(name, blobcodec.unseal(name, data, reader, full=True), config)
                for name, data in stored.items()
            }
            store.rewrite(blobs=resealed)
            report.blobs += len(resealed)
        # The run row keeps a copy of the first checkpoint's metadata, sealed values too.
        run_metadata = envelope.reseal_run_metadata(run.run_id, run.metadata, reader, config)
        if run_metadata != dict(run.metadata):
            store.rewrite(runs={run.run_id: run_metadata})
        effects = [
            seal_effect(open_effect(e, reader), config)
            for e in store.list_effects(run.run_id, limit=ALL_EFFECTS)
        ]
        if effects:
            store.rewrite(effects=effects)
            report.effects += len(effects)
        if progress is not None:
            progress(done, len(runs))
    return report
