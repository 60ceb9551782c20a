"""A migration's marker per thread in the target store: done, or being written by whom.

The marker is a savegame run of the thread (workflow ``langgraph-migration``, run id
derived from the thread id, so two processes name the same one), stored
``completed`` so no worker ever claims it, and marked bookkeeping
(:data:`savegame.model.BOOKKEEPING_KEY`) so lists for people leave it out. Its first checkpoint says ``writing``;
its second, written after the thread was written and verified, says ``done`` and
what was moved. While a process writes the thread it holds the marker's lease;
why that makes a thread land once, also with a second migration running, is in
:mod:`savegame.integrations.langgraph._migrate`.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from savegame import codec
from savegame.codec.storage import StorageConfig
from savegame.errors import ConflictError, LeaseHeldError, LeaseLostError, NotFoundError
from savegame.ids import new_id
from savegame.model import (
    BOOKKEEPING_KEY,
    CheckpointHeader,
    CheckpointRecord,
    RunInfo,
    RunStatus,
    utcnow,
)
from savegame.runtime import acquire_lease, owner_id
from savegame.stores import Store

WORKFLOW = "langgraph-migration"
#: How long a writer's hold outlives its last renewal; another host takes over after it.
TTL = 300.0
#: A writer renews at most this often (between two checkpoints it writes).
RENEW_EVERY = 5.0
WRITING, DONE = "writing", "done"


def marker_id(thread_id: str) -> str:
    return "lgmigration-" + hashlib.sha256(thread_id.encode()).hexdigest()[:40]


@dataclass(frozen=True, slots=True)
class Marker:
    """What the target store says of a thread."""

    phase: str | None
    """None (no migration touched it), ``writing`` or ``done``."""
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class Claim:
    """This process holds the thread's marker: it may write the thread."""

    thread_id: str
    run_id: str
    token: int
    first_id: str
    resumed: bool
    """A migration that died left the thread half written: delete it before writing."""
    renewed_at: float = field(default_factory=time.monotonic)


class Held(Exception):
    """Another live migration holds the thread (or one on another host, not yet expired)."""

    def __init__(self, cause: LeaseHeldError) -> None:
        host, _, rest = cause.owner.partition(":")
        pid = rest.partition(":")[0]
        who = f"PID {pid} on host {host}" if pid.isdigit() else cause.owner
        super().__init__(
            f"being migrated by another process ({who}; its hold expires in "
            f"{max(cause.expires_in, 0):.0f}s unless renewed): run the migration again later"
        )


class TakenOver(Exception):
    """Our hold on the thread lapsed and another migration took it: we stop writing it."""

    def __init__(self, thread_id: str) -> None:
        super().__init__(
            f"thread {thread_id}: another migration took it over (this process lost its "
            f"hold for longer than {TTL:.0f}s); that one writes it"
        )


class Claims:
    """The markers of one target store."""

    def __init__(
        self,
        store: Store,
        storage: StorageConfig | None,
        source: str,
        *,
        owner: str | None = None,
        ttl: float = TTL,
    ) -> None:
        self.store = store
        self.storage = storage
        self.source = source
        self.owner = owner or owner_id()
        """Who creates a marker: this process (``host:pid:start``); a takeover is always ours."""
        self.ttl = ttl

    def marker(self, thread_id: str) -> Marker:
        try:
            heads = self.store.list_checkpoints(marker_id(thread_id), limit=1)
        except NotFoundError:
            return Marker(None)
        return Marker(heads[0].metadata.get("phase"), heads[0].metadata) if heads else Marker(None)

    def take(self, thread_id: str) -> Claim | Marker:
        """Hold the thread, or the ``done`` marker when a migration finished it.

        Raises:
            Held: a live migration writes it now.
        """
        for _ in range(3):
            try:
                return self._take(thread_id)
            except NotFoundError:
                continue  # another migration removed its marker between our looks: again
        return self._take(thread_id)

    def _take(self, thread_id: str) -> Claim | Marker:
        run_id = marker_id(thread_id)
        first = self._record(thread_id, parent=None, metadata={"phase": WRITING})
        now = utcnow()
        info = RunInfo(
            run_id=run_id,
            thread_id=thread_id,
            workflow=WORKFLOW,
            workflow_ref=None,
            status=RunStatus.COMPLETED,
            step=0,
            head_checkpoint_id=first.checkpoint_id,
            created_at=now,
            updated_at=now,
            metadata={"source": self.source, BOOKKEEPING_KEY: WORKFLOW},
        )
        info = replace(info, checksum=codec.run_checksum(info, self.storage))
        try:
            lease = self.store.create_run(info, first, owner=self.owner, ttl=self.ttl)
        except ConflictError:
            pass  # a marker exists: done, or left by a migration that is alive or dead
        else:
            return Claim(thread_id, run_id, lease.token, first.checkpoint_id, resumed=False)
        if (found := self.marker(thread_id)).phase == DONE:
            return found
        try:
            # A holder that is provably dead (this host) is taken over at once, an
            # expired one anywhere; a live one keeps it.
            lease = acquire_lease(self.store, run_id, ttl=self.ttl)
        except LeaseHeldError as exc:
            raise Held(exc) from None
        head = self.store.list_checkpoints(run_id, limit=1)[0]
        if head.metadata.get("phase") == DONE:  # it finished between our two looks
            self.store.release_lease(run_id, lease.token)
            return Marker(DONE, head.metadata)
        return Claim(thread_id, run_id, lease.token, head.checkpoint_id, resumed=True)

    def renew(self, claim: Claim, *, now: bool = False) -> None:
        """Extend the hold (at most every RENEW_EVERY seconds unless ``now``).

        Raises:
            TakenOver: another migration holds the thread now.
        """
        if not now and time.monotonic() - claim.renewed_at < RENEW_EVERY:
            return
        try:
            self.store.renew_lease(claim.run_id, claim.token, self.ttl)
        except LeaseLostError:
            raise TakenOver(claim.thread_id) from None
        claim.renewed_at = time.monotonic()

    def finish(self, claim: Claim, summary: Mapping[str, Any]) -> None:
        """Mark the thread done (fenced by our hold), then let the hold go.

        Raises:
            TakenOver: another migration holds the thread now; it was not marked.
        """
        record = self._record(
            claim.thread_id, parent=claim.first_id, metadata={"phase": DONE, **summary}
        )
        try:
            self.store.put_checkpoint(record, lease_token=claim.token)
        except LeaseLostError:
            raise TakenOver(claim.thread_id) from None
        self.store.release_lease(claim.run_id, claim.token)

    def abandon(self, claim: Claim, undo: Callable[[], None]) -> None:
        """Undo what was written of the thread and remove its marker, while still holding it.

        Raises:
            TakenOver: another migration holds the thread now: what it wrote stays.
        """
        self.renew(claim, now=True)
        undo()
        self.store.delete_runs([claim.run_id])

    def _record(
        self, thread_id: str, *, parent: str | None, metadata: Mapping[str, Any]
    ) -> CheckpointRecord:
        header = CheckpointHeader(
            thread_id=thread_id,
            run_id=marker_id(thread_id),
            checkpoint_id=new_id(),
            parent_id=parent,
            step=0 if parent is None else 1,
            node=None,
            status=RunStatus.COMPLETED,
            next=None,
            metadata={"source": self.source, **metadata},
        )
        return codec.encode(header, {"source": self.source, **metadata}, self.storage)
