"""Exactly-once tools inside LangGraph nodes: ``durable_tool``.

LangGraph re-runs an interrupted node from its top (after a crash, an ``interrupt()``,
a retry of its ``RetryPolicy``), so a tool the node called before is called again:
the email goes out twice. A ``durable_tool`` journals each call in the thread's
store with savegame's rules (:class:`savegame.effects.Calls`): a write's intent is
committed before the call and its result after, and the node's re-run gets the
recorded result back instead of calling again. A write whose intent is on record but
not its result (the process died mid-call) is in doubt and handled as savegame does:
an idempotent tool is called again with the same ``request_id``, a ``reconcile``
asks the outside world, any other raises :class:`~savegame.errors.InDoubtEffectError`
until a person settles it (``savegame resolve RUN --effect ID``).

The request id names the call by where LangGraph runs it: the entry lives in the
journal of the (thread, namespace) line, under ``tool:<checkpoint>:<task>:<n>``.
LangGraph derives a task's id from the checkpoint it runs from, its namespace, step,
node and path, so the node's re-run from that checkpoint, in this process or another,
computes the same id. ``<n>`` is the call's position in the node's execution, counted
again from 0 at each execution and each retry; a call made by ``ToolNode`` is named by
the model's ``tool_call_id`` instead, because ToolNode runs a message's calls in
parallel threads, where a position would depend on scheduling. The thread is not in
the id: ``copy_thread`` copies the journal with the checkpoints, and the copy must not
send the email again either.

A call waits until the checkpoint its task runs from is stored (with
``durability="async"`` LangGraph writes it while the first tasks already run): an
entry hung on a checkpoint a crash lost would be found by no re-run, which would
start from an earlier checkpoint with other task ids. ``durability="exit"`` stores no
checkpoint before the end, so a durable tool refuses to run under it.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from langchain_core.tools import InjectedToolCallId
from langgraph.config import get_config

from savegame.effects import Backoff, Calls, ainvoke_call, invoke_call, tool
from savegame.errors import ConfigurationError, LeaseLostError
from savegame.integrations.langgraph._lines import TOOL_PREFIX, parent_ns
from savegame.integrations.langgraph._saver import SavegameSaver
from savegame.runtime import traced_tool_call
from savegame.signals import NeedsAttention

#: LangGraph's configurable keys (``langgraph._internal._constants``, private).
_CHECKPOINTER = "__pregel_checkpointer"
_TASK_ID = "__pregel_task_id"
_SCRATCHPAD = "__pregel_scratchpad"
_RUNTIME = "__pregel_runtime"
_DURABILITY = "__pregel_durability"
#: The parameter LangChain fills with the model's tool call id (hidden from the model).
CALL_ID = "tool_call_id"


def durable_tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    effect: Literal["read", "write"] = "write",
    idempotent: bool = False,
    reconcile: Callable[[str], Any] | None = None,
    safe_errors: tuple[type[BaseException], ...] = (),
    name: str | None = None,
    retries: int = 0,
    backoff: Backoff | float | None = None,
    timeout: float | None = None,
    retry_on: type[Exception] | tuple[type[Exception], ...] = Exception,
) -> Any:
    """Make a function a tool that runs once per call site of a LangGraph node, across
    crashes, interrupts and retries; usable bare (``@durable_tool``, a write) or with
    options, called directly in a node or handed to ``ToolNode`` / ``bind_tools``.

    The options are :func:`savegame.tool`'s: ``effect="read"`` for a call that is
    safe to repeat but worth not paying twice (its result is journaled too),
    ``idempotent=True`` for a tool that takes ``request_id`` and whose outside system
    deduplicates on it, ``reconcile(request_id)`` for one that can ask whether a call
    happened, ``safe_errors``, ``retries``, ``backoff``, ``timeout``, ``retry_on``.

    The graph must be compiled with a :class:`SavegameSaver` and run with
    ``durability="sync"`` or ``"async"`` (LangGraph's default).
    """
    spec = tool(
        effect=effect,
        idempotent=idempotent,
        reconcile=reconcile,
        safe_errors=safe_errors,
        # Nothing rides with a savegame checkpoint here: a read's result is committed at once.
        durable=True,
        name=name,
        retries=retries,
        backoff=Backoff() if backoff is None else backoff,
        timeout=timeout,
        retry_on=retry_on,
    )

    def wrap(func: Callable[..., Any]) -> Callable[..., Any]:
        made = spec(func)
        if CALL_ID in inspect.signature(func).parameters:
            raise ConfigurationError(
                f"tool {made.name}: the parameter {CALL_ID!r} is LangChain's (the model's "
                "tool call id, which a durable tool uses as its call's name): rename it"
            )

        if made.is_async:

            @functools.wraps(func)
            async def acall(*args: Any, tool_call_id: str | None = None, **kwargs: Any) -> Any:
                site = _Site.here(made.name, tool_call_id)
                calls, prepared = await asyncio.to_thread(site.prepare, made, args, kwargs)
                with traced_tool_call(calls.run_id, calls.step, made.name) as traced:
                    traced.prepared(prepared)
                    if prepared.replay:
                        return prepared.result
                    try:
                        return await ainvoke_call(calls, made, prepared)
                    except NeedsAttention as signal:
                        raise signal.error from None

            wrapper: Callable[..., Any] = acall
        else:

            @functools.wraps(func)
            def call(*args: Any, tool_call_id: str | None = None, **kwargs: Any) -> Any:
                site = _Site.here(made.name, tool_call_id)
                calls, prepared = site.prepare(made, args, kwargs)
                with traced_tool_call(calls.run_id, calls.step, made.name) as traced:
                    traced.prepared(prepared)
                    if prepared.replay:
                        return prepared.result
                    try:
                        return invoke_call(calls, made, prepared)
                    except NeedsAttention as signal:
                        raise signal.error from None

            wrapper = call
        _as_langchain_sees_it(wrapper, func)
        wrapper.savegame_tool = made  # type: ignore[attr-defined]
        return wrapper

    if fn is not None:
        return wrap(fn)
    return wrap


def _as_langchain_sees_it(wrapper: Callable[..., Any], func: Callable[..., Any]) -> None:
    """The signature a model is shown: the function's, without ``request_id`` (savegame's
    to pass), plus ``tool_call_id`` marked as LangChain's to inject (never the model's)."""
    signature = inspect.signature(func)
    params = [p for p in signature.parameters.values() if p.name != "request_id"]
    injected = Annotated[str | None, InjectedToolCallId]
    params.append(
        inspect.Parameter(
            CALL_ID, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=injected
        )
    )
    wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
    annotations = {k: v for k, v in getattr(func, "__annotations__", {}).items()}
    annotations.pop("request_id", None)
    wrapper.__annotations__ = {**annotations, CALL_ID: injected}


@dataclass
class _Execution:
    """One execution (one attempt) of one task: the position of its next call."""

    scratchpad: Any
    runtime: Any
    """Held so their ids, the key of this execution, are not reused while it is kept."""
    next: int = 0


_executions: OrderedDict[tuple[int, int], _Execution] = OrderedDict()
_executions_lock = threading.Lock()
#: Executions remembered; an older one (a task making calls while 4,096 newer ones
#: started) would count its calls from 0 again and stop on NonDeterminismError.
_KEPT = 4096


def _position(scratchpad: Any, runtime: Any) -> int:
    """The next call's position in this task execution. LangGraph makes a new scratchpad
    each time it prepares a task (a re-run after an interrupt) and a new runtime for each
    attempt of its retry policy: either starts the count again."""
    key = (id(scratchpad), id(runtime))
    with _executions_lock:
        execution = _executions.get(key)
        if execution is None or execution.scratchpad is not scratchpad:
            execution = _Execution(scratchpad, runtime)
            _executions[key] = execution
            while len(_executions) > _KEPT:
                _executions.popitem(last=False)
        _executions.move_to_end(key)
        position = execution.next
        execution.next += 1
        return position


@dataclass(frozen=True)
class _Site:
    """Where a durable tool is called: the saver, thread, namespace, checkpoint and task."""

    saver: SavegameSaver
    thread_id: str
    ns: str
    checkpoint_id: str
    task_id: str
    step: int
    node: str
    index: int
    call_id: str | None

    @classmethod
    def here(cls, name: str, call_id: str | None) -> _Site:
        try:
            config = get_config()
        except RuntimeError:
            raise ConfigurationError(
                f"tool {name} is a durable_tool: call it inside a LangGraph node (it finds "
                "the thread, task and checkpoint in the node's config)"
            ) from None
        conf = config.get("configurable", {})
        saver = conf.get(_CHECKPOINTER)
        if not isinstance(saver, SavegameSaver):
            raise ConfigurationError(
                f"tool {name} is a durable_tool: compile the graph with "
                "checkpointer=SavegameSaver(...), where its calls are journaled "
                f"(this graph's checkpointer is {type(saver).__name__})"
            )
        if conf.get(_DURABILITY) == "exit":
            raise ConfigurationError(
                f"tool {name} is a durable_tool, and durability='exit' stores no checkpoint "
                "before the graph ends, so a re-run could not find its call: use 'sync' or 'async'"
            )
        task_ns = str(conf.get("checkpoint_ns", ""))
        ns = parent_ns(task_ns)
        scratchpad = conf.get(_SCRATCHPAD)
        return cls(
            saver=saver,
            thread_id=str(conf["thread_id"]),
            ns=ns,
            checkpoint_id=str(conf["checkpoint_map"][ns]),
            task_id=str(conf[_TASK_ID]),
            step=int(getattr(scratchpad, "step", 0)),
            node=str(config.get("metadata", {}).get("langgraph_node", "")),
            index=_position(scratchpad, conf.get(_RUNTIME)),
            call_id=call_id,
        )

    @property
    def request_id(self) -> str:
        name = self.call_id if self.call_id is not None else str(self.index)
        return f"{TOOL_PREFIX}{self.checkpoint_id}:{self.task_id}:{name}"

    def prepare(
        self, made: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[Calls, Any]:
        """The call's Calls over its journal entries, and what ``before`` decided."""
        arguments = made.bind(args, kwargs)
        lines = self.saver._lines
        line = lines.wait_stored(self.thread_id, self.ns, self.checkpoint_id)
        for again in (False, True):
            journal = lines.journal(line, self.request_id, fresh_lease=again)
            calls = Calls(
                journal,
                run_id=line.run_id,
                step=self.step,
                node=self.node,
                cancelled=lambda: False,
                request_ids=lambda _: self.request_id,
                first_index=self.index,
            )
            try:
                return calls, calls.before(made, arguments)
            except LeaseLostError:
                # Another saver (process) wrote this thread since: take the lease back,
                # once. Nothing was written under the lost token (the store fenced it).
                if again:
                    raise
            except NeedsAttention as signal:
                raise signal.error from None
        raise AssertionError("unreachable")
