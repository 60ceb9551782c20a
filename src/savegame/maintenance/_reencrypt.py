"""Re-encrypting a store: ``savegame rekey``.

Every record is sealed again under the keyring's active key: checkpoint
payloads, blobs, journal values and checks, run rows' metadata, error texts
and checks.

Blobs are renamed as well: each gets the digest its plaintext has under the
active key. A plain store's blob names are unkeyed digests of their content,
so anyone who guesses a document could confirm it is stored; after rekey no
name is derived from the plaintext alone, or from a retired key. Renaming a
blob changes every record that refers to it (and a pack's content when its
items refer to blobs, so its name too); the renamed blobs are stored before
the records that name them, and the old ones, unreferenced once every record
has moved, are collected at the end.

What rekey signs, it vouches for. So it reads strictly, like a load under the
keyring: a record without the authentication the keys require (plaintext, a
checkpoint of format 1-3, a journal entry with an unkeyed check, a run row
without a keyed one) is refused, because anyone with write access to the
database could have written it. ``adopt=True`` (``savegame rekey --adopt``)
signs such records as they are: for a plain store being encrypted, or a store
written by savegame before it authenticated them, after checking it (``savegame
verify``) and while nobody else can write to the database.

Each run is read whole and checked before any of it is written, under the
run's lease, so a live owner is never rekeyed under: a damaged run, a run
being executed, or unauthenticated records without ``adopt`` leave that run as
it was, reported in ``RekeyReport.skipped``, and rekey goes on with the next.
A rekey killed midway leaves records under old names and new ones side by
side, all loadable; run it again.
"""

from __future__ import annotations

import functools
from collections import ChainMap
from collections.abc import Callable, Iterator, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TypeVar

import orjson

from savegame.codec import (
    Renamed,
    Renamer,
    known_blobs,
    open_entry,
    open_record,
    reseal_metadata,
    reseal_run,
    seal_entry,
    seal_record,
    unlisted_files,
    unseal_blob,
)
from savegame.codec.storage import StorageConfig, resolve
from savegame.errors import (
    ConfigurationError,
    CorruptRecordError,
    EncryptionKeyError,
    LeaseHeldError,
    NotFoundError,
    SavegameError,
    UnauthenticatedRecordError,
)
from savegame.maintenance._integrity import Progress, runs_of
from savegame.maintenance._rekey_schedules import rekey_schedules
from savegame.model import CheckpointRecord, EffectRecord, RunInfo
from savegame.runtime import DEFAULT_TTL, acquire_lease
from savegame.stores.base import ALL_EFFECTS, Store

BATCH = 200
T = TypeVar("T")

#: Plaintext digests of the arguments that journal entries before format 2 kept in
#: their metadata; replay compares the (decrypted) arguments instead, so rekey drops them.
_LEGACY_DIGESTS = ("called_with", "approved_as")


@dataclass(frozen=True, slots=True)
class Skipped:
    """A run rekey left as it was, and why."""

    run_id: str
    reason: str


@dataclass
class RekeyReport:
    runs: int = 0
    """Runs rewritten."""
    checkpoints: int = 0
    blobs: int = 0
    """Blobs stored under their new names."""
    effects: int = 0
    schedules: int = 0
    """Schedule rows signed again (a whole-store rekey only)."""
    key_id: str = ""
    collected: int = 0
    """Old blobs no record refers to any more, deleted at the end."""
    adopted: int = 0
    """Records signed that carried no authentication (only with ``adopt``)."""
    skipped: list[Skipped] = field(default_factory=list)
    """Runs left as they were: damaged, being executed, or unauthenticated without ``adopt``."""


@dataclass
class _Plan:
    """One run, read whole and sealed again, not yet written."""

    records: list[CheckpointRecord]
    blobs: dict[str, bytes]
    effects: list[EffectRecord]
    run: RunInfo
    adopted: int
    memo: MutableMapping[tuple[str, bool], Renamed]


def _batches(items: Sequence[T]) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), BATCH):
        yield items[start : start + BATCH]


def rekey(
    store: Store,
    *,
    storage: StorageConfig | None = None,
    run_id: str | None = None,
    progress: Progress | None = None,
    adopt: bool = False,
) -> RekeyReport:
    """Seal every record of the store (or of one run) again under the active key.

    The keyring must still hold every key the store was written with (old keys
    read, the active one writes). ``adopt``: also sign records that carry no
    authentication (see the module docstring); without it they are refused.

    Raises:
        ConfigurationError: no keyring is configured.
        EncryptionKeyError: a record needs a key the keyring lacks (nothing of that
            run was written; add the key and run rekey again).
    """
    config = resolve(storage)
    if config.keyring is None:
        raise ConfigurationError(
            "rekey needs a keyring (SAVEGAME_KEYS or storage=StorageConfig(keyring=...))"
        )
    report = RekeyReport(key_id=config.keyring.active)
    memo: dict[tuple[str, bool], Renamed] = {}
    runs = runs_of(store, run_id)
    for done, run in enumerate(runs, start=1):
        _rekey_run(store, run, config, adopt, memo, report)
        if progress is not None:
            progress(done, len(runs))
    if run_id is None:
        signed, adopted = rekey_schedules(
            store, config, adopt, lambda name, why: report.skipped.append(Skipped(name, why))
        )
        report.schedules += signed
        report.adopted += adopted
    report.collected, _ = store.delete_unreferenced_blobs()
    # This process's cache of blobs known to be stored names some that are gone now.
    known_blobs.forget(store)
    return report


def _rekey_run(
    store: Store,
    run: RunInfo,
    config: StorageConfig,
    adopt: bool,
    memo: dict[tuple[str, bool], Renamed],
    report: RekeyReport,
) -> None:
    try:
        lease = acquire_lease(store, run.run_id, ttl=DEFAULT_TTL)
    except LeaseHeldError as exc:
        report.skipped.append(Skipped(run.run_id, f"{exc}; rekey it again when it stops"))
        return
    try:
        try:
            plan = _plan(store, store.get_run(run.run_id), config, adopt, memo)
        except EncryptionKeyError:
            raise
        except SavegameError as exc:
            report.skipped.append(Skipped(run.run_id, str(exc)))
            return
        # The renamed blobs first: a record must never name a blob that is not stored.
        if plan.blobs:
            store.rewrite(blobs=plan.blobs)
        for batch in _batches(plan.records):
            store.rewrite(records=batch)
        store.rewrite(runs=[plan.run])
        for effect_batch in _batches(plan.effects):
            store.rewrite(effects=effect_batch)
    finally:
        store.release_lease(run.run_id, lease.token)
    # Its renames are only shared with later runs once its blobs are stored.
    memo.update(plan.memo)
    report.runs += 1
    report.checkpoints += len(plan.records)
    report.blobs += len(plan.blobs)
    report.effects += len(plan.effects)
    report.adopted += plan.adopted


class _Reader:
    """Reads strictly, and leniently only what ``adopt`` allows, counting what it adopted."""

    def __init__(self, config: StorageConfig, adopt: bool) -> None:
        self.strict, self.lenient = config, replace(config, accept_plaintext=True)
        self.adopt, self.adopted = adopt, 0

    def __call__(self, read: Callable[[StorageConfig], T]) -> T:
        try:
            return read(self.strict)
        except UnauthenticatedRecordError:
            if not self.adopt:
                raise
            self.adopted += 1
            return read(self.lenient)


def _plan(
    store: Store,
    run: RunInfo,
    writer: StorageConfig,
    adopt: bool,
    shared: dict[tuple[str, bool], Renamed],
) -> _Plan:
    """One run's records, blobs, journal and row, read, checked and sealed again."""
    read = _Reader(writer, adopt)
    fresh_run = read(functools.partial(reseal_run, run, writer=writer))
    records = [store.get_checkpoint(h.checkpoint_id) for h in store.list_checkpoints(run.run_id)]
    opened = [read(functools.partial(open_record, record)) for record in records]
    # A fork's first record written before savegame listed its workspace files names
    # them in its (authenticated) body only: renamed and listed here like the others,
    # or the collection at the end would take them under their old names.
    listed = [
        (*r.header.blobs, *unlisted_files(r, body, writer))
        for r, (_, body) in zip(records, opened, strict=True)
    ]
    names = sorted({name for blobs in listed for name in blobs})
    stored = store.get_blobs(names) if names else {}
    missing = set(names) - stored.keys()
    if missing:
        raise NotFoundError("blob", sorted(missing)[0])

    def plain(name: str) -> bytes:
        # full: a blob under another's name must not get sealed as if it were sound.
        return read(functools.partial(unseal_blob, name, stored[name], full=True))

    # This run's renames over the ones runs before it stored: merged only if it is written.
    memo = ChainMap[tuple[str, bool], Renamed]({}, shared)
    out: dict[str, bytes] = {}
    renamer = Renamer(plain, writer, memo, out)
    fresh = [
        _record(record, body, blobs, read, renamer, writer)
        for record, body, blobs in zip(records, opened, listed, strict=True)
    ]
    effects = [
        read(functools.partial(_effect, e, writer=writer))
        for e in store.list_effects(run.run_id, limit=ALL_EFFECTS)
    ]
    return _Plan(fresh, out, effects, fresh_run, read.adopted, memo.maps[0])


def _record(
    record: CheckpointRecord,
    opened: tuple[bool, bytes],
    blobs: tuple[str, ...],
    read: _Reader,
    renamer: Renamer,
    writer: StorageConfig,
) -> CheckpointRecord:
    """``opened``: the record opened; ``blobs``: what it refers to (its header's list,
    and workspace files its body names that the list lacks)."""
    is_delta, body = opened
    if record.header.format_version < 2:
        is_delta = False  # a format-1 payload is the state's canonical JSON: a keyframe body
    header = read(functools.partial(reseal_metadata, record.header, writer=writer))
    if blobs:
        tree, old, new = renamer.rename(orjson.loads(body), record.checkpoint_id)
        if old != set(blobs):
            raise CorruptRecordError(
                record.checkpoint_id,
                "its body refers to other blobs than its header lists; rekey left its run alone",
            )
        body = orjson.dumps(tree, option=orjson.OPT_SORT_KEYS)
        header = replace(header, blobs=tuple(sorted(new)))
    return seal_record(header, body, delta=is_delta, storage=writer)


def _effect(effect: EffectRecord, reader: StorageConfig, writer: StorageConfig) -> EffectRecord:
    plain = open_entry(effect, reader)
    metadata = {k: v for k, v in plain.metadata.items() if k not in _LEGACY_DIGESTS}
    return seal_entry(replace(plain, metadata=metadata), writer)
