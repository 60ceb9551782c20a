"""Child runs: a step starts runs of other workflows on the same store and waits for them.

``ctx.start_child`` journals the child's id at its position first (derived from that
position unless given: ``<parent run>:<step>:<call>``), then creates the run queued,
its row naming its parent (``effects.PARENT_KEY``), in its parent's queue at its parent's
priority unless the step names others (:func:`placement`, checked before the entry is
journaled), and settles the entry: a parent that
dies anywhere in between creates it once (``create_run`` refuses a second run with that
id, and the one found must be this step's child). A worker claims the child like any
submitted run, or a parent that blocks (``run(..., wait=True)``) runs it here.

A child's end (completed with its final state, or failed, cancelled, compensating) is an
event for its parent on ``$child:<id>``, delivered by the store in the transaction of the
child's last checkpoint, so a child that dies after it is still heard and one that ends
is heard once. ``ctx.wait_children`` waits for those events: the parent holds no process
and the store wakes it when the last child it waits for has ended. A caller that blocks
on a parent already checkpointed waiting (``resume(..., wait=True)``) learns from
:func:`awaited` which children to run meanwhile: nobody else may.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from savegame import codec, secrets
from savegame.codec import canonical, open_entry, to_data
from savegame.codec.storage import StorageConfig
from savegame.effects import CHILD_TOPIC, PARENT_KEY, child_topic, end_event
from savegame.errors import ChildRunError, ConfigurationError, ConflictError
from savegame.model import EffectKind, EffectRecord, RunStatus, Waiting
from savegame.runtime import _lease as leases
from savegame.runtime._loader import as_workflow, reference_of
from savegame.runtime._setup import start_run
from savegame.stores import Enqueue, check_enqueue, queue_declared, queue_store
from savegame.stores.base import ALL_EFFECTS, Store

#: Statuses a child ends in, as far as its parent is concerned: it is told once.
ENDINGS = (
    RunStatus.COMPLETED,
    RunStatus.FAILED,
    RunStatus.CANCELLED,
    RunStatus.COMPENSATING,
    RunStatus.COMPENSATED,
    RunStatus.COMPENSATION_FAILED,
)


def input_digest(input: Mapping[str, Any] | None) -> str:
    """What a child's journal entry keeps of its input: a digest (the input is in the
    child's first checkpoint), enough to refuse another input at the same position."""
    if input is not None and not isinstance(input, Mapping):
        raise ConfigurationError(
            f"a child run's input must be a dict of state keys, not {type(input).__qualname__}"
        )
    data = canonical(to_data(dict(input or {}), "child input"))
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def placement(
    store: Store,
    parent_run_id: str,
    step: str,
    queue: str | None,
    priority: int | None,
) -> Enqueue | None:
    """Where a child goes in the fleet: ``queue`` (declared in the store), else its parent's
    queue; at ``priority``, else its parent's (0 for a parent of no queue). Never its
    parent's dedup key, which names the parent. Checked before the child is journaled,
    so a bad one fails the parent's step with nothing created.

    Raises:
        ConfigurationError: ``queue`` on a store without queues, or not declared in it; a
            bad name or priority; ``priority`` for a child of no queue.
    """
    where = f"run {parent_run_id} step {step!r}: start_child"
    queues = None if queue is None else queue_store(store, f"{where}(queue={queue!r})")
    parent = (
        queue_store(store, where).run_queue(parent_run_id) if store.capabilities.queues else None
    )
    if queue is None and parent is None:
        if priority is not None:
            raise ConfigurationError(
                f"{where}(priority={priority!r}): a priority needs a queue, and the parent "
                "is in none (give queue='name')"
            )
        return None
    # A parent of no queue passes on priority 0, as every run of no queue has.
    inherited = parent or Enqueue("", 0)
    chosen = Enqueue(
        inherited.queue if queue is None else queue,
        inherited.priority if priority is None else priority,
    )
    try:
        check_enqueue(chosen)
    except ConfigurationError as exc:
        raise ConfigurationError(f"{where}: {exc}") from None
    if queues is not None and not queue_declared(queues, chosen.queue):
        raise ConfigurationError(
            f"{where}(queue={queue!r}): no queue of that name is declared in the store "
            f"(savegame.client.declare_queue({queue!r}) or `savegame queues declare {queue}`)"
        )
    return chosen


def creator(
    store: Store,
    storage: StorageConfig | None,
    parent_run_id: str,
    workflow: Any,
    input: Mapping[str, Any] | None,
    enqueue: Enqueue | None,
) -> Callable[[str, str], None]:
    """What creates the child ``(child_id, request_id)``: queued (in ``enqueue``'s queue,
    when given), unowned, naming its parent; a run found under that id must be this
    call's child."""
    wf = as_workflow(workflow)

    def create(child_id: str, request_id: str) -> None:
        ref = reference_of(workflow)
        if ref is None:
            # A worker, or a blocking parent, loads the child's workflow from its reference.
            raise ConfigurationError(
                f"child workflow {wf.name!r} has no importable reference: define it at the "
                "top level of a module or file, so that whoever runs the child can load it"
            )
        meta = {PARENT_KEY: {"run": parent_run_id, "call": request_id}}
        try:
            start_run(
                wf, store, input, thread_id=None, run_id=child_id, metadata=meta,
                ttl=leases.DEFAULT_TTL, ref=ref, storage=storage, queued=True,
                enqueue=enqueue,
            )  # fmt: skip
        except ConflictError:
            # Created before a crash (its entry not settled yet), or another run's id.
            info = codec.verify_run(store.get_run(child_id), storage)
            mine = info.metadata.get(PARENT_KEY)
            if not (isinstance(mine, Mapping) and mine.get("call") == request_id):
                raise ConfigurationError(
                    f"run id {child_id} is taken by a run that is not this step's child "
                    f"(workflow {info.workflow!r}); give start_child another run_id"
                ) from None

    return create


def final_state(state: Mapping[str, Any], fields: Mapping[str, str]) -> dict[str, Any]:
    """What a completed child hands its parent: its state, declared secrets left out as
    references and savegame's own keys (``$sg:``) dropped."""
    shown = secrets.redact(dict(state), fields) if fields else dict(state)
    return {k: v for k, v in shown.items() if not k.startswith("$sg:")}


def ending(
    parent: str | None,
    run_id: str,
    status: RunStatus,
    *,
    state: Any = None,
    error: str | None = None,
    storage: StorageConfig | None,
) -> tuple[EffectRecord, ...]:
    """The event a run's checkpoint of ``status`` delivers to its ``parent``: none when it
    has none, or the status is no ending."""
    if parent is None or status not in ENDINGS:
        return ()
    kept = state if status is RunStatus.COMPLETED else None
    return (end_event(parent, run_id, status.value, state=kept, error=error, storage=storage),)


def outcome(run_id: str, child_run_id: str, value: Any) -> dict[str, Any]:
    """A child's end as its parent's step gets it: the final state, or ChildRunError."""
    if not isinstance(value, Mapping) or value.get("status") != RunStatus.COMPLETED.value:
        status = value.get("status") if isinstance(value, Mapping) else None
        error = value.get("error") if isinstance(value, Mapping) else None
        raise ChildRunError(run_id, child_run_id, str(status), error)
    state = value.get("state")
    return dict(state) if isinstance(state, Mapping) else {}


def started(entries: Sequence[EffectRecord]) -> list[str]:
    """The child run ids journaled in ``entries`` (a run's journal), oldest first."""
    return [
        e.metadata["child"]
        for e in entries
        if e.kind is EffectKind.CHILD and isinstance(e.metadata.get("child"), str)
    ]


def children_of(store: Store, run_id: str, storage: StorageConfig | None) -> list[str]:
    """The runs ``run_id`` started as children, oldest first (each entry verified)."""
    found = store.list_effects(run_id, kinds=[EffectKind.CHILD], limit=ALL_EFFECTS)
    return started([open_entry(e, storage) for e in found])


def awaited(store: Store, run_id: str, storage: StorageConfig | None) -> Waiting | None:
    """What a run checkpointed waiting waits for, as its latest checkpoint says (None when
    it does not wait); of the child runs it names, only those its own journal started
    (each entry verified), since a caller that blocks on the run executes them."""
    if store.get_run(run_id).status is not RunStatus.WAITING:
        return None
    waiting = Waiting.from_metadata(store.latest_checkpoint(run_id).header.metadata)
    mine = {child_topic(c) for c in children_of(store, run_id, storage)}
    topics = tuple(t for t in waiting.topics if not t.startswith(CHILD_TOPIC) or t in mine)
    return replace(waiting, topics=topics, need=min(waiting.need, len(topics)))
