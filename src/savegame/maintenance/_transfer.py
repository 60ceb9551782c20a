"""Moving runs between stores: ``savegame export`` and ``savegame import``.

Export reads a run's (or a thread's) rows as stored, sealed records included,
so it never needs a key. Import reads and checks the whole file before its
first write: the file's structure and checksums (``_archive``), that the records
hang together (every base, head and blob present), and every record's own check
under the target's storage config, as ``savegame verify`` would: so a file
edited with its checksums recomputed is still refused where a keyring
authenticates the records. It then writes through the Store protocol (create the
run, put its checkpoints and journal under an import lease, restore the row's
checks), which every backend implements; no backend offers one transaction
across those calls, so a write that fails midway deletes the runs it created.

**Two imports of one run.** The import lease names the importing process
(``savegame-import:host:pid:start``) and is renewed every few seconds while the import
writes. A second import of the run is refused while the first is alive; what a dead
one left (killed midway) is replaced: its process is gone (this host: seen at once,
as a dead lease holder is), or it has not renewed for :data:`STALE` seconds (another
host). The replacing import takes the leftover's lease over before deleting it, and
the run it creates again, whose fencing token would start at 1 again, takes its own
lease until the token is past the one the leftover had: a writer of the old run that
is somehow still about (a process frozen past :data:`STALE` on another host) is
refused at its next write. A failed import deletes only the runs it still holds.

**Threads.** A run of the file on a thread the store has, under other runs, is refused
(:class:`ThreadExistsError`): it would join that thread. ``thread=`` imports the file's
runs into another thread, their rows and checkpoint headers (and their checks, keyed
under a keyring) made again for it.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from savegame.codec import (
    check_head,
    open_entry,
    open_record,
    rewrap,
    run_checksum,
    unseal_blob,
    verify_run,
)
from savegame.codec.storage import StorageConfig, resolve
from savegame.errors import (
    DamagedExportError,
    LeaseHeldError,
    NotFoundError,
    RunExistsError,
    ThreadExistsError,
)
from savegame.ids import check_given
from savegame.maintenance import _archive
from savegame.model import (
    CheckpointHeader,
    CheckpointRecord,
    EffectRecord,
    Lease,
    RunInfo,
    RunStatus,
    Waiting,
    utcnow,
)
from savegame.runtime import holder_alive, owner_id
from savegame.stores.base import ALL_EFFECTS, Store

#: Who holds an imported run's lease while it is written (released at the end): this,
#: ``:`` and the importing process (``host:pid:start``). ``resume`` never takes it over
#: (it is no process id of its own), so nobody resumes what a killed import left half
#: written (its journal may lack entries); the next import of the run replaces it.
IMPORTER = "savegame-import"
#: How long: long enough that nobody resumes that leftover in the meantime.
IMPORT_TTL = 30 * 24 * 3600.0
#: An import renews its leases this often while it writes, so an import on another host,
#: whose process cannot be looked at, shows it is alive: one that has not renewed for
#: STALE seconds (24 renewals) is taken for dead, its runs for leftovers.
RENEW_EVERY, STALE = 5.0, 120.0


@dataclass(frozen=True, slots=True)
class TransferReport:
    """What an export wrote or an import loaded."""

    run_ids: tuple[str, ...]
    checkpoints: int
    effects: int
    blobs: int
    bytes: int
    """Size of the export file."""


@dataclass
class _Contents:
    runs: list[RunInfo] = field(default_factory=list)
    records: list[CheckpointRecord] = field(default_factory=list)
    effects: list[EffectRecord] = field(default_factory=list)
    blobs: dict[str, bytes] = field(default_factory=dict)

    def report(self, size: int) -> TransferReport:
        ids = tuple(r.run_id for r in self.runs)
        return TransferReport(ids, len(self.records), len(self.effects), len(self.blobs), size)


# -- export ---------------------------------------------------------------------------


def _runs_named(store: Store, ident: str) -> list[RunInfo]:
    try:
        return [store.get_run(ident)]
    except NotFoundError:
        runs = store.list_runs(thread_id=ident, limit=10_000_000)
        if not runs:
            raise NotFoundError("run or thread", ident) from None
        return sorted(runs, key=lambda r: (r.created_at, r.run_id))


def _read(store: Store, ident: str) -> _Contents:
    got = _Contents(runs=_runs_named(store, ident))
    for run in got.runs:
        headers = sorted(store.list_checkpoints(run.run_id), key=lambda h: h.checkpoint_id)
        got.records.extend(store.get_checkpoint(h.checkpoint_id) for h in headers)
        got.effects.extend(store.list_effects(run.run_id, limit=ALL_EFFECTS))
    ids = {r.checkpoint_id for r in got.records}
    for record in got.records:
        base = record.header.base_id
        if base is not None and base not in ids:
            raise NotFoundError(
                f"base of checkpoint {record.checkpoint_id} among the exported", base
            )
    digests = sorted({d for r in got.records for d in r.header.blobs})
    got.blobs = store.get_blobs(digests)
    missing = [d for d in digests if d not in got.blobs]
    if missing:
        raise NotFoundError("blob", missing[0])
    return got


def export_run(store: Store, ident: str, path: str | os.PathLike[str]) -> TransferReport:
    """Write a run (or every run of a thread) to ``path``, replacing it only when whole."""
    got = _read(store, ident)
    target = Path(path)
    fd, tmp = tempfile.mkstemp(dir=target.parent or ".", prefix=f".{target.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out:
            writer = _archive.Writer(out)
            counts = {k: len(v) for k, v in vars(got).items()}
            writer.write(
                {
                    "type": "header",
                    "format": _archive.FORMAT,
                    "version": _archive.VERSION,
                    "created": utcnow().isoformat(),
                    "counts": counts,
                }
            )
            for run in got.runs:
                writer.write({"type": "run", "row": _archive.to_json(run)})
            for record in got.records:
                writer.write({"type": "checkpoint", "record": _archive.to_json(record)})
            for effect in got.effects:
                writer.write({"type": "effect", "entry": _archive.to_json(effect)})
            for digest, data in got.blobs.items():
                writer.write({"type": "blob", "digest": digest, "data": _archive.encode(data)})
            writer.end()
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return got.report(writer.size)


# -- reading a file back ----------------------------------------------------------------

_KINDS: dict[str, tuple[str, type[Any]]] = {
    "run": ("row", RunInfo),
    "checkpoint": ("record", CheckpointRecord),
    "effect": ("entry", EffectRecord),
}


def _header(index: int, offset: int, obj: dict[str, Any]) -> dict[str, int]:
    if index != 0 or obj.get("type") != "header" or obj.get("format") != _archive.FORMAT:
        raise DamagedExportError(
            "the first record is not an export header", record=index, offset=offset
        )
    version = obj.get("version")
    if version != _archive.VERSION:
        raise DamagedExportError(
            f"format version {version!r}; this savegame reads version {_archive.VERSION}",
            record=index,
            offset=offset,
        )
    counts = obj.get("counts")
    if not isinstance(counts, dict):
        raise DamagedExportError("the header has no counts", record=index, offset=offset)
    return counts


def parse(data: bytes, budget: _archive.Budget | None = None) -> _Contents:
    """Every record of an export file, each decoded into its dataclass; what the frames
    unpack to is charged to ``budget``.

    Raises:
        DamagedExportError: the file is damaged, truncated, or not an export.
    """
    got, counts = _Contents(), None
    for index, offset, obj in _archive.frames(data, budget):
        kind = obj["type"]
        try:
            if counts is None:
                counts = _header(index, offset, obj)
            elif kind == "blob":
                digest, blob = obj.get("digest"), obj.get("data")
                if not isinstance(digest, str) or not isinstance(blob, str) or digest in got.blobs:
                    raise ValueError("a blob needs a digest (once) and data")
                got.blobs[digest] = _archive.decode(bytes, blob)
            elif kind in _KINDS:
                key, cls = _KINDS[kind]
                getattr(
                    got, {"run": "runs", "checkpoint": "records", "effect": "effects"}[kind]
                ).append(_archive.from_json(cls, obj.get(key)))
            else:
                raise ValueError(f"unknown record type {kind!r}")
        except (ValueError, TypeError) as exc:
            raise DamagedExportError(f"{kind}: {exc}", record=index, offset=offset) from None
    if counts is None:
        raise DamagedExportError("the file holds no header")
    found = {k: len(v) for k, v in vars(got).items()}
    if found != counts:
        raise DamagedExportError(f"the header counts {counts}, the file holds {found}")
    return got


# -- checking before the first write ---------------------------------------------------------


def _consistent(got: _Contents) -> None:
    """The records hang together: ids unique, every base, head and blob present."""
    runs = {r.run_id: r for r in got.runs}
    if len(runs) != len(got.runs):
        raise DamagedExportError("a run appears twice")
    by_id: dict[str, CheckpointRecord] = {}
    for record in got.records:
        run = runs.get(record.run_id)
        if run is None or record.header.thread_id != run.thread_id:
            raise DamagedExportError(
                f"checkpoint {record.checkpoint_id} belongs to no run of the file"
            )
        if by_id.setdefault(record.checkpoint_id, record) is not record:
            raise DamagedExportError(f"checkpoint {record.checkpoint_id} appears twice")
    for record in got.records:
        base = record.header.base_id
        if base is not None and (base not in by_id or by_id[base].run_id != record.run_id):
            raise DamagedExportError(
                f"checkpoint {record.checkpoint_id} needs base {base}, not in its run"
            )
        missing = [d for d in record.header.blobs if d not in got.blobs]
        if missing:
            raise DamagedExportError(
                f"checkpoint {record.checkpoint_id} needs blob {missing[0]}, not in the file"
            )
    for run in got.runs:
        head = by_id.get(run.head_checkpoint_id or "")
        if head is None or head.run_id != run.run_id:
            raise DamagedExportError(
                f"run {run.run_id}: its head {run.head_checkpoint_id} is not in the file"
            )
    seen: set[tuple[str, str]] = set()
    for effect in got.effects:
        if effect.run_id not in runs or (effect.run_id, effect.request_id) in seen:
            raise DamagedExportError(
                f"journal entry {effect.run_id}/{effect.request_id} belongs to no run, or appears twice"
            )
        seen.add((effect.run_id, effect.request_id))


def _verified(got: _Contents, config: StorageConfig, budget: _archive.Budget) -> None:
    """Every record's own check, as ``savegame verify`` makes it on a store. A payload or
    blob is zstd inside the file's own frames: each is held to what is left of the file's
    budget by the size its frame states, before it is unpacked."""
    heads = {r.checkpoint_id: r for r in got.records}
    for run in got.runs:
        verify_run(run, config)
        check_head(run, heads[run.head_checkpoint_id or ""])
    for record in got.records:
        budget.take(len(open_record(record, config, limit=max(budget.left, 0))[1]))
    for effect in got.effects:
        open_entry(effect, config)
    for digest, data in got.blobs.items():
        budget.take(len(unseal_blob(digest, data, config, full=True, limit=max(budget.left, 0))))


def _importer(owner: str) -> str | None:
    """The process (``host:pid:start``) behind an import's lease owner; "" for an import
    by an older savegame, which did not name it; None for an owner that is no import."""
    if owner == IMPORTER:
        return ""
    head, _, process = owner.partition(":")
    return process if head == IMPORTER else None


def _left_by_the_dead(lease: Lease) -> bool | None:
    """Whether an import's lease is a leftover: its process is not running (this host), or
    it has not renewed for :data:`STALE` seconds (elsewhere). None: no import's lease."""
    process = _importer(lease.owner)
    if process is None:
        return None
    alive = holder_alive(process)
    if alive is not None:
        return not alive
    return time.time() - (lease.expires_at - IMPORT_TTL) > STALE


def _into_thread(got: _Contents, thread: str, config: StorageConfig) -> _Contents:
    """The file's runs moved to ``thread``: their rows and checkpoint headers name it,
    their checks made again for it (keyed under a keyring; sealed values stay sealed)."""
    runs = [replace(r, thread_id=thread) for r in got.runs]
    return replace(
        got,
        runs=[replace(r, checksum=run_checksum(r, config)) for r in runs],
        records=[rewrap(r, replace(r.header, thread_id=thread), config) for r in got.records],
    )


def check(
    got: _Contents,
    store: Store,
    storage: StorageConfig | None,
    budget: _archive.Budget,
    *,
    thread: str | None = None,
) -> tuple[_Contents, dict[str, Lease]]:
    """Refuse the import before anything is written: damage, forgery, a run that exists
    (or that a live import is writing), or a thread the store has already.

    Returns the contents to write (moved to ``thread`` if given) and the runs a dead
    import left (their leases), for write() to replace.
    """
    config = resolve(storage)
    check_given(thread=thread)
    _consistent(got)
    _verified(got, config, budget)
    if thread is not None:
        got = _into_thread(got, thread, config)
    leftovers: dict[str, Lease] = {}
    for run in got.runs:
        try:
            there = store.get_run(run.run_id)
        except NotFoundError:
            continue
        lease = there.lease
        dead = None if lease is None else _left_by_the_dead(lease)
        if lease is not None and dead:
            leftovers[run.run_id] = lease
            continue
        why = "the export file holds a run with this id"
        if lease is not None and dead is False:
            why = f"another import is writing it ({lease.owner}): import again once it has ended"
        raise RunExistsError(run.run_id, there.status.value, why)
    ours = {r.run_id for r in got.runs}
    for thread, run in {r.thread_id: r for r in got.runs}.items():
        found = store.list_runs(thread_id=thread, limit=len(ours) + 1)
        other = next((r for r in found if r.run_id not in ours), None)
        if other is not None:
            raise ThreadExistsError(thread, other.run_id, run.run_id)
    return got, leftovers


# -- writing -----------------------------------------------------------------------------------


class _Held:
    """The leases an import holds, renewed every :data:`RENEW_EVERY` seconds as it writes
    (a lost one raises LeaseLostError at the next write)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.owner = f"{IMPORTER}:{owner_id()}"
        self.leases: dict[str, Lease] = {}
        self._renewed = time.monotonic()

    def token(self, run_id: str, *, now: bool = False) -> int:
        if now or time.monotonic() - self._renewed >= RENEW_EVERY:
            for held in list(self.leases.values()):
                self.leases[held.run_id] = self.store.renew_lease(
                    held.run_id, held.token, IMPORT_TTL
                )
            self._renewed = time.monotonic()
        return self.leases[run_id].token

    def release(self) -> None:
        """Every lease given up, once every run is whole (a worker may claim one then)."""
        for run_id in list(self.leases):
            self.store.release_lease(run_id, self.leases.pop(run_id).token)

    def mine(self) -> list[str]:
        """The runs still held by this import (another may have replaced one)."""
        found = []
        for run_id in self.leases:
            with contextlib.suppress(NotFoundError):
                lease = self.store.get_run(run_id).lease
                if lease is not None and lease.owner == self.owner:
                    found.append(run_id)
        return found


def _replace(store: Store, run: RunInfo, left: Lease, held: _Held) -> int:
    """Take what a dead import left of ``run`` over and delete it; the fencing token it
    had reached (the run made anew must pass it)."""
    try:
        taken = store.acquire_lease(run.run_id, held.owner, IMPORT_TTL, takeover_token=left.token)
    except LeaseHeldError:  # another import replaced it first, and writes it
        raise RunExistsError(
            run.run_id, run.status.value, "another import took it over: import again later"
        ) from None
    except NotFoundError:
        return left.token
    store.delete_runs([run.run_id])
    return taken.token


def _write_run(
    store: Store,
    run: RunInfo,
    records: Sequence[CheckpointRecord],
    effects: Iterable[EffectRecord],
    blobs: dict[str, bytes],
    held: _Held,
    left: Lease | None,
) -> None:
    def needed(header: CheckpointHeader) -> dict[str, bytes]:
        # Every blob the record names, even one an earlier run of the file brought: the
        # store checks each is present in the record's transaction, and inserts if absent.
        return {d: blobs[d] for d in header.blobs}

    fenced = 0 if left is None else _replace(store, run, left, held)
    first, *rest = records
    lease = store.create_run(
        replace(run, lease=None), first, owner=held.owner, ttl=IMPORT_TTL,
        blobs=needed(first.header),
    )  # fmt: skip
    # A new row's token starts at 1: past the replaced one's, whose writer is then fenced.
    while lease.token <= fenced:
        lease = store.acquire_lease(run.run_id, held.owner, IMPORT_TTL, takeover_token=lease.token)
    held.leases[run.run_id] = lease  # only now: a run someone else created is never deleted
    # The journal before the checkpoints after the first: a run killed midway never has a
    # head further on than the calls it has on record. Until the lease is released at the
    # end, nobody else resumes it, and the next import replaces it.
    for effect in effects:
        store.record_intent(effect, lease_token=held.token(run.run_id))
    for record in rest:
        token = held.token(run.run_id)
        if record.header.status is RunStatus.WAITING:
            # Waiting again for what its metadata says (the store wakes it if that came).
            store.put_checkpoint(
                record, lease_token=token, blobs=needed(record.header),
                waiting=Waiting.from_metadata(record.header.metadata),
            )  # fmt: skip
        else:
            store.put_checkpoint(record, lease_token=token, blobs=needed(record.header))
    held.token(run.run_id, now=True)  # still ours: the row's checks go to our run only
    store.rewrite(runs=[run])  # the row's error and checks exactly as exported
    if run.cancel_requested:
        store.request_cancel(run.run_id)


def _ordered(run: RunInfo, records: Iterable[CheckpointRecord]) -> list[CheckpointRecord]:
    """The run's records oldest first (bases before deltas), its head last (it moves the row)."""
    mine = sorted((r for r in records if r.run_id == run.run_id), key=lambda r: r.checkpoint_id)
    head = next(r for r in mine if r.checkpoint_id == run.head_checkpoint_id)
    return [r for r in mine if r is not head] + [head]


def write(got: _Contents, store: Store, leftovers: Mapping[str, Lease] | None = None) -> None:
    """Load checked contents, replacing what a dead import left of its runs; on a failure
    midway, delete every run this call created and still holds."""
    held = _Held(store)
    try:
        for run in got.runs:
            records = _ordered(run, got.records)
            effects = [e for e in got.effects if e.run_id == run.run_id]
            left = (leftovers or {}).get(run.run_id)
            _write_run(store, run, records, effects, got.blobs, held, left)
        held.release()
    except BaseException:
        # The original failure is what the caller must see, even if the clean-up fails too
        # (a lost connection).
        with contextlib.suppress(Exception):
            store.delete_runs(held.mine())
        raise


def import_run(
    store: Store,
    path: str | os.PathLike[str],
    storage: StorageConfig | None,
    *,
    thread: str | None = None,
) -> TransferReport:
    data = Path(path).read_bytes()
    budget = _archive.Budget(len(data))
    got, leftovers = check(parse(data, budget), store, storage, budget, thread=thread)
    write(got, store, leftovers)
    return got.report(len(data))
