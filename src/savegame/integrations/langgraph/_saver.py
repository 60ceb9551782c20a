"""SavegameSaver: LangGraph's BaseCheckpointSaver over a savegame store.

One implementation: the async methods run the sync ones in a worker thread, as
savegame's own async API does (STYLE.md: one implementation per store).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Collection, Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)

from savegame.codec.storage import StorageConfig
from savegame.integrations.langgraph import _prune, _rides, _types
from savegame.integrations.langgraph._lines import (
    CHANNEL,
    CHECKPOINT,
    COPY_OF,
    METADATA,
    NS_KEY,
    PARENT,
    REBUILD_OF,
    Announced,
    Line,
    Lines,
    Write,
    lg_id_of,
    stored_id,
)
from savegame.stores import Store, open_store

#: The channel of a node's error write (``langgraph.constants.ERROR`` is private since 1.0).
ERROR = "__error__"
#: ``list`` reads this many tuples' writes one checkpoint at a time, then the run's at once.
FEW_WRITES = 8


class SavegameSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer that keeps threads in a savegame store.

    Values are kept as LangGraph's own savers keep them (:mod:`._types`): the graph's
    pydantic models, dataclasses and enums without ``savegame.register`` (under
    ``LANGGRAPH_STRICT_MSGPACK``, only those LangGraph names at ``compile()``), tuples
    given back as lists, a node's error as ``repr(exc)``; never by pickle, and a value
    that is not data is refused with its path before the node's writes are recorded.

    Args:
        store: a store URL (``sqlite:///agent.db``, ``postgresql://...``, ``redis://...``)
            or an open :class:`~savegame.stores.Store`.
        storage: encryption, compression and the other storage settings; None reads
            the environment, as the rest of savegame does.
        strict: store only the graph's schema types LangGraph names at ``compile()``
            (and registered ones), as LangGraph's strict mode; None follows
            ``LANGGRAPH_STRICT_MSGPACK``, as LangGraph does.
    """

    def __init__(
        self,
        store: str | Store,
        *,
        storage: StorageConfig | None = None,
        strict: bool | None = None,
    ) -> None:
        super().__init__()
        _types.register_langgraph_types()
        self.store = open_store(store)
        self.types = _types.TypePolicy(_types.strict_by_default() if strict is None else strict)
        self._lines = Lines(self.store, storage, self.types.conventions())

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> SavegameSaver:
        """Allow the classes LangGraph found in the graph's schemas (``compile()`` calls
        this under ``LANGGRAPH_STRICT_MSGPACK``). The saver itself, not a copy: the types
        are the process's, and a copy would share its store and lines anyway."""
        self.types.allow(extra_allowlist)
        return self

    # -- reading ------------------------------------------------------------------
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        conf = config["configurable"]
        thread_id, ns = str(conf["thread_id"]), str(conf.get("checkpoint_ns", ""))
        line = self._lines.find(thread_id, ns)
        if line is None:
            return None
        lg_id = get_checkpoint_id(config)
        if lg_id is None:
            headers = self.store.list_checkpoints(line.run_id, limit=1)
            if not headers:
                return None
            lg_id = lg_id_of(headers[0].checkpoint_id)
        state = self._lines.load(stored_id(lg_id, line.run_id), line)
        if state is None:
            return None
        writes = self._lines.writes(line.run_id, lg_id).get(lg_id, [])
        return _tuple(thread_id, ns, state, writes)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        conf = config["configurable"] if config else {}
        threads = [str(conf["thread_id"])] if "thread_id" in conf else self._lines.threads()
        want_ns = conf.get("checkpoint_ns")
        want_id = get_checkpoint_id(config) if config else None
        before_id = get_checkpoint_id(before) if before else None
        candidates: list[tuple[str, str, str, str]] = []
        for thread_id in threads:
            for ns, run_id in self._lines.namespaces(thread_id).items():
                if want_ns is not None and ns != want_ns:
                    continue
                for header in self.store.list_checkpoints(run_id):
                    lg_id = lg_id_of(header.checkpoint_id)
                    if want_id and lg_id != want_id:
                        continue
                    if before_id and lg_id >= before_id:
                        continue
                    candidates.append((lg_id, thread_id, ns, run_id))
        candidates.sort(reverse=True)
        writes: dict[str, dict[str, list[Write]]] = {}
        served: dict[str, int] = {}
        left = limit
        for lg_id, thread_id, ns, run_id in candidates:
            if left is not None and left <= 0:
                return
            state = self._lines.load(stored_id(lg_id, run_id))
            if state is None:
                continue
            metadata = state[METADATA]
            if filter and not all(metadata.get(k) == v for k, v in filter.items()):
                continue
            # The first few tuples of a run read their own writes (an index range each),
            # so list(limit=1) of a long thread decodes two entries, not its whole journal;
            # a longer listing reads the run's writes once.
            served[run_id] = served.get(run_id, 0) + 1
            if run_id not in writes and served[run_id] > FEW_WRITES:
                writes[run_id] = self._lines.writes(run_id)
            found = writes[run_id] if run_id in writes else self._lines.writes(run_id, lg_id)
            if left is not None:
                left -= 1
            yield _tuple(thread_id, ns, state, found.get(lg_id, []))

    # -- writing ------------------------------------------------------------------
    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        conf = config["configurable"]
        thread_id, ns = str(conf["thread_id"]), str(conf.get("checkpoint_ns", ""))
        state = _state(
            checkpoint,
            dict(get_checkpoint_metadata(config, metadata)),
            conf.get("checkpoint_id"),
        )
        self._lines.append(thread_id, ns, state)
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        conf = config["configurable"]
        thread_id, ns = str(conf["thread_id"]), str(conf.get("checkpoint_ns", ""))
        lg_id = str(conf["checkpoint_id"])
        ride = conf.get(_rides.DURABILITY_KEY) in ("sync", "async")
        announced = self._lines.announce(thread_id, ns) if ride else None
        try:
            self._put_writes(thread_id, ns, lg_id, writes, task_id, task_path, announced)
        finally:
            if announced is not None:
                self._lines.landed(thread_id, ns, announced)

    def _put_writes(
        self,
        thread_id: str,
        ns: str,
        lg_id: str,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
        announced: Announced | None,
    ) -> None:
        # Every value encoded before any is recorded: one savegame refuses leaves none.
        found = self._lines.encoded_all(
            lg_id,
            [
                Write(
                    task_id,
                    channel,
                    _types.error_value(raw) if channel == ERROR else raw,
                    task_path,
                    WRITES_IDX_MAP.get(channel, index),
                )
                for index, (channel, raw) in enumerate(writes)
            ],
            self._lines.seen(thread_id, ns),
        )
        line = self._lines.early(thread_id, ns, lg_id, found)
        if line is None:
            return
        self._lines.put_writes(line, lg_id, found, announced=announced)

    # -- housekeeping -----------------------------------------------------------------
    def delete_thread(self, thread_id: str) -> None:
        with self._lines.lock:
            runs = [r.run_id for r in self._lines.runs(thread_id, unfinished=True)]
            if runs:
                self.store.delete_runs(runs)
            self._lines.forget(thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        doomed = set(run_ids)
        for thread_id in self._lines.threads():
            for ns, run_id in self._lines.namespaces(thread_id).items():
                hit = any(
                    self.store.list_checkpoints(run_id, limit=1, metadata={"run_id": r})
                    for r in doomed
                )
                if hit:
                    self._rebuild(
                        thread_id,
                        ns,
                        run_id,
                        thread_id,
                        drop=lambda s: s[METADATA].get("run_id") in doomed,
                    )

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        for ns, run_id in self._lines.namespaces(source_thread_id).items():
            self._rebuild(source_thread_id, ns, run_id, target_thread_id, drop=None)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest`` keeps what LangGraph's own prune keeps (:mod:`._prune`), and the
        checkpoints a ``DeltaChannel`` is rebuilt from; ``delete`` deletes the threads."""
        if isinstance(thread_ids, str):
            raise TypeError("thread_ids must be a sequence of thread ids, not a str")
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown prune strategy {strategy!r}: keep_latest or delete")
        for thread_id in thread_ids:
            if strategy == "delete":
                self.delete_thread(thread_id)
                continue
            # Decided from the thread as it is, before any namespace is rebuilt.
            plan = _prune.keep_latest(self._lines, thread_id)
            for ns, run_id in self._lines.namespaces(thread_id).items():
                keep = plan.get(run_id, set())
                if keep is None:
                    self._drop(thread_id, ns)
                else:
                    self._rebuild(thread_id, ns, run_id, thread_id, drop=None, keep=keep)

    def _drop(self, thread_id: str, ns: str) -> None:
        """Delete a namespace's runs (a finished subgraph call's)."""
        with self._lines.lock:
            runs = self._lines.runs(thread_id, unfinished=True)
            self.store.delete_runs([r.run_id for r in runs if r.metadata.get(NS_KEY) == ns])
            self._lines.forget(thread_id, ns)

    def _rebuild(
        self,
        thread_id: str,
        ns: str,
        run_id: str,
        target: str,
        *,
        drop: Any,
        keep: set[str] | None = None,
    ) -> None:
        """Re-encode the kept checkpoints of a line into a new run (then drop the old one,
        unless copying to another thread): a delta's bases stay with it."""
        with self._lines.lock:
            headers = sorted(self.store.list_checkpoints(run_id), key=lambda h: h.checkpoint_id)
            kept: list[dict[str, Any]] = []
            for header in headers:
                if keep is not None and header.checkpoint_id not in keep:
                    continue
                state = self._lines.load(header.checkpoint_id)
                if state is not None and not (drop is not None and drop(state)):
                    kept.append(state)
            kept = _prune.cut_parents(kept)
            copying = target != thread_id
            # Runs no reader uses (what a killed rebuild or copy left) go first.
            self.store.delete_runs(self._lines.leftovers(target, ns))
            if not copying and len(kept) == len(headers):
                return
            writes = self._lines.writes(run_id)
            origin = {COPY_OF if copying else REBUILD_OF: run_id}
            line: Line | None = None
            for state in kept:
                line = self._lines.append(target, ns, state, fresh=line is None, origin=origin)
                for write in writes.get(state[CHECKPOINT]["id"], []):
                    self._lines.put_write(line, state[CHECKPOINT]["id"], write)
            if line is not None:
                kept_ids = {state[CHECKPOINT]["id"] for state in kept}
                self._lines.copy_tool_calls(run_id, line, kept_ids)
                # Readers switch to the new run here, in one write; a kill before it
                # leaves them on the old run, a kill after it a run nobody reads.
                self._lines.finish(line)
            # Then every other run of the namespace goes: the one rebuilt (not the source
            # of a copy, which is in another thread), and what a killed rebuild, a copy
            # before or a rebuild killed before this delete left (readers skip them).
            if line is not None:
                self.store.delete_runs(self._lines.leftovers(target, ns))
            elif not copying:
                self.store.delete_runs([run_id])  # nothing kept: the namespace goes
            self._lines.forget(target, ns)

    def get_next_version(self, current: str | None, channel: None) -> str:
        """``<32-digit counter>.<random>``: ordered by the counter, unique across branches."""
        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(str(current).split(".")[0])
        return f"{number + 1:032}.{random.random():016}"

    # -- async: the sync methods in a worker thread -------------------------------------
    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        found = await asyncio.to_thread(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit))
        )
        for item in found:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)

    def close(self) -> None:
        self.store.close()


def _state(checkpoint: Checkpoint, metadata: dict[str, Any], parent: str | None) -> dict[str, Any]:
    """A LangGraph checkpoint as savegame state: one key per channel, so deltas follow channels."""
    values = checkpoint.get("channel_values", {})
    versions = checkpoint.get("channel_versions", {})
    rest = {k: v for k, v in checkpoint.items() if k != "channel_values"}
    state: dict[str, Any] = {CHECKPOINT: rest, METADATA: metadata, PARENT: parent}
    for name in versions:
        if name in values:
            state[CHANNEL + name] = values[name]
    return state


def _tuple(thread_id: str, ns: str, state: dict[str, Any], writes: list[Write]) -> CheckpointTuple:
    checkpoint = dict(state[CHECKPOINT])
    checkpoint["channel_values"] = {
        k[len(CHANNEL) :]: v for k, v in state.items() if k.startswith(CHANNEL)
    }
    parent = state[PARENT]

    def conf(lg_id: str) -> RunnableConfig:
        return {
            "configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": lg_id}
        }

    return CheckpointTuple(
        config=conf(checkpoint["id"]),
        checkpoint=checkpoint,  # type: ignore[arg-type]
        metadata=state[METADATA],
        parent_config=None if parent is None else conf(parent),
        pending_writes=[
            (w.task_id, w.channel, _types.error_text(w.value) if w.channel == ERROR else w.value)
            for w in writes
        ],
    )
