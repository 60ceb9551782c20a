"""Records: what a checkpoint, a run and a lease are, as frozen data.

``Checkpoint`` is the decoded, user-facing view. ``CheckpointRecord`` is what a
store keeps: the same header plus the encoded state as bytes, so stores never
import the codec and listing a history never decodes a state.
"""

from __future__ import annotations

import enum
import reprlib
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from datetime import datetime, timezone
from typing import Any, TypeVar

#: Version of the stored checkpoint layout. Bump it with a migration path when the
#: record layout or the payload encoding changes; old versions must keep loading.
#: 1: the payload is the canonical JSON of the full state.
#: 2: the payload is an envelope (savegame.codec._envelope): keyframe or delta
#:    against ``base_id``, optionally compressed and encrypted, large values in blobs.
#: 3: as 2, and a keyframe may hold packed lists (savegame.codec._packs). Only records
#:    that do are stamped 3, so a reader of version 2 still reads the others.
#: 4: as 3, and the checksum (or the AES-GCM associated data) covers every header
#:    field (``next``, status, step, node, usage, metadata, times, parent), so an
#:    edited header is refused like a damaged payload. Every record is stamped 4.
FORMAT_VERSION = 4

R = TypeVar("R")
K = TypeVar("K", bound=type)
_ABRIDGED = reprlib.Repr()


class RunStatus(str, enum.Enum):
    """Where a run is in its life."""

    QUEUED = "queued"
    """Submitted for a worker fleet; no process has started it yet."""
    RUNNING = "running"
    INTERRUPTED = "interrupted"
    """Paused on purpose (an approval, ``ctx.interrupt``); no process is held."""
    WAITING = "waiting"
    """Waiting for a timer, an event or child runs (``ctx.sleep``, ``ctx.wait_for``,
    ``ctx.run_child``); no process is held. The store wakes it when its time comes or
    what it waits for arrives; then a worker (or ``resume``) continues it."""
    NEEDS_ATTENTION = "needs_attention"
    """Stopped on an in-doubt effect a person must settle (``savegame resolve``)."""
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    COMPENSATING = "compensating"
    """Undoing completed write effects; resumable if the process dies."""
    COMPENSATED = "compensated"
    COMPENSATION_FAILED = "compensation_failed"

    @property
    def finished(self) -> bool:
        """True when the run cannot be resumed (a failed run can: resume retries the step)."""
        return self in (
            RunStatus.COMPLETED,
            RunStatus.CANCELLED,
            RunStatus.COMPENSATED,
            RunStatus.COMPENSATION_FAILED,
        )

    def __str__(self) -> str:
        return self.value


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


WOKEN = datetime(1970, 1, 1, tzinfo=timezone.utc)
"""``RunInfo.wake_at`` of a waiting run whose events have arrived: before any clock's now."""


@dataclass(frozen=True, slots=True)
class Waiting:
    """What a run checkpointed ``waiting`` waits for, as its store keeps it.

    The store wakes the run (makes it claimable) when ``until`` passes, or at once when
    ``need`` of ``topics`` have an event pending in its journal (``need`` 0: no event
    wakes it).
    """

    until: datetime | None = None
    """Wake at this time (a sleep's end, a wait's timeout); None: only events wake it."""
    topics: tuple[str, ...] = ()
    """The event topics (names of pending ``event`` entries) the run waits for."""
    need: int = 0
    """How many of ``topics`` must have an event for the run to wake."""

    @classmethod
    def from_metadata(cls, metadata: Mapping[str, Any]) -> Waiting:
        """What a waiting checkpoint's metadata (``to_metadata``, under ``"waiting"``) says
        it waits for: how an exported run is put back waiting."""
        data = metadata.get("waiting")
        data = data if isinstance(data, Mapping) else {}
        until = data.get("until")
        topics = data.get("topics")
        topics = tuple(str(t) for t in topics) if isinstance(topics, list) else ()
        need = data.get("need")
        return cls(
            until=datetime.fromisoformat(until) if isinstance(until, str) else None,
            topics=topics,
            need=need if isinstance(need, int) and 0 <= need <= len(topics) else len(topics),
        )

    def to_metadata(self) -> dict[str, Any]:
        """The checkpoint metadata that tells people (and ``resume``) what the run waits for."""
        out: dict[str, Any] = {}
        if self.until is not None:
            out["until"] = self.until.isoformat()
        if self.topics:
            out["topics"] = list(self.topics)
            out["need"] = self.need
        return out


@dataclass(frozen=True, slots=True)
class Usage:
    """Counters a run accumulates across steps (LLM tokens, cost, calls)."""

    input_tokens: int = 0
    """Prompt tokens sent to models."""
    output_tokens: int = 0
    """Completion tokens received from models."""
    cost_usd: float | None = 0.0
    """Money spent, as the model adapters priced each call; None once a call's price was
    unknown: the run's total is then unknown, never a sum that leaves calls out (a
    run's model calls, priced or not, are in ``savegame.client.model_usage``). A checkpoint
    saved before this rule holds 0.0 for such calls and reads as it was saved: the
    value is part of the checkpoint's checksum, and its journal has each call's price."""
    llm_calls: int = 0
    """Number of model calls."""
    tool_calls: int = 0
    """Number of tool calls."""

    def __add__(self, other: Usage) -> Usage:
        if other is ZERO_USAGE or other == ZERO_USAGE:
            # A step that called no model (most): ``round`` of a float to 10 places goes
            # through a decimal conversion, 2 % of a memory:// step's instructions.
            return self
        mine, theirs = self.cost_usd, other.cost_usd
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            None if mine is None or theirs is None else round(mine + theirs, 10),
            self.llm_calls + other.llm_calls,
            self.tool_calls + other.tool_calls,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "llm_calls": self.llm_calls,
            "tool_calls": self.tool_calls,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Usage:
        if not data:
            return cls()
        return cls(
            int(data.get("input_tokens", 0)),
            int(data.get("output_tokens", 0)),
            None if (cost := data.get("cost_usd", 0.0)) is None else float(cost),
            int(data.get("llm_calls", 0)),
            int(data.get("tool_calls", 0)),
        )


ZERO_USAGE = Usage()
"""No usage: what a step that calls no model adds (shared: a record is never changed)."""


@dataclass(frozen=True, slots=True)
class CheckpointHeader:
    """Everything about a checkpoint except its state: cheap to list and filter."""

    thread_id: str
    """The thread (conversation or job) the run belongs to."""
    run_id: str
    """The run this checkpoint belongs to."""
    checkpoint_id: str
    """Unique, time-sortable id (lexicographic order is creation order)."""
    parent_id: str | None
    """The checkpoint this one follows; None for the first checkpoint of a thread."""
    step: int
    """Number of steps the run had completed when this checkpoint was taken (0 = input)."""
    node: str | None
    """The step that just ran; None for the input checkpoint."""
    status: RunStatus
    """The run's status as of this checkpoint."""
    next: str | None
    """The step to run next; None when the run has ended."""
    usage: Usage = field(default_factory=Usage)
    """Counters accumulated by the run up to this checkpoint."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """User metadata and tags (JSON-compatible), filterable in history queries."""
    created_at: datetime = field(default_factory=utcnow)
    """When the checkpoint was taken (UTC)."""
    expires_at: datetime | None = None
    """When retention may delete it; None keeps it until pruned by policy."""
    format_version: int = FORMAT_VERSION
    """Layout version of the stored record."""
    state_version: int = 1
    """The workflow's state schema version the state was written with."""
    size: int = 0
    """Bytes of the stored payload (0 when unknown)."""
    base_id: str | None = None
    """The checkpoint whose state this payload is a delta against; None for a self-contained keyframe."""
    blobs: tuple[str, ...] = ()
    """Content digests of the blobs the state refers to (kept while this checkpoint is kept)."""


@dataclass(frozen=True, slots=True)
class CheckpointRecord:
    """A checkpoint as a store keeps it: header plus encoded state bytes."""

    header: CheckpointHeader
    payload: bytes
    """Encoded state, opaque to stores."""
    checksum: str
    """Integrity check over the payload (see savegame.codec._envelope)."""

    @property
    def checkpoint_id(self) -> str:
        return self.header.checkpoint_id

    @property
    def run_id(self) -> str:
        return self.header.run_id


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A decoded checkpoint: the full runtime state of a run at a step boundary."""

    header: CheckpointHeader
    state: dict[str, Any]
    """The user's state, pure data."""

    # Flat accessors keep user code short: ``cp.state``, ``cp.next``, ``cp.step``.
    @property
    def thread_id(self) -> str:
        return self.header.thread_id

    @property
    def run_id(self) -> str:
        return self.header.run_id

    @property
    def checkpoint_id(self) -> str:
        return self.header.checkpoint_id

    @property
    def parent_id(self) -> str | None:
        return self.header.parent_id

    @property
    def step(self) -> int:
        return self.header.step

    @property
    def node(self) -> str | None:
        return self.header.node

    @property
    def status(self) -> RunStatus:
        return self.header.status

    @property
    def next(self) -> str | None:
        return self.header.next

    @property
    def usage(self) -> Usage:
        return self.header.usage

    @property
    def metadata(self) -> Mapping[str, Any]:
        return self.header.metadata


@dataclass(frozen=True, slots=True)
class Lease:
    """Ownership of a run by one live process, guarded by a fencing token."""

    run_id: str
    owner: str
    """Who holds it: ``host:pid:start`` of the owning process."""
    token: int
    """Fencing token; grows by one on every acquisition. Every checkpoint write checks it."""
    expires_at: float
    """Wall-clock time (epoch seconds) after which another process may take the run over."""


@dataclass(frozen=True, slots=True)
class RunInfo:
    """One row per run: identity, status and where its head is."""

    run_id: str
    thread_id: str
    workflow: str
    """The workflow's name."""
    workflow_ref: str | None
    """How to import the workflow again (``module:attr`` or ``path.py:attr``), for resume."""
    status: RunStatus
    step: int
    """Steps completed as of the head checkpoint."""
    head_checkpoint_id: str | None
    created_at: datetime
    updated_at: datetime
    error: str | None = None
    """Why the run failed, when it did."""
    lease: Lease | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    cancel_requested: bool = False
    """Someone asked the run to stop at its next step boundary (``savegame cancel``)."""
    checksum: str = ""
    """Integrity check over what never changes after ``create_run``: ids, workflow name and
    reference (which ``resume`` imports), creation time, metadata; keyed under a keyring
    (see savegame.codec._runs.run_checksum). Empty on rows written before it existed."""
    wake_at: datetime | None = None
    """When a waiting run becomes claimable: its due time, or :data:`WOKEN` once what it
    waits for has arrived; None while it waits for events only, or is not waiting. A hint
    for claimers, not a rule: the step re-checks its journaled due time and events."""

    def with_status(self, status: RunStatus) -> RunInfo:
        return replace(self, status=status)

    @property
    def version(self) -> str | None:
        """The code version the run started under (:data:`VERSION_KEY` of its metadata,
        under the row's check); None for a run started before runs had one. A sealed
        value (the key made sensitive) reads as None: no claimer could match it."""
        found = self.metadata.get(VERSION_KEY)
        if not isinstance(found, str) or found.startswith("$sg:enc:"):
            return None
        return found


@dataclass(frozen=True, slots=True, repr=False)
class RunResult:
    """What ``run`` and ``resume`` return when the process is done with a run."""

    run_id: str
    thread_id: str
    status: RunStatus
    state: dict[str, Any]
    """The run's state at its last checkpoint."""
    checkpoint_id: str
    """The last checkpoint written."""
    step: int
    """Steps completed."""
    usage: Usage = field(default_factory=Usage)
    interrupt_id: str | None = None
    """When ``status`` is interrupted: the approval or interrupt the run waits for."""

    def __repr__(self) -> str:
        # The state abridged (reprlib's limits): ``asyncio.run(arun(...))`` formats the
        # repr of its main task, and with it this result, twice on its way out (3.11's
        # Runner reads back its SIGINT handler, a partial holding the task), and the
        # whole state of a 400-step conversation cost 0.12 ms a step of that run.
        return (
            f"RunResult(run_id={self.run_id!r}, thread_id={self.thread_id!r}, "
            f"status={self.status!r}, state={_ABRIDGED.repr(self.state)}, "
            f"checkpoint_id={self.checkpoint_id!r}, step={self.step!r}, usage={self.usage!r}, "
            f"interrupt_id={self.interrupt_id!r})"
        )


class EffectKind(str, enum.Enum):
    """What a journal entry records."""

    READ = "read"
    """A tool that only reads; its result is saved with the step's checkpoint."""
    WRITE = "write"
    """A tool that changes the world: intent committed before the call, result after."""
    LLM = "llm"
    """A model call; its result is committed at once so a resume never pays twice."""
    APPROVAL = "approval"
    """A person's decision on a gated tool call."""
    INTERRUPT = "interrupt"
    """A value a person supplies to ``ctx.interrupt``."""
    COMPENSATION = "compensation"
    """The undo of a completed write effect."""
    EVENT = "event"
    """A value sent to the run (``savegame send``, a child's end): pending until a
    ``ctx.wait_for`` takes it, then done with the taker's request id in its metadata."""
    WAIT = "wait"
    """A step's ``ctx.wait_for``: the event it took, or that it timed out (failed)."""
    SLEEP = "sleep"
    """A step's ``ctx.sleep``: the time it wakes, computed once."""
    CHILD = "child"
    """A child run a step started (``ctx.start_child``): its run id."""
    PATCH = "patch"
    """A step's ``ctx.patched(id)``: whether the run takes the patched code there, decided
    once (its result), so a re-execution, a resume and a fork answer the same."""

    def __str__(self) -> str:
        return self.value


class EffectStatus(str, enum.Enum):
    """Where a journal entry is."""

    PENDING = "pending"
    """Intent recorded, no result: in doubt for a write, waiting for a person for an approval."""
    DONE = "done"
    """Result recorded; a re-executed step gets it back without calling again."""
    FAILED = "failed"
    """The call raised; the error is recorded and raised again on re-execution."""
    REJECTED = "rejected"
    """An approval a person refused."""
    NOT_DONE = "not_done"
    """A person settled an in-doubt call as never having happened: the next execution calls afresh."""

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class EffectRecord:
    """One journal entry: a call to the outside world, an approval or an interrupt.

    ``arguments`` and ``result`` are encoded bytes (opaque to stores), like a
    checkpoint payload.
    """

    run_id: str
    request_id: str
    """Derived from (run, step, call index); stable when a step is re-executed."""
    kind: EffectKind
    name: str
    """The tool's name, or the interrupt's."""
    step: int
    """The step index the call belongs to (``ctx.step``)."""
    node: str
    """The step's name."""
    call_index: int
    """Position of the call within its step execution."""
    status: EffectStatus
    arguments: bytes
    result: bytes | None = None
    error: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """JSON data: tool flags (idempotent, compensate), decisions (by, at, reason)."""
    created_at: datetime = field(default_factory=utcnow)
    completed_at: datetime | None = None
    checksum: str = ""
    """Integrity check over identity, arguments and result (see savegame.codec._entries)."""


#: The checkpoint metadata key naming the process (its lease owner, ``host:pid:start``)
#: that wrote the first checkpoint of an execution: where it differs from the writer
#: before, another process went on (a resume, a worker's takeover after a crash).
WRITER_KEY = "writer"

#: The checkpoint metadata key naming the process whose lease an execution took over
#: (``host:pid:start``): it held the run and stopped without releasing it (killed, or
#: its lease expired). Written with :data:`WRITER_KEY` in the new execution's first
#: checkpoint, so a holder killed before its own first checkpoint is named too.
TAKEOVER_KEY = "took_over"

#: The run metadata key marking a run savegame keeps for its own bookkeeping (a
#: LangGraph migration's marker per thread), its value naming whose: lists for people
#: (``savegame runs``, the UI's runs page) leave such a run out; read by id it is there.
BOOKKEEPING_KEY = "bookkeeping"


#: The run metadata key holding the code version a run started under (the workflow's
#: ``version=``, or a digest of its steps' source: ``Workflow.code_version``), set in
#: its first checkpoint and so in its row, under the row's check. A worker given
#: versions claims only runs of one of them (``claim_run(versions=...)``).
VERSION_KEY = "code_version"


#: The state key under which a workflow with a workspace keeps the manifest of its
#: files (``{relative path: StoredFile}``): in the state, so it is sealed and
#: authenticated with it, written as a delta of the entries that changed, and
#: packed like any long dict in a keyframe.
WORKSPACE_KEY = "$sg:workspace"


@dataclass(frozen=True, slots=True)
class StoredFile:
    """One file of a workspace snapshot: its content is the blob ``digest``."""

    digest: str
    """Name of the blob holding the file's bytes (a symlink's: its target)."""
    mode: int
    """``st_mode``'s file type and permission bits (a regular file or a symlink)."""
    size: int
    """Bytes of the content."""


_EVOLVERS: dict[tuple[type, tuple[str, ...]], Callable[..., Any]] = {}


def evolve(record: R, **changes: Any) -> R:
    """``dataclasses.replace`` for the frozen, slotted records above, four times as fast.

    ``replace`` walks the class's fields on every call and goes through ``__init__``;
    a step copies a header or a record five times on its way to the store, and those
    copies were 8% of a step's instructions. This builds, once per class, a function
    that fills a draft (:func:`_draft`) field by field and turns it into the record,
    so the result equals ``replace``'s. Only for classes without ``__post_init__``
    (none here has one): their ``__init__`` checks nothing.

    Raises:
        TypeError: a name in ``changes`` that is not a field.
    """
    kind = type(record)
    copy = _EVOLVERS.get((kind, ())) or evolver(kind)
    out: R = copy(record, **changes)
    return out


def evolver(kind: type[R], *changing: str) -> Callable[..., R]:
    """:func:`evolve` for records of class ``kind``, called with the changes as keywords
    alone: ``evolver(CheckpointHeader)(header, size=3)``.

    For a copy made at every step: evolve's own call, and the dict its ``**changes``
    go through twice, cost as much as filling the fields (4.4k instructions of a
    header's 11.7k). A record of a subclass is handed to its own class's copy.

    ``changing``: the fields every call sets, and only those (each one required); the
    others are copied as they are, without the test of a ``_KEEP`` default each (a
    header's copy at each of a step's three copies: about a third of it).

    Raises:
        TypeError: a name in ``changing`` that is not a field of ``kind``.
    """
    key = (kind, changing)
    copy = _EVOLVERS.get(key)
    if copy is None:
        copy = _EVOLVERS[key] = _evolver(kind, changing or None)
    return copy


def _evolver(kind: type, changing: tuple[str, ...] | None) -> Callable[..., Any]:
    names = [f.name for f in fields(kind) if f.init]
    if any(not name.isidentifier() for name in names):
        raise TypeError(f"evolve: {kind.__qualname__} has a field that is no identifier")
    if changing is not None and (
        len(set(changing)) != len(changing) or not set(changing) <= set(names)
    ):
        raise TypeError(f"evolver: {changing} are not distinct fields of {kind.__qualname__}")
    if changing is None:
        # Positional-or-keyword, not keyword-only: Python fills a missing keyword-only
        # parameter by a look-up in a dict of defaults (2k instructions a header's
        # copy), a positional one from a tuple. Callers pass the changes as keywords.
        params, passed = ", ".join(f"{n}=_KEEP" for n in names), names
        value = {n: f"_record.{n} if {n} is _KEEP else {n}" for n in names}
    else:
        params, passed = ", ".join(changing), list(changing)
        value = {n: n if n in changing else f"_record.{n}" for n in names}
    given = ", ".join(f"{n}={n}" for n in passed)
    lines = [
        f"def evolve(_record, {params}):",
        "    if type(_record) is not _kind:",
        f"        return _evolver(type(_record))(_record, {given})",
        "    _out = _new(_draft)",
        *(f"    _out.{n} = {value[n]}" for n in names),
        "    _out.__class__ = _kind",
        "    return _out",
    ]
    scope: dict[str, Any] = {
        "_KEEP": _KEEP,
        "_new": object.__new__,
        "_kind": kind,
        "_draft": _draft(kind, "evolve"),
        "_evolver": evolver,
    }
    exec("\n".join(lines), scope)  # our own field names, checked above
    copy: Callable[..., Any] = scope["evolve"]
    return copy


_KEEP: Any = object()
_DRAFTS: dict[type, type] = {}


def _draft(kind: type, what: str) -> type:
    """A plain class with ``kind``'s slots: the same memory layout, fields set by plain
    (and, on 3.11+, specialized in-line) attribute stores.

    A frozen record refuses assignment, so its ``__init__`` sets each field through
    ``object.__setattr__``: a call that slices its arguments and looks the attribute
    up, about 600 instructions a field (27k for a ``CheckpointHeader``). A record is
    instead filled as its draft and then given its own class (``__class__``
    assignment, which Python allows between classes of identical layout and checks
    at each one): a third of the instructions.

    Raises:
        TypeError: ``kind`` is no plain slotted record (a ``__post_init__``, slots in
            a base class).
    """
    draft = _DRAFTS.get(kind)
    if draft is None:
        slots = vars(kind).get("__slots__")
        if hasattr(kind, "__post_init__") or slots is None:
            raise TypeError(f"{what}: {kind.__qualname__} is not a plain slotted record")
        draft = type(kind.__name__, (), {"__slots__": slots, "__module__": __name__})
        try:
            object.__setattr__(object.__new__(draft), "__class__", kind)
        except TypeError:  # another layout
            raise TypeError(f"{what}: {kind.__qualname__} is not a plain slotted record") from None
        _DRAFTS[kind] = draft
    return draft


class _Factory:
    def __repr__(self) -> str:
        return "<factory>"  # as dataclasses shows a default factory in a signature


_FACTORY: Any = _Factory()


def quick_init(kind: K) -> K:
    """Give the frozen record ``kind`` an ``__init__`` that fills a draft (:func:`_draft`);
    ``kind`` back, so that it decorates a class (after ``@dataclass``).

    The same parameters, defaults and result as the one ``dataclasses`` wrote, kept
    for a subclass (whose layout may differ). Only for records whose every field is
    an ``__init__`` parameter, none keyword-only.
    """
    generated = vars(kind)["__init__"]
    every = fields(kind)
    if any(not f.init or f.kw_only or not f.name.isidentifier() for f in every):
        raise TypeError(f"quick init: {kind.__qualname__} has fields __init__ does not take")
    scope: dict[str, Any] = {
        "_FACTORY": _FACTORY,
        "_kind": kind,
        "_draft": _draft(kind, "quick init"),
        "_become": object.__setattr__,
        "_generated": generated,
    }
    params: list[str] = []
    sets: list[str] = []
    for f in every:
        value = f.name
        if f.default is not MISSING:
            scope[f"_d_{f.name}"] = f.default
            params.append(f"{f.name}=_d_{f.name}")
        elif f.default_factory is not MISSING:
            scope[f"_f_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_FACTORY")
            value = f"_f_{f.name}() if {f.name} is _FACTORY else {f.name}"
        else:
            params.append(f.name)
        sets.append(f"    self.{f.name} = {value}")
    names = ", ".join(f.name for f in every)
    lines = [
        f"def __init__(self, {', '.join(params)}):",
        "    if type(self) is not _kind:",
        f"        return _generated(self, {names})",
        "    _become(self, '__class__', _draft)",
        *sets,
        "    self.__class__ = _kind",
    ]
    exec("\n".join(lines), scope)  # our own field names, checked above
    init = scope["__init__"]
    init.__qualname__ = f"{kind.__qualname__}.__init__"
    init.__module__ = kind.__module__
    init.__annotations__ = dict(generated.__annotations__)
    init.__doc__ = generated.__doc__
    type.__setattr__(kind, "__init__", init)
    return kind


for _kind in (
    Waiting, Usage, CheckpointHeader, CheckpointRecord, Checkpoint, Lease, RunInfo, RunResult,
    EffectRecord, StoredFile,
):  # fmt: skip
    quick_init(_kind)
