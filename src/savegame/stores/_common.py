"""Helpers every backend shares, so the backends agree on edge cases.

Time, JSON, metadata filters and the journal's write rules are where backends
drift apart silently (a float that loses a microsecond, ``True`` matching
``1``, which entry a second intent keeps), so their rules live here once and
every backend calls them.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta, timezone
from typing import Any, TypeGuard, TypeVar

import orjson

from savegame.errors import (
    ConflictError,
    CorruptRecordError,
    EffectSettledError,
    LeaseHeldError,
    MissingBlobsError,
    SerializationError,
    ThreadBusyError,
)
from savegame.model import (
    CheckpointHeader,
    CheckpointRecord,
    EffectKind,
    EffectRecord,
    EffectStatus,
    RunInfo,
    RunStatus,
    Waiting,
    evolve,
    evolver,
)
from savegame.stores.base import Put, RunPosition, RunSize

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MICROSECOND = timedelta(microseconds=1)

Scalar = str | int | float | bool | None
"""A metadata filter value: only top-level scalars can be compared for equality."""


def to_micros(value: datetime) -> int:
    """Integer microseconds since the epoch: exact, unlike an epoch float.

    Raises:
        ValueError: ``value`` is naive (the model keeps timezone-aware UTC datetimes).
    """
    check_aware(value)
    return (value - _EPOCH) // _MICROSECOND


E = TypeVar("E", bound=enum.Enum)


def member(kind: type[E], value: Any) -> E:
    """``kind(value)``, without the enum's call for a member already (what the runtime
    and the integrations pass): the call checks a plain string, and a put or a journal
    entry made it for every status and kind it wrote.

    Raises:
        ValueError: ``value`` is no value of ``kind``.
    """
    return value if type(value) is kind else kind(value)


def check_aware(value: datetime) -> None:
    """:func:`to_micros`'s check alone, for a store that keeps the datetime itself.

    Raises:
        ValueError: ``value`` is naive (the model keeps timezone-aware UTC datetimes).
    """
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"naive datetime {value!r}: savegame stores timezone-aware datetimes")


def from_micros(micros: int) -> datetime:
    """The UTC datetime of :func:`to_micros`; round trips compare equal."""
    return _EPOCH + timedelta(microseconds=micros)


def json_dumps(value: Any, what: str) -> bytes:
    """Serialize metadata or usage to JSON, naming ``what`` when it is not JSON data.

    Raises:
        SerializationError: the value holds something JSON cannot carry.
    """
    try:
        return orjson.dumps(value)
    except TypeError as exc:  # orjson.JSONEncodeError is a TypeError
        raise SerializationError(what, f"not JSON-compatible: {exc}") from exc


def json_loads(data: bytes | str | None) -> Any:
    return None if data is None else orjson.loads(data)


def detach(metadata: Mapping[str, Any], what: str = "metadata") -> dict[str, Any]:
    """A private JSON-normalised copy, so an in-memory store behaves like a real one.

    The caller may mutate its dict after a write; a persistent store would not see
    that, so neither may the memory store. Normalising through JSON also turns
    tuples into lists exactly as a round trip through SQLite would.
    """
    if not metadata and type(metadata) is dict:
        return {}  # what the round trip gives, for most records' metadata
    copy: dict[str, Any] = orjson.loads(json_dumps(dict(metadata), what))
    return copy


def check_filter(metadata: Mapping[str, Any] | None) -> dict[str, Scalar]:
    """Validate a ``list_checkpoints`` metadata filter.

    Raises:
        ValueError: a value is not a scalar (lists and objects cannot be compared).
    """
    if not metadata:
        return {}
    out: dict[str, Scalar] = {}
    for key, value in metadata.items():
        if not isinstance(key, str):
            raise ValueError(f"metadata filter keys must be strings, not {key!r}")
        if value is not None and not isinstance(value, (str, int, float, bool)):
            raise ValueError(
                f"metadata filter {key!r}: only scalar values (str, int, float, bool, None) "
                f"can be matched, not {type(value).__qualname__}"
            )
        out[key] = value
    return out


def scalar_matches(present: bool, actual: Any, expected: Scalar) -> bool:
    """Equality with JSON types kept apart: ``True`` never matches ``1``, ``"1"`` never ``1``.

    ``None`` matches a key that is present with a JSON null, not a missing key.
    """
    if not present:
        return False
    if expected is None:
        return actual is None
    if isinstance(expected, bool):
        return isinstance(actual, bool) and actual is expected
    if isinstance(expected, (int, float)):
        return (
            isinstance(actual, (int, float)) and not isinstance(actual, bool) and actual == expected
        )
    return isinstance(actual, str) and actual == expected


def matches(metadata: Mapping[str, Any], wanted: Mapping[str, Scalar]) -> bool:
    return all(scalar_matches(k in metadata, metadata.get(k), v) for k, v in wanted.items())


def check_ttl(ttl: float) -> float:
    """Raises ValueError for a negative or non-finite lease duration."""
    if not math.isfinite(ttl) or ttl < 0:
        raise ValueError(f"lease ttl must be a finite number of seconds >= 0, not {ttl!r}")
    return float(ttl)


def check_lease_free(
    run_id: str,
    holder: str | None,
    token: int,
    expires_at: float | None,
    now: float,
    takeover_token: int | None,
) -> None:
    """``acquire_lease``'s rule: a run may be taken unless another holder's lease is live.

    A lease with no holder or no expiry is free, and so is a live one whose token the
    caller names (``takeover_token``: it proved that holder dead).

    Raises:
        LeaseHeldError: the lease is held and live, and not the one the caller names.
    """
    if (
        holder is not None
        and expires_at is not None
        and expires_at > now
        and takeover_token != token
    ):
        raise LeaseHeldError(run_id, holder, expires_at - now)


def check_first(run_id: str, thread_id: str, first_run_id: str, first_thread_id: str) -> None:
    """The first checkpoint of a run must belong to that run and thread.

    Raises:
        ValueError: it names another run or thread (a caller bug, not a conflict).
    """
    if first_run_id != run_id or first_thread_id != thread_id:
        raise ValueError(
            f"first checkpoint belongs to run {first_run_id} / thread {first_thread_id}, "
            f"not run {run_id} / thread {thread_id}"
        )


def detached_effect(effect: EffectRecord) -> EffectRecord:
    """A copy sharing nothing mutable with the caller, normalised as SQLite stores it.

    Every backend refuses the same inputs this way (a naive datetime, metadata
    that is not JSON data) and returns the same values (JSON-normalised metadata).

    Raises:
        ValueError: a naive datetime.
        SerializationError: metadata that is not JSON data.
    """
    check_aware(effect.created_at)
    if effect.completed_at is not None:
        check_aware(effect.completed_at)
    # evolve, not dataclasses.replace: a LangGraph task write is an entry, so this runs
    # for every write of every step.
    return evolve(
        effect,
        kind=member(EffectKind, effect.kind),
        status=member(EffectStatus, effect.status),
        arguments=bytes(effect.arguments),
        result=None if effect.result is None else bytes(effect.result),
        metadata=detach(effect.metadata, "effect.metadata"),
    )


def check_intents(effects: Sequence[EffectRecord]) -> list[EffectRecord]:
    """Entries journaled together (``record_intents``) must belong to one run; detached.

    Raises:
        ValueError: they name several runs (a caller bug, not a conflict).
    """
    runs = sorted({effect.run_id for effect in effects})
    if len(runs) > 1:
        raise ValueError(f"record_intents journals the entries of one run, not of runs {runs}")
    return [detached_effect(e) for e in effects]


def check_effects(
    run_id: str, effects: Sequence[EffectRecord], *, copies: bool = True
) -> list[EffectRecord]:
    """Effects given with a checkpoint must belong to its run; detached.

    ``copies=False`` is for a store that only builds each entry's row from it
    (``effect_values``) and keeps nothing of it (the SQL stores' ``CheckedPut``): an
    entry :func:`detached_effect` would give back equal, but for its metadata's private
    copy, is given back itself. Its row then makes the checks the copy made (a naive
    datetime, metadata that is not JSON data): ``to_micros`` and ``json_dumps`` raise the
    same errors, before the put's transaction or in it (then the put is refused alone:
    it rolls back, in its savepoint or its own transaction). A LangGraph task write is
    an entry: the copy and the metadata's JSON round trip were 3 % of its saver's time.

    Raises:
        ValueError: one names another run (a caller bug, not a conflict).
    """
    for effect in effects:
        if effect.run_id != run_id:
            raise ValueError(
                f"effect {effect.request_id} belongs to run {effect.run_id}, "
                f"not to the checkpoint's run {run_id}"
            )
    if copies:
        return [detached_effect(e) for e in effects]
    return [e if _as_detached(e) else detached_effect(e) for e in effects]


def _as_detached(effect: EffectRecord) -> bool:
    """Whether ``effect``'s fields are of the types :func:`detached_effect` gives (its
    members, exact bytes, a dict of metadata), so its row is the copy's row."""
    result = effect.result
    return (
        type(effect.kind) is EffectKind
        and type(effect.status) is EffectStatus
        and type(effect.arguments) is bytes
        and (result is None or type(result) is bytes)
        and type(effect.metadata) is dict
    )


def keeps(existing: EffectRecord | None) -> TypeGuard[EffectRecord]:
    """Whether the journal keeps ``existing`` rather than a new intent for its request id.

    Insert-if-absent is what makes a re-executed step get its recorded result
    back; NOT_DONE is the one exception, because a person declared that call
    never happened, so the next execution must journal (and make) it afresh.
    """
    return existing is not None and existing.status is not EffectStatus.NOT_DONE


def settled(
    current: EffectRecord,
    *,
    status: EffectStatus,
    result: bytes | None,
    error: str | None,
    metadata: Mapping[str, Any] | None,
    checksum: str,
    expect: EffectStatus | None = None,
    expect_checksum: str | None = None,
) -> EffectRecord:
    """``current`` after ``record_result``: the outcome set, completed now, metadata merged.

    Metadata is a shallow update: a key given replaces that top-level key whole,
    keys not given stay (a decision's ``by`` and ``reason`` join the tool's flags).

    Raises:
        SerializationError: ``metadata`` is not JSON data.
        EffectSettledError: ``expect`` is given and ``current`` is in another status, or
            ``expect_checksum`` is given and ``current`` carries another check.
    """
    if expect is not None and current.status is not expect:
        raise EffectSettledError(
            current.run_id, current.request_id, current.status.value, EffectStatus(expect).value
        )
    if expect_checksum is not None and current.checksum != expect_checksum:
        raise EffectSettledError(
            current.run_id, current.request_id, current.status.value, "as read",
            why="changed since it was read (re-encrypted by rekey, or settled)",
        )  # fmt: skip
    return replace(
        current,
        status=EffectStatus(status),
        result=None if result is None else bytes(result),
        error=error,
        metadata={**current.metadata, **detach(metadata or {}, "effect.metadata")},
        completed_at=datetime.now(timezone.utc),
        checksum=checksum,
    )


def effect_order(effect: EffectRecord) -> tuple[int, str]:
    """The journal's listing order: oldest first, ties broken by request id."""
    return to_micros(effect.created_at), effect.request_id


def prefix_range(prefix: str) -> tuple[str, str | None] | None:
    """The request ids starting with ``prefix`` as a half-open range ``[low, high)``.

    In code point order, which is UTF-8 byte order: SQLite's BINARY collation,
    PostgreSQL's ``"C"`` and Redis's lexicographic ranges all compare that way, so
    one range serves every index, and a ``%`` or ``_`` is never a pattern. ``high``
    None: no upper end (a prefix of only U+10FFFF). None: no storable id starts with
    ``prefix`` (a lone surrogate has no UTF-8 form).
    """
    try:
        prefix.encode()
    except UnicodeEncodeError:
        return None
    head = prefix
    while head:
        last = ord(head[-1]) + 1
        if last <= 0x10FFFF:
            # No stored id holds a surrogate, so the one after U+D7FF is U+E000.
            return prefix, head[:-1] + chr(0xE000 if 0xD800 <= last <= 0xDFFF else last)
        head = head[:-1]
    return prefix, None


# -- storage engine ---------------------------------------------------------------
# Every put detaches its record's header: a copy of the two fields that hold containers.
_detach_header = evolver(CheckpointHeader, "metadata", "blobs")

MAX_CHAIN = 10_000
"""The longest base chain ``get_chain`` follows; longer is a cycle or damage, never a real chain."""


def chain_too_long(checkpoint_id: str) -> CorruptRecordError:
    """The error for a base chain that loops (or exceeds :data:`MAX_CHAIN`)."""
    return CorruptRecordError(
        checkpoint_id, f"its base chain is longer than {MAX_CHAIN} records (a cycle?)"
    )


def header_blobs(header: CheckpointHeader) -> tuple[str, ...]:
    """``header.blobs`` as the tuple every backend returns, order and duplicates kept.

    Raises:
        ValueError: a digest is not a string.
    """
    for digest in header.blobs:
        if not isinstance(digest, str):
            raise ValueError(
                f"checkpoint {header.checkpoint_id}: blob digests must be strings, not {digest!r}"
            )
    return tuple(header.blobs)


def check_blobs(blobs: Mapping[str, bytes] | None) -> dict[str, bytes]:
    """A private copy of the blobs given with a checkpoint or to ``rewrite``.

    Raises:
        ValueError: a digest that is not a string or content that is not bytes.
    """
    out: dict[str, bytes] = {}
    for digest, data in (blobs or {}).items():
        if not isinstance(digest, str):
            raise ValueError(f"blob digests must be strings, not {digest!r}")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise ValueError(f"blob {digest}: content must be bytes, not {type(data).__qualname__}")
        out[digest] = bytes(data)
    return out


def detached_record(record: CheckpointRecord) -> CheckpointRecord:
    """A copy sharing nothing mutable with the caller, normalised as SQLite stores it.

    Raises:
        ValueError: a naive datetime, or a blob digest that is not a string.
        SerializationError: metadata that is not JSON data.
    """
    header = record.header
    check_aware(header.created_at)
    if header.expires_at is not None:
        check_aware(header.expires_at)
    # The record built, not evolved: its three fields are all given (evolve's keyword
    # call cost twice the constructor's positional one).
    return CheckpointRecord(
        _detach_header(header, detach(header.metadata), header_blobs(header)),
        bytes(record.payload),
        record.checksum,
    )


def unique(ids: Sequence[str]) -> list[str]:
    """``ids`` without repeats, in first-seen order (a repeated id is deleted or read once)."""
    return list(dict.fromkeys(ids))


def rewritten_record(stored: tuple[str, str], new: CheckpointRecord) -> CheckpointRecord:
    """The stored checkpoint after ``rewrite``: ``new`` whole (header, payload, checksum).

    ``stored``: the (run_id, thread_id) the checkpoint belongs to now.

    Raises:
        ValueError: ``new`` names another run or thread.
    """
    if (new.run_id, new.header.thread_id) != tuple(stored):
        raise ValueError(
            f"rewrite of checkpoint {new.checkpoint_id} names run {new.run_id} / thread "
            f"{new.header.thread_id}, not its own run {stored[0]} / thread {stored[1]}"
        )
    return detached_record(new)


def rewritten_effect(current: EffectRecord, new: EffectRecord) -> EffectRecord:
    """``current`` after ``rewrite``: arguments, result, error, metadata and checksum from
    ``new``; its identity, kind, position, status and times stay."""
    return replace(
        current,
        arguments=bytes(new.arguments),
        result=None if new.result is None else bytes(new.result),
        error=new.error,
        metadata=detach(new.metadata, "effect.metadata"),
        checksum=new.checksum,
    )


def rewritten_run(current: RunInfo, new: RunInfo) -> RunInfo:
    """``current`` after ``rewrite``: metadata, error and checksum from ``new``."""
    return replace(
        current,
        metadata=detach(new.metadata, "run.metadata"),
        error=new.error,
        checksum=new.checksum,
    )


def effect_bytes(effect: EffectRecord) -> int:
    """What an entry weighs in ``run_sizes``: its arguments plus its result."""
    return len(effect.arguments) + len(effect.result or b"")


def size_order(size: RunSize) -> tuple[int, str]:
    """``run_sizes`` order: largest payload first, ties by run id ascending."""
    return -size.payload_bytes, size.run_id


# -- blob references and the fleet queue --------------------------------------------
CLAIMABLE = ("queued", "running")

#: A thread's runs that keep a new ``sole`` run off it (``create_run``).
UNFINISHED = tuple(s.value for s in RunStatus if not s.finished)


def check_sole(
    first: CheckpointRecord, *, busy: tuple[str, str] | None, newest: str | None
) -> None:
    """``create_run(sole=True)``'s rule, given what the store read inside its transaction:
    ``busy`` (run id, status) of an unfinished run of the thread, ``newest`` the thread's
    newest checkpoint id."""
    thread = first.header.thread_id
    if busy is not None:
        raise ThreadBusyError(thread, busy[0], busy[1])
    if newest != first.header.parent_id:
        raise ConflictError(
            f"thread {thread} moved on while run {first.run_id} was set up (its newest "
            f"checkpoint is {newest}, not {first.header.parent_id}): start it again"
        )


"""The run statuses ``claim_run`` takes: submitted and not started, or started by a worker that may be gone."""


def blobs_to_check(header: CheckpointHeader, given: Mapping[str, bytes]) -> list[str]:
    """The digests ``header`` names that the write does not bring itself, each once.

    Only these need a look-up in the transaction: the rest arrive with the record.
    """
    if not header.blobs:
        return []  # most deltas
    return [d for d in unique(header_blobs(header)) if d not in given]


def missing_blob_error(checkpoint_id: str, missing: Sequence[str]) -> MissingBlobsError:
    """The error for a record that names blobs neither given nor stored (a concurrent
    collection may have removed one the caller believed present: re-send it)."""
    return MissingBlobsError(checkpoint_id, sorted(missing))


def check_workflows(workflows: Sequence[str] | None, what: str = "workflows") -> list[str] | None:
    """``claim_run``'s workflow (or, ``what="versions"``, code version) filter as a list
    (None: any; empty: none).

    Raises:
        ValueError: a bare string, which would otherwise be read as its characters.
    """
    if workflows is None:
        return None
    if isinstance(workflows, str):
        raise ValueError(f"{what} must be a sequence of names, not the string {workflows!r}")
    return [str(name) for name in workflows]


def run_wanted(
    info: RunInfo,
    *,
    thread_id: str | None,
    status: str | None,
    workflow: str | None,
    search: str | None,
    before: RunPosition | None,
) -> bool:
    """Whether ``list_runs`` with these filters lists ``info``: the rule the SQL
    statement writes as its WHERE, for the backends that filter in Python."""
    if before is not None and (info.created_at, info.run_id) >= (before.created_at, before.run_id):
        return False
    if search is not None:
        needle = search.lower()
        if needle not in info.run_id.lower() and needle not in info.thread_id.lower():
            return False
    return (
        (thread_id is None or info.thread_id == thread_id)
        and (status is None or info.status.value == status)
        and (workflow is None or info.workflow == workflow)
    )


# -- waiting runs and events -----------------------------------------------------------
WOKEN_MICROS = 0
"""``wake_at`` of a run whose events have arrived (:data:`savegame.model.WOKEN`)."""


def check_waiting(
    run_id: str, status: RunStatus, waiting: Waiting | None
) -> tuple[int | None, list[str], int]:
    """``put_checkpoint``'s ``waiting`` as the row keeps it: (wake_at micros, topics, need);
    (None, [], 0) for a record that is not waiting.

    Raises:
        ValueError: ``waiting`` given for another status, or missing for status waiting,
            or a ``need`` out of range.
    """
    if member(RunStatus, status) is not RunStatus.WAITING:
        if waiting is not None:
            raise ValueError(f"run {run_id}: waiting= given for a {status} checkpoint")
        return None, [], 0
    if waiting is None:
        raise ValueError(f"run {run_id}: a waiting checkpoint needs waiting=")
    topics = unique([str(t) for t in waiting.topics])
    if not 0 <= waiting.need <= len(topics):
        raise ValueError(
            f"run {run_id}: waiting for {waiting.need} of {len(topics)} topics is not possible"
        )
    until = None if waiting.until is None else to_micros(waiting.until)
    return until, topics, waiting.need


def check_event(event: EffectRecord) -> EffectRecord:
    """A detached copy of an event entry to deliver.

    Raises:
        ValueError: the entry is not a pending event.
    """
    if EffectKind(event.kind) is not EffectKind.EVENT or (
        EffectStatus(event.status) is not EffectStatus.PENDING
    ):
        raise ValueError(
            f"{event.run_id}/{event.request_id}: only pending event entries are delivered, "
            f"not a {event.kind} entry {event.status}"
        )
    return detached_effect(event)


def is_pending_event(effect: EffectRecord) -> bool:
    return effect.kind is EffectKind.EVENT and effect.status is EffectStatus.PENDING


def ready(topics: Sequence[str], need: int, pending: Collection[str]) -> bool:
    """Whether a run waiting for ``need`` of ``topics`` wakes, ``pending`` being the topics
    that have a pending event in its journal."""
    return need > 0 and sum(1 for t in topics if t in pending) >= need


@dataclass(frozen=True, slots=True)
class CheckedPut:
    """A ``put_checkpoint``'s arguments checked before its transaction (SQL stores)."""

    record: CheckpointRecord
    lease_token: int
    error: str | None
    journal: list[EffectRecord]
    """Entries to build rows from, not to keep (``check_effects``' ``copies=False``)."""
    blobs: dict[str, bytes]
    waiting: Waiting | None
    wait: tuple[int | None, list[str], int]
    """``waiting`` as the row keeps it (see :func:`check_waiting`)."""
    events: list[EffectRecord]

    @classmethod
    def of(cls, put: Put) -> CheckedPut:
        """Check ``put``.

        Raises:
            ValueError: as ``check_effects``, ``check_blobs``, ``check_waiting`` and
                ``check_event`` do.
        """
        header = put.record.header
        return cls(
            put.record,
            put.lease_token,
            put.error,
            # Rows only (see check_effects): no copy of an entry already as it is stored.
            check_effects(header.run_id, put.effects, copies=False),
            check_blobs(put.blobs),
            put.waiting,
            check_waiting(header.run_id, header.status, put.waiting),
            [check_event(e) for e in put.events],
        )
