"""The savegame exception tree.

Every error savegame raises on purpose derives from :class:`SavegameError`, and
each branch is named for what the caller does next::

    SavegameError
    ├── ConfigurationError          fix the setup (bad store URL, bad workflow)
    │   ├── WorkflowImportError     a workflow's code does not import in this process
    │   └── StoreUnavailableError   a store cannot be opened: its server does not answer, a login is refused
    ├── SerializationError          state holds something that is not pure data
    ├── StateVersionError           a checkpoint's state schema cannot be migrated
    ├── CorruptRecordError          a stored record failed its checksum or did not decode
    │   ├── UnauthenticatedRecordError  a record without the authentication keys require
    │   │   └── UnencryptedRecordError  a plaintext record where encryption is required
    │   └── DamagedExportError      an export file is damaged or truncated: nothing was imported
    ├── EncryptionKeyError          a record needs a key id the keyring does not hold
    ├── NotFoundError               no such run / checkpoint / thread
    │   └── StoreNotFoundError      no such store (an SQLite file that is not there)
    ├── RunStateError               the run exists but cannot do that now (resume a completed run)
    ├── ConflictError               someone else wrote first: retry or give up
    │   ├── LeaseHeldError          a live process owns the run
    │   ├── MissingBlobsError       a record named blobs a concurrent prune removed: re-send them
    │   ├── EffectSettledError      a journal entry was settled first (a reject raced an approve)
    │   ├── RunExistsError          a start named a run id that is taken by another workflow or input
    │   ├── ThreadBusyError         a start found the thread's last run unfinished: continue or end it
    │   ├── ThreadExistsError       an import's run would join a thread the store has: import it as another
    │   └── LeaseLostError          our lease was taken over; a stale write was rejected
    ├── CheckpointWriteError        a checkpoint could not be written; the run stopped
    ├── WorkspaceError              a workspace cannot be saved: too large, a link out of it
    ├── StepError                   a user step raised; the run is marked failed
    ├── TimedOutError               a step or a tool call ran past its timeout (also a TimeoutError)
    ├── ModelError                  a model provider failed a call (savegame.models adapters)
    │   ├── ModelTransientError     try again: rate limited, overloaded, 5xx, connection lost
    │   └── ModelRequestError       fix the request: the provider refused it (4xx), not retried
    ├── WaitTimedOutError           nothing came for a ctx.wait_for before its timeout (a step may catch it)
    ├── ChildRunError               a child run ended without a result: failed, cancelled (a step may catch it)
    ├── InDoubtEffectError          a write effect may or may not have happened: a person decides
    ├── NonDeterminismError         a re-executed step made a different call than the journal holds
    ├── ApprovalRejected            a person rejected a gated tool call (a step may catch it)
    └── CompensationError           undoing an effect failed; the run is compensation_failed

Errors carry structured fields (run, checkpoint, step, path) and build their
message from them, so the message and the fields never disagree. Pauses and
cancellation are not errors and do not live in this tree: they are control-flow
signals, in :mod:`savegame.signals`.
"""

from __future__ import annotations

from typing import Any


class SavegameError(Exception):
    """Root of every error savegame raises on purpose."""


class ConfigurationError(SavegameError):
    """The setup is wrong: a bad store URL, a workflow with no entry step, an unknown step."""


class WorkflowImportError(ConfigurationError):
    """A workflow reference (``module:attr``, ``path/file.py:attr``) does not import here:
    its module is not on this process's import path, raised while it was imported, or has
    no such attribute. A worker leaves such a run queued for one that can import it.

    Attributes:
        ref: the reference, as stored with the run.
        module: its module part (a module name or a file path).
        detail: what went wrong, the message.
        missing: the module Python could not find, when that is why (``exc.name``).
    """

    def __init__(self, ref: str, module: str, detail: str, *, missing: str | None = None) -> None:
        self.ref = ref
        self.module = module
        self.detail = detail
        self.missing = missing
        super().__init__(detail)


class StoreUnavailableError(ConfigurationError):
    """A store cannot be opened: its server does not answer or refuses the login, its
    bucket cannot be reached, its file cannot be made. Every backend says it this way,
    naming the store, so a script sees one error (and the CLI one exit code) for all.

    Attributes:
        url: the store's URL as its ``url`` shows it (never with a password).
        reason: what the driver said.
    """

    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        self.reason = reason
        super().__init__(f"cannot open the store {url}: {reason}")


class SerializationError(SavegameError):
    """A value is not pure data and cannot be saved.

    Attributes:
        path: where the value sits, e.g. ``state.tools[2].conn``.
        reason: why it was refused.
    """

    def __init__(
        self, path: str, reason: str, *, run_id: str | None = None, step: str | None = None
    ) -> None:
        self.path = path
        self.reason = reason
        self.run_id = run_id
        self.step = step
        where = ""
        if run_id is not None:
            where = f" (run {run_id}" + (f", step {step!r}" if step else "") + ")"
        super().__init__(f"{path}: {reason}{where}")

    def located(self, *, run_id: str, step: str | None) -> SerializationError:
        """Return a copy that also names the run and step where it happened."""
        return SerializationError(self.path, self.reason, run_id=run_id, step=step)


class StateVersionError(SavegameError):
    """A checkpoint's state schema version cannot be brought to the workflow's version."""

    def __init__(self, message: str, *, checkpoint_id: str | None = None) -> None:
        self.checkpoint_id = checkpoint_id
        super().__init__(message + (f" (checkpoint {checkpoint_id})" if checkpoint_id else ""))


class CorruptRecordError(SavegameError):
    """A stored record failed its integrity check or could not be decoded."""

    def __init__(self, record_id: str, reason: str) -> None:
        self.record_id = record_id
        self.reason = reason
        super().__init__(f"record {record_id} is damaged: {reason}")


class UnauthenticatedRecordError(CorruptRecordError):
    """Encryption is configured but the record lacks the authentication it requires: it
    is stored in plaintext, or was written by a savegame that did not authenticate its
    control fields yet (``next``, status, journal status). Refused, never used: without
    the key nobody can tell it from a forgery.

    ``savegame rekey --adopt`` signs such records as they are, after a person
    checked them: rekey vouches for what it signs.
    """

    def __init__(self, record_id: str, what: str = "not authenticated") -> None:
        super().__init__(
            record_id,
            f"{what} while encryption is configured; refusing to load it (if it was written "
            "without keys or by an older savegame, check the store and rewrite it with "
            "`savegame rekey --adopt`)",
        )


class UnencryptedRecordError(UnauthenticatedRecordError):
    """Encryption is configured but the record is stored in plaintext: refused, never used.

    Records written before encryption was turned on are rewritten with ``rekey --adopt``.
    """

    def __init__(self, record_id: str) -> None:
        super().__init__(record_id, "stored without encryption")


class DamagedExportError(CorruptRecordError):
    """An export file (``savegame export``) that is damaged, truncated or not an export;
    ``savegame import`` refused it before writing anything.

    Attributes:
        record: the index of the damaged record (0 is the header), or None for the file.
        offset: the byte offset in the file where that record starts.
        file: the file's path, when the error names it (``savegame replay`` reads several).
    """

    def __init__(
        self,
        reason: str,
        *,
        record: int | None = None,
        offset: int | None = None,
        file: str | None = None,
    ):
        self.record = record
        self.offset = offset
        self.file = file
        where = "export file" if file is None else f"export file {file}"
        where = where if record is None else f"{where} record {record}"
        super().__init__(where if offset is None else f"{where} at byte {offset}", reason)


class EncryptionKeyError(SavegameError):
    """A record was encrypted with a key id the configured keyring does not hold."""

    def __init__(self, key_id: str, record_id: str) -> None:
        self.key_id = key_id
        self.record_id = record_id
        super().__init__(
            f"record {record_id} is encrypted with key {key_id!r}, which is not in the keyring "
            "(SAVEGAME_KEYS); add that key to read it (if no key of that name was ever used, "
            "the record was altered)"
        )


class NotFoundError(SavegameError):
    """No run, checkpoint or thread with that id exists in the store.

    Attributes:
        store: the store's URL (never with a password), once known: the public
            functions name the store they looked in (``no run 'r1' in sqlite:///savegame.db``).
    """

    def __init__(self, kind: str, ident: str, *, store: str | None = None) -> None:
        self.kind = kind
        self.ident = ident
        self.store = store
        super().__init__(self._describe())

    def _describe(self) -> str:
        return f"no {self.kind} {self.ident!r} in {self.store or 'the store'}"

    def name_store(self, url: str) -> None:
        """Say which store was searched (in place, so the traceback and the type stay)."""
        if self.store is None:
            self.store = url
            self.args = (self._describe(),)


class StoreNotFoundError(NotFoundError):
    """The store a URL names does not exist (an SQLite file that is not there), and the
    operation reads or changes what is in a store rather than starting a run."""

    def __init__(self, url: str, path: str) -> None:
        self.path = path
        super().__init__("store", url, store=url)

    def _describe(self) -> str:
        return (
            f"no store at {self.ident}: the file {self.path} does not exist "
            "(only starting a run creates a store)"
        )


class RunStateError(SavegameError):
    """The run exists but its status does not allow the operation."""

    def __init__(self, run_id: str, status: str, action: str) -> None:
        self.run_id = run_id
        self.status = status
        self.action = action
        super().__init__(f"cannot {action} run {run_id}: it is {status}")


class ConflictError(SavegameError):
    """A concurrent writer got there first."""


def _who(owner: str) -> str:
    # Owners are ``host:pid:start`` (savegame.runtime); anything else is shown as it is.
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    return f"PID {pid} on host {host}" if host and pid.isdigit() else owner


class LeaseHeldError(ConflictError):
    """Another process holds the run's lease, and it has not expired.

    Attributes:
        running: True when the holder is seen running on this host, False when it
            is seen not running, None when it cannot be seen (another host).
    """

    def __init__(
        self, run_id: str, owner: str, expires_in: float, *, running: bool | None = None
    ) -> None:
        self.run_id = run_id
        self.owner = owner
        self.expires_in = expires_in
        self.running = running
        who = _who(owner)
        held = {
            True: f"is being executed by {who}",
            False: f"is held by {who}, which is not running",
            None: f"is held by {who}",
        }[running]
        super().__init__(f"run {run_id} {held}; its lease expires in {max(expires_in, 0):.1f}s")


class MissingBlobsError(ConflictError):
    """A record names blobs that are neither given nor stored (a concurrent prune removed them)."""

    def __init__(self, checkpoint_id: str, digests: list[str]) -> None:
        self.checkpoint_id = checkpoint_id
        self.digests = digests
        super().__init__(
            f"checkpoint {checkpoint_id} refers to blobs that are neither given nor stored: "
            + ", ".join(digests)
        )


class EffectSettledError(ConflictError):
    """A journal entry was not in the status the writer expected: someone settled it first
    (say, a reject racing an approve). Nothing was written."""

    def __init__(
        self, run_id: str, request_id: str, status: str, expected: str, why: str | None = None
    ) -> None:
        self.run_id = run_id
        self.request_id = request_id
        self.status = status
        self.expected = expected
        if why is not None:
            super().__init__(
                f"journal entry {request_id} of run {run_id} {why}; nothing was written: "
                "read it again"
            )
            return
        super().__init__(
            f"journal entry {request_id} of run {run_id} is already {status}, not {expected}:"
            " it was settled by someone else first"
        )


class RunExistsError(ConflictError):
    """A start (``run``/``submit`` with a ``run_id``) found that run id taken, and cannot
    continue or return it: the run belongs to another workflow or thread, was started with
    another input, or the caller said ``on_exists="reject"``. Nothing was executed."""

    def __init__(self, run_id: str, status: str, reason: str) -> None:
        self.run_id = run_id
        self.status = status
        self.reason = reason
        super().__init__(f"run {run_id} exists already ({status}): {reason}")


class ThreadBusyError(ConflictError):
    """A new run was started on a thread that has an unfinished run (a crashed, failed,
    paused or live one): a second run would start from the entry step and could repeat its
    effects. Continue or end that run, or start with ``on_thread_busy="allow"``."""

    def __init__(self, thread_id: str, run_id: str, status: str) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        self.status = status
        super().__init__(
            f"thread {thread_id} has an unfinished run {run_id} ({status}): continue it "
            f"(`savegame resume {run_id}`), end it (`savegame cancel {run_id}`), or start a "
            "second run anyway (on_thread_busy='allow', --on-thread-busy allow)"
        )


class ThreadExistsError(ConflictError):
    """An import found a thread of its file in the store already, with runs of its own: the
    file's run would join a conversation it was never part of (a turn started there would
    wait for it, or go on from its state). Nothing was imported. Import it as a new thread
    (``import_run(..., thread=...)``, ``savegame import --thread``)."""

    def __init__(self, thread_id: str, run_id: str, imported_run_id: str) -> None:
        self.thread_id = thread_id
        self.run_id = run_id
        """A run the store has on that thread."""
        self.imported_run_id = imported_run_id
        """The file's run on that thread."""
        super().__init__(
            f"thread {thread_id} is in the store already (run {run_id}): the file's run "
            f"{imported_run_id} would join it; import it as another thread (--thread NEW)"
        )


class LeaseLostError(ConflictError):
    """Our lease on the run was taken over; the write with the stale fencing token was rejected."""

    def __init__(self, run_id: str, token: int) -> None:
        self.run_id = run_id
        self.token = token
        super().__init__(f"lost the lease on run {run_id} (fencing token {token} is stale)")


class CheckpointWriteError(SavegameError):
    """A checkpoint could not be written; the run stopped and the last good checkpoint stays."""

    def __init__(self, run_id: str, step: int, cause: BaseException) -> None:
        self.run_id = run_id
        self.step = step
        self.cause = cause
        super().__init__(
            f"run {run_id}: checkpoint for step {step} could not be written: "
            + describe(cause, with_type=False)
        )


class WorkspaceError(SavegameError):
    """A workflow's workspace cannot be snapshotted or restored as it is: fix the
    directory or its ``ignore`` patterns (a file too large, a link that leaves the
    workspace, ignored files where a checkpoint has its own).

    Attributes:
        root: the workspace directory.
        reason: what is wrong, naming the files.
    """

    def __init__(self, root: str, reason: str) -> None:
        self.root = root
        self.reason = reason
        super().__init__(f"workspace {root}: {reason}")


class StepError(SavegameError):
    """A user step raised; the run is marked failed with this error recorded."""

    def __init__(self, run_id: str, step: str, cause: BaseException) -> None:
        self.run_id = run_id
        self.step = step
        self.cause = cause
        super().__init__(f"run {run_id}: step {step!r} raised {describe(cause)}")


class TimedOutError(SavegameError, TimeoutError):
    """A step or a tool call ran past its ``timeout``; a ``TimeoutError`` too, so
    ``retry_on=TimeoutError`` retries it.

    Attributes:
        tool: the tool whose call timed out, or None when the step itself did.
        abandoned: the call is a sync tool's, whose thread cannot be stopped: it was left
            running and may still finish (what it does then is not recorded).
    """

    def __init__(
        self,
        run_id: str,
        step: str,
        seconds: float,
        *,
        tool: str | None = None,
        abandoned: bool = False,
    ) -> None:
        self.run_id = run_id
        self.step = step
        self.seconds = seconds
        self.tool = tool
        self.abandoned = abandoned
        what = f"step {step!r}" if tool is None else f"step {step!r}: tool {tool}"
        if tool is None:
            how = "it was cancelled at its next await"
        elif abandoned:
            how = "its thread was left running and may still finish (a sync call cannot be stopped)"
        else:
            how = "the call was cancelled"
        super().__init__(f"run {run_id}: {what} timed out after {seconds:g}s; {how}")


class ModelError(SavegameError):
    """A model provider failed a call (raised by the ``savegame.models`` adapters).

    Attributes:
        model: the model asked (``gpt-4o``).
        status: the HTTP status the provider answered, or None (no answer: the connection
            failed, or the answer did not parse).
        reason: what went wrong, as the provider or the SDK said it.
        provider_request_id: the provider's id of the request, when it gave one (for its
            support).
        retry_after: the seconds the provider asked to wait before another attempt
            (its ``Retry-After`` or ``retry-after-ms`` header), or None; a step's retry
            waits that long instead of its backoff.
    """

    retryable = False
    """Whether another attempt may succeed: a step's ``retries`` apply only then."""

    def __init__(
        self,
        model: str,
        reason: str,
        *,
        status: int | None = None,
        provider_request_id: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.model = model
        self.reason = reason
        self.status = status
        self.provider_request_id = provider_request_id
        self.retry_after = retry_after
        answered = f"answered {status}" if status is not None else "failed"
        ident = f" (request {provider_request_id})" if provider_request_id else ""
        super().__init__(f"model {model} {answered}{ident}: {reason}")


class ModelTransientError(ModelError):
    """Another attempt may succeed: rate limited (429), overloaded or a server error (5xx),
    a timeout (408), a lost connection, an answer that did not parse. A step's ``retries``
    retry it (savegame's own errors are not retried otherwise)."""

    retryable = True


class ModelRequestError(ModelError):
    """The provider refused this request (400, 401, 403, 404, 422 ...): the same request
    gets the same answer, so it is not retried; fix the request, the key or the model."""


class WaitTimedOutError(SavegameError, TimeoutError):
    """Nothing came for a ``ctx.wait_for`` (or a child run for ``ctx.wait_children``)
    before its timeout. Journaled: the step re-executed gets this error again, at the
    same position, whatever arrives later (a later event waits for the next wait).

    Attributes:
        topic: what the step waited for.
        until: the due time the wait recorded (ISO 8601, UTC).
    """

    def __init__(self, run_id: str, step: str, topic: str, until: str) -> None:
        self.run_id = run_id
        self.step = step
        self.topic = topic
        self.until = until
        super().__init__(f"run {run_id}: step {step!r} waited for {topic!r} until {until}")


class ChildRunError(SavegameError):
    """A child run the step waits for ended without a result: it failed, or was cancelled
    (or compensated). Journaled like its result would be.

    Attributes:
        child_run_id: the child run.
        status: how it ended (``failed``, ``cancelled``, ``compensating`` ...).
        error: why, as the child recorded it, when it did.
    """

    def __init__(self, run_id: str, child_run_id: str, status: str, error: str | None) -> None:
        self.run_id = run_id
        self.child_run_id = child_run_id
        self.status = status
        self.error = error
        why = f": {error}" if error else ""
        super().__init__(f"run {run_id}: child run {child_run_id} ended {status}{why}")


class InDoubtEffectError(SavegameError):
    """A write effect started but has no recorded result, and nothing can tell whether it happened."""

    def __init__(
        self,
        run_id: str,
        tool: str,
        arguments: Any,
        request_id: str,
        cause: BaseException | None = None,
    ) -> None:
        self.run_id = run_id
        self.tool = tool
        self.arguments = arguments
        self.request_id = request_id
        self.cause = cause
        # An exception does not prove the call did not happen (a timeout after the charge).
        what = (
            "it started but no result was recorded"
            if cause is None
            else f"it raised {describe(cause)}, which does not prove it did not happen"
        )
        super().__init__(
            f"run {run_id}: call {tool}({_args(arguments)}) with request id {request_id} is in doubt: "
            f"{what}, and the tool is neither idempotent nor reconcilable; settle it with "
            f"`savegame resolve {run_id} --effect {request_id} --done --result JSON` or `--not-done`"
        )


class NonDeterminismError(SavegameError):
    """A re-executed step made a different call at a journaled position."""

    def __init__(self, run_id: str, request_id: str, recorded: str, attempted: str) -> None:
        self.run_id = run_id
        self.request_id = request_id
        self.recorded = recorded
        self.attempted = attempted
        super().__init__(
            f"run {run_id}: non-deterministic step: at {request_id} the journal holds {recorded} "
            f"but the step now calls {attempted}"
        )


class ApprovalRejected(SavegameError):
    """A person rejected a gated call; raised from ``ctx.call`` so the step can handle it."""

    def __init__(self, run_id: str, tool: str, reason: str, by: str | None) -> None:
        self.run_id = run_id
        self.tool = tool
        self.reason = reason
        self.by = by
        who = f" by {by}" if by else ""
        super().__init__(f"run {run_id}: call to {tool} was rejected{who}: {reason}")


class CompensationError(SavegameError):
    """A compensation failed; the run ends compensation_failed naming the effect."""

    def __init__(self, run_id: str, request_id: str, tool: str, cause: BaseException) -> None:
        self.run_id = run_id
        self.request_id = request_id
        self.tool = tool
        self.cause = cause
        super().__init__(
            f"run {run_id}: compensation {tool} for {request_id} failed: "
            + describe(cause, with_type=False)
        )


def describe(error: BaseException, *, with_type: bool = True) -> str:
    """The text savegame stores for an exception: ``Type: message``, always storable.

    A message may hold a lone surrogate (a tool echoing bad input) that no JSON
    column or UTF-8 store takes, a NUL that PostgreSQL's text refuses, or come from a
    ``__str__`` that raises; any of them would keep the checkpoint that records the
    failure from being written (on PostgreSQL the run stayed ``running``, and the
    refusal failed every run batched with it).
    """
    try:
        message = str(error)
    except Exception:
        message = f"<{type(error).__name__} whose message cannot be shown>"
    text = f"{type(error).__name__}: {message}" if with_type else message
    return text.encode("utf-8", "backslashreplace").decode("utf-8").replace("\x00", "\\x00")


def _args(arguments: Any) -> str:
    if isinstance(arguments, dict):
        return ", ".join(f"{key}={value!r}" for key, value in arguments.items())
    return repr(arguments)
