"""Re-encrypting a store: ``savegame rekey``.

Every record is sealed again under the keyring's active key: checkpoint
payloads (plaintext and older formats too, which is how a store starts being
encrypted, and how records written before format 4 get their headers
authenticated), blobs, journal values and checks, run rows' metadata, error
texts and checks.

Blobs are renamed as well: each gets the digest its plaintext has under the
active key. A plain store's blob names are unkeyed digests of their content,
so anyone who guesses a document could confirm it is stored; after rekey no
name is derived from the plaintext alone, or from a retired key. Renaming a
blob changes every record that refers to it (and a pack's content when its
items refer to blobs, so its name too); the renamed blobs are stored before
the records that name them, and the old ones, unreferenced once every record
has moved, are collected at the end. A rekey killed midway leaves records
under old names and new ones side by side, all loadable; run it again.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

import orjson

from savegame.codec import blobs as blobcodec
from savegame.codec import envelope
from savegame.codec.journal import opened as open_effect
from savegame.codec.journal import sealed as seal_effect
from savegame.codec.storage import StorageConfig, resolve
from savegame.errors import ConfigurationError, CorruptRecordError, NotFoundError
from savegame.maintenance.integrity import Progress, runs_of
from savegame.model import CheckpointRecord, EffectRecord
from savegame.stores.base import ALL_EFFECTS, Store

BATCH = 200
T = TypeVar("T")

#: Plaintext digests of the arguments that journal entries before format 2 kept in
#: their metadata; replay compares the (decrypted) arguments instead, so rekey drops them.
_LEGACY_DIGESTS = ("called_with", "approved_as")


@dataclass
class RekeyReport:
    runs: int = 0
    checkpoints: int = 0
    blobs: int = 0
    """Blobs stored under their new names."""
    effects: int = 0
    key_id: str = ""
    collected: int = 0
    """Old blobs no record refers to any more, deleted at the end."""


def _batches(items: Sequence[T]) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), BATCH):
        yield items[start : start + BATCH]


def rekey(
    store: Store,
    *,
    storage: StorageConfig | None = None,
    run_id: str | None = None,
    progress: Progress | None = None,
) -> RekeyReport:
    """Seal every record of the store (or of one run) again under the active key.

    The keyring must still hold every key the store was written with (old keys
    read, the active one writes). Plaintext records are read and encrypted.
    Run it while no process writes to the runs it re-keys.

    Raises:
        ConfigurationError: no keyring is configured.
        CorruptRecordError: a record fails its check (that run's records stay as they were).
        NotFoundError: a blob a record refers to is missing.
    """
    config = resolve(storage)
    if config.keyring is None:
        raise ConfigurationError(
            "rekey needs a keyring (SAVEGAME_KEYS or storage=StorageConfig(keyring=...))"
        )
    reader = replace(config, accept_plaintext=True)
    report = RekeyReport(key_id=config.keyring.active)
    memo: dict[tuple[str, bool], blobcodec.Renamed] = {}
    runs = runs_of(store, run_id)
    for done, run in enumerate(runs, start=1):
        report.runs += 1
        records = [
            store.get_checkpoint(h.checkpoint_id) for h in store.list_checkpoints(run.run_id)
        ]
        fresh, new_blobs = _records(store, records, reader, config, memo)
        # The renamed blobs first: a record must never name a blob that is not stored.
        if new_blobs:
            store.rewrite(blobs=new_blobs)
            report.blobs += len(new_blobs)
        for batch in _batches(fresh):
            store.rewrite(records=batch)
        report.checkpoints += len(fresh)
        store.rewrite(runs=[envelope.reseal_run(run, reader, config)])
        effects = [
            _effect(e, reader, config) for e in store.list_effects(run.run_id, limit=ALL_EFFECTS)
        ]
        for effect_batch in _batches(effects):
            store.rewrite(effects=effect_batch)
        report.effects += len(effects)
        if progress is not None:
            progress(done, len(runs))
    report.collected, _ = store.delete_unreferenced_blobs()
    # This process's cache of blobs known to be stored names some that are gone now.
    blobcodec.known.forget(store)
    return report


def _records(
    store: Store,
    records: list[CheckpointRecord],
    reader: StorageConfig,
    writer: StorageConfig,
    memo: dict[tuple[str, bool], blobcodec.Renamed],
) -> tuple[list[CheckpointRecord], dict[str, bytes]]:
    """One run's records sealed again under ``writer``, their blobs renamed, and the blobs
    to store for them (sealed, by new name)."""
    names = sorted({name for record in records for name in record.header.blobs})
    stored = store.get_blobs(names) if names else {}
    missing = set(names) - stored.keys()
    if missing:
        raise NotFoundError("blob", sorted(missing)[0])

    def plain(name: str) -> bytes:
        # full: a blob under another's name must not get sealed as if it were sound.
        return blobcodec.unseal(name, stored[name], reader, full=True)

    out: dict[str, bytes] = {}
    renamer = blobcodec.Renamer(plain, writer, memo, out)
    fresh = []
    for record in records:
        if record.header.format_version < 2:
            # A format-1 payload is the state's canonical JSON: a keyframe body as it is.
            is_delta, body = False, envelope.open_record(record, reader)[1]
        else:
            is_delta, body = envelope.open_record(record, reader)
        header = envelope.reseal_metadata(record.header, reader, writer)
        if header.blobs:
            tree, old, new = renamer.rename(orjson.loads(body), record.checkpoint_id)
            if old != set(header.blobs):
                raise CorruptRecordError(
                    record.checkpoint_id,
                    "its body refers to other blobs than its header lists; rekey left it alone",
                )
            body = orjson.dumps(tree, option=orjson.OPT_SORT_KEYS)
            header = replace(header, blobs=tuple(sorted(new)))
        fresh.append(envelope.seal(header, body, delta=is_delta, storage=writer))
    return fresh, out


def _effect(effect: EffectRecord, reader: StorageConfig, writer: StorageConfig) -> EffectRecord:
    plain = open_effect(effect, reader)
    metadata = {k: v for k, v in plain.metadata.items() if k not in _LEGACY_DIGESTS}
    return seal_effect(replace(plain, metadata=metadata), writer)
