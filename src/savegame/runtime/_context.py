"""What a step sees besides its state: ids, effects, model calls, interrupts, usage and
checkpoint control."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from savegame.codec import refuse_reserved
from savegame.effects import (
    Calls,
    ChatModel,
    ChildRun,
    ModelCall,
    ModelResponse,
    Tool,
    ToolSpec,
    Waits,
    ainvoke_call,
    as_delta,
    as_response,
    as_tool,
    check_topic,
    child_topic,
    invoke_call,
    patched,
)
from savegame.errors import ConfigurationError
from savegame.model import ZERO_USAGE, EffectRecord, Usage
from savegame.runtime._branches import as_branches, branch_calls, run_branches
from savegame.runtime._children import creator, input_digest, outcome, placement, started
from savegame.runtime._loader import as_workflow
from savegame.runtime._trace import OFF, Span, answered, model_span, tool_span
from savegame.secrets import Secret


@dataclass
class StepContext:
    """Passed to every step as its second argument.

    A context lives for one execution of one step; everything a step wants to
    keep must go into the state update it returns.
    """

    run_id: str
    thread_id: str
    node: str
    """The name of the running step."""
    step: int
    """The index this step will have once done (1 for the first step of a run)."""
    parent_checkpoint_id: str | None
    """The checkpoint this step started from, when one was taken."""
    calls: Calls | None = None
    _usage: Usage = ZERO_USAGE
    _force: bool = False
    _metadata: dict[str, Any] = field(default_factory=dict)

    def _calls(self) -> Calls:
        if self.calls is None:
            raise ConfigurationError("this context has no journal (it is not running inside a run)")
        return self.calls

    def call(self, tool: Any, /, *args: Any, **kwargs: Any) -> Any:
        """Call a tool exactly once across crashes and re-executions.

        A recorded result is returned without calling again. A write's intent is
        committed before the call and its result after. A tool gated by approval
        pauses the run until a person decides. A tool with ``retries`` is called again
        while that is safe, each attempt journaled; one with ``timeout`` raises
        TimedOutError when an attempt takes longer. See ``savegame.tool``.

        Raises:
            ApprovalRejected: a person rejected the call.
            NonDeterminismError: the journal holds a different call at this position.
            TimedOutError: the last attempt ran past the tool's ``timeout``.
        """
        spec = as_tool(tool)
        if spec.is_async:
            raise ConfigurationError(f"tool {spec.name} is async: use `await ctx.acall(...)`")
        calls = self._calls()
        with tool_span(self.run_id, self.step, spec.name) as span:
            prepared = calls.before(spec, spec.bind(args, kwargs))
            span.set(_call_attributes(prepared))
            # Counted whether replayed or not, so a resumed run's usage equals an
            # uninterrupted one's.
            self.add_usage(tool_calls=1)
            if prepared.replay:
                return prepared.result
            return invoke_call(calls, spec, prepared)

    async def acall(self, tool: Any, /, *args: Any, **kwargs: Any) -> Any:
        """Async twin of :meth:`call`; journal writes run in a worker thread."""
        spec = as_tool(tool)
        calls = self._calls()
        with tool_span(self.run_id, self.step, spec.name) as span:
            prepared = await asyncio.to_thread(calls.before, spec, spec.bind(args, kwargs))
            span.set(_call_attributes(prepared))
            self.add_usage(tool_calls=1)
            if prepared.replay:
                return prepared.result
            return await ainvoke_call(calls, spec, prepared)

    def llm(
        self,
        model: ChatModel,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[ToolSpec | Tool | Callable[..., Any]] = (),
        stream: OnChunk | None = None,
    ) -> ModelResponse:
        """Call a model once across crashes: the response is journaled before it returns.

        A re-executed step gets the recorded response back without paying again. The
        response's tokens and cost are added to the run's usage (replayed or not, so a
        resumed run counts the call once, like an uninterrupted one).

        Args:
            model: a ChatModel (``complete(messages, tools)``, plain; async models go
                through :meth:`allm`).
            messages: the conversation, dicts in the OpenAI shape.
            tools: what the model may call: ToolSpecs, ``@tool``s or plain functions.
            stream: called with each piece of the answer's text as it arrives (a model's
                ``stream`` method; one that has none delivers its answer as one piece).
                Only the final message is journaled; a stream a crash cut off recorded
                nothing, so the model is asked again, and the journal says so (a marker
                settled ``abandoned``). A replayed call delivers its recorded text as one
                piece.

        Raises:
            NonDeterminismError: the journal holds another call at this position (another
                model, other messages or tools).
            ConfigurationError: the model is async, or returned something else than a
                ModelResponse.
        """
        call = ModelCall.of(model, messages, tools)
        calls = self._calls()
        with model_span(self.run_id, self.step, model, _model_name(call)) as span:
            prepared = calls.before_llm(call)
            span.set(_call_attributes(prepared))
            if prepared.replay:
                return self._count(_replayed(prepared.result, stream), span, replayed=True)
            marker = None if stream is None else calls.stream_started(prepared)
            try:
                response = call.checked(_ask(model, call, stream))
            except BaseException as exc:
                _cut(calls, marker, exc)
                raise
            calls.after_llm(prepared, response.to_dict())
            if marker is not None:
                calls.stream_ended(marker)
            return self._count(response, span)

    async def allm(
        self,
        model: ChatModel,
        messages: Sequence[Mapping[str, Any]],
        *,
        tools: Sequence[ToolSpec | Tool | Callable[..., Any]] = (),
        stream: OnChunk | None = None,
    ) -> ModelResponse:
        """Async twin of :meth:`llm`, for plain and async models (a model's ``acomplete``
        or ``astream`` is awaited when it has one); journal writes run in a worker thread."""
        call = ModelCall.of(model, messages, tools)
        calls = self._calls()
        with model_span(self.run_id, self.step, model, _model_name(call)) as span:
            prepared = await asyncio.to_thread(calls.before_llm, call)
            span.set(_call_attributes(prepared))
            if prepared.replay:
                return self._count(_replayed(prepared.result, stream), span, replayed=True)
            marker = (
                None if stream is None else await asyncio.to_thread(calls.stream_started, prepared)
            )
            try:
                out = _aask(model, call, stream)
                response = call.checked(await out if inspect.isawaitable(out) else out)
            except BaseException as exc:
                await asyncio.to_thread(_cut, calls, marker, exc)
                raise
            await asyncio.to_thread(calls.after_llm, prepared, response.to_dict())
            if marker is not None:
                await asyncio.to_thread(calls.stream_ended, marker)
            return self._count(response, span)

    def _count(
        self, response: ModelResponse, span: Span = OFF, *, replayed: bool = False
    ) -> ModelResponse:
        answered(span, response, replayed=replayed)
        self.add_usage(
            input_tokens=response.input_tokens,
            output_tokens=response.output_tokens,
            cost_usd=response.cost_usd,  # an unknown price makes the run's unknown: no guess
            llm_calls=1,
        )
        return response

    def interrupt(self, payload: Any = None, *, name: str = "interrupt") -> Any:
        """Pause the run until a person supplies a value; return that value on resume.

        The first time, the run is checkpointed with status ``interrupted`` and
        the process stops working on it. ``savegame resume RUN --value JSON``
        (or ``resume(run_id, value=...)``) re-executes the step, and this call
        then returns the value.
        """
        return self._calls().interrupt(name, payload)

    def patched(self, patch_id: str) -> bool:
        """Whether this run takes the patched code at this point: True where it comes here
        for the first time, False where it already went past here under code without
        the patch (a step re-executed after a crash, a pause or a wait), so it keeps the
        path its recorded calls were made on.

        Temporal's ``workflow.patched`` made for step replay: the point is the position
        of the step's next call. The answer is decided once and journaled (an entry of
        kind ``patch`` before that call), so a re-execution, a resume and a fork get the
        same one. A run the new path is new to gets True even when earlier steps ran
        under older code: a finished step never runs again. See
        docs/guides/changing-agents.md.

        Example::

            if ctx.patched("ask-before-refund"):
                ctx.call(ask_manager, order_id)   # new runs, and runs not here yet
            ctx.call(refund, order_id)

        Args:
            patch_id: names the change: a short string without ``:``, the same in every
                release that keeps the branch.

        Raises:
            NonDeterminismError: the journal holds another entry under the marker's id.
        """
        return patched(self._calls(), patch_id)

    def deprecate_patch(self, patch_id: str) -> None:
        """Say the code keeps only the patched path of ``patch_id`` (no run that took the
        old path is left): a fresh run records the patch taken, so code rolled back to
        :meth:`patched` agrees; a run whose marker says it kept the old path (or a fork
        whose origin kept it there) stops with NonDeterminismError instead of going down
        the new one.
        """
        patched(self._calls(), patch_id, deprecated=True)

    def _waits(self, what: str) -> Waits:
        calls = self._calls()
        store = calls.journal.store
        if not store.capabilities.waits:
            raise ConfigurationError(
                f"{what}: the store {store.url} cannot keep a run waiting "
                "(it does not claim Capabilities.waits)"
            )
        return Waits(calls)

    def wait_for(self, topic: str, *, timeout: timedelta | float | None = None) -> Any:
        """Wait for an event on ``topic`` and return its value, holding no process meanwhile.

        Events come from ``savegame.send(run_id, topic, value)`` or ``savegame send``, from
        any process. An event sent before the run waits is kept for it; each is taken by
        one wait, oldest first. The first time, when none is there, the run is checkpointed
        ``waiting`` and this process is done with it; the event wakes it (a worker, or
        ``resume``, continues it) and the step runs again from its start, its recorded
        calls replayed, this call then returning the value.

        Args:
            topic: what to wait for (not starting with ``$``: savegame's own topics).
            timeout: a timedelta or seconds; the due time is computed the first time and
                recorded, so a resume does not wait from a new start.

        Raises:
            WaitTimedOutError: nothing came before the due time (recorded: a re-executed
                step gets the same error; a later event waits for the next wait).
        """
        check_topic(topic)
        delta = None if timeout is None else as_delta(timeout, "wait_for timeout")
        return self._waits(f"wait_for({topic!r})").events([topic], delta)[0]

    def sleep(self, duration: timedelta | float) -> None:
        """Sleep ``duration`` (a timedelta or seconds), durably, holding no process.

        The wake-up time is computed once, the first time, and journaled: a step run
        again after a crash or a resume sleeps until that time, never from a new start,
        and once it has passed the call returns at once. Until then the run is
        checkpointed ``waiting`` with its due time; a worker (or ``resume``, or
        ``run(..., wait=True)`` blocking here) continues it when due, the step running
        again from its start, its recorded calls replayed.
        """
        delta = as_delta(duration, "sleep duration")
        self._waits("sleep").sleep(lambda now: now + delta)

    def sleep_until(self, when: datetime) -> None:
        """Sleep until ``when`` (a timezone-aware datetime), durably: see :meth:`sleep`.

        The time given the first time is the one recorded; a step that computes another
        when it runs again still wakes at the first.

        Raises:
            ConfigurationError: ``when`` is not a datetime, or is naive.
        """
        if not isinstance(when, datetime) or when.tzinfo is None or when.utcoffset() is None:
            raise ConfigurationError(
                f"sleep_until needs a timezone-aware datetime, not {when!r} "
                "(datetime.now(timezone.utc) + ..., say)"
            )
        self._waits("sleep_until").sleep(lambda now: when)

    def start_child(
        self,
        workflow: Any,
        input: Mapping[str, Any] | None = None,
        *,
        run_id: str | None = None,
        queue: str | None = None,
        priority: int | None = None,
    ) -> ChildRun:
        """Start a child run of ``workflow`` on this run's store, exactly once across crashes.

        Its id is ``run_id`` or, by default, derived from this call's position, and is
        journaled before the run is created queued: a step run again gets the same child
        back, never a second one. A worker claims it, or a parent that blocks
        (``run(..., wait=True)``) runs it here; its workflow must import from a module or
        file (as for ``submit``). Wait for it with :meth:`wait_children`.

        Args:
            queue: the declared queue the child goes in; by default its parent's (none
                for a parent of no queue), so a worker of that queue runs it within the
                queue's limits.
            priority: the child's priority in its queue; by default its parent's.

        Raises:
            NonDeterminismError: this position started another workflow, input or id before.
            ConfigurationError: ``run_id`` is taken by a run that is not this call's child;
                ``queue`` on a store without queues or not declared in it (nothing is
                started: the step fails).
        """
        waits = self._waits("start_child")
        calls = self._calls()
        store = calls.journal.store
        wf = as_workflow(workflow)
        where = placement(store, self.run_id, self.node, queue, priority)
        create = creator(store, calls.journal.storage, self.run_id, workflow, input, where)
        child_id = waits.child(wf.name, run_id, input_digest(input), create)
        return ChildRun(child_id, wf.name)

    def wait_children(
        self,
        children: Sequence[ChildRun | str],
        *,
        timeout: timedelta | float | None = None,
    ) -> list[dict[str, Any]]:
        """Wait until every one of ``children`` has ended; their final states, in order.

        No process waits: the run is checkpointed ``waiting`` and the store wakes it when
        the last of them ends (each child's end is an event for this run, delivered with
        its last checkpoint). What each ended with is journaled here, so a replay gets
        the same answer.

        Raises:
            ChildRunError: one ended without a result (failed, cancelled ...): the first
                such, in the order given.
            WaitTimedOutError: ``timeout`` passed before all had ended.
            ConfigurationError: one is not a child this run started.
        """
        ids = [c.run_id if isinstance(c, ChildRun) else c for c in children]
        mine = set(started(self._calls().journal.entries()))
        strangers = [i for i in ids if i not in mine]
        if strangers:
            raise ConfigurationError(
                f"run {self.run_id}: {', '.join(map(repr, strangers))} is not a child run "
                "it started (ctx.start_child)"
            )
        delta = None if timeout is None else as_delta(timeout, "wait_children timeout")
        ends = self._waits("wait_children").events([child_topic(i) for i in ids], delta)
        return [outcome(self.run_id, i, end) for i, end in zip(ids, ends, strict=True)]

    def wait_child(
        self, child: ChildRun | str, *, timeout: timedelta | float | None = None
    ) -> dict[str, Any]:
        """Wait until ``child`` has ended; its final state (see :meth:`wait_children`)."""
        return self.wait_children([child], timeout=timeout)[0]

    def run_child(
        self,
        workflow: Any,
        input: Mapping[str, Any] | None = None,
        *,
        run_id: str | None = None,
        queue: str | None = None,
        priority: int | None = None,
        timeout: timedelta | float | None = None,
    ) -> dict[str, Any]:
        """Start a child run and wait for it: :meth:`start_child`, then :meth:`wait_child`."""
        child = self.start_child(workflow, input, run_id=run_id, queue=queue, priority=priority)
        return self.wait_child(child, timeout=timeout)

    async def gather(
        self,
        *branches: Callable[[StepContext], Awaitable[Any]],
        concurrency: int | None = None,
    ) -> list[Any]:
        """Run ``branches`` concurrently; their results, in the order given.

        A branch is ``async def branch(ctx)`` given a context of its own: its calls
        (``await ctx.acall``, ``await ctx.allm``, ``ctx.start_child`` ...) are numbered
        within the branch, so their request ids are the same whatever order the
        branches finish in, and each is journaled as in a step (a crash mid-way re-runs
        only the calls that had not finished). Every branch runs to its end even if one
        raises; then the first error, in branch order, is raised. ``concurrency``: at
        most that many at once. For an async step; a fork reuses a branch's calls from
        its origin while the branch makes the same calls.
        """
        calls = self._calls()
        _, base = calls._next_id()
        numbered = [branch_calls(calls, base, k) for k in range(len(branches))]
        contexts = [self._branch(c) for c in numbered]
        try:
            return await run_branches(contexts, branches, concurrency)
        finally:
            if calls.replay is not None:
                made = [c.made for c in numbered]
                calls.replay.gather_done(calls.position(base), calls.node, made)
            for branch in contexts:
                self._usage = self._usage + branch._usage
                self._metadata.update(branch._metadata)
                self._force = self._force or branch._force

    async def map(
        self,
        fn: Callable[[StepContext, Any], Awaitable[Any]],
        items: Iterable[Any],
        *,
        concurrency: int | None = None,
    ) -> list[Any]:
        """``await fn(ctx, item)`` for each item, concurrently (at most ``concurrency`` at
        once), each a branch of :meth:`gather`; the results in the items' order."""
        return await self.gather(*as_branches(fn, items), concurrency=concurrency)

    def _branch(self, calls: Calls) -> StepContext:
        return StepContext(
            self.run_id, self.thread_id, self.node, self.step, self.parent_checkpoint_id, calls
        )

    def secret(self, name: str) -> Secret:
        """A secret from the secrets provider (environment variables by default).

        Keep the returned Secret in the state if a later step needs it: only its
        name is saved, and ``secret.reveal()`` looks the value up again, also
        after a resume on another machine.

        Raises:
            ConfigurationError: the provider does not know ``name``.
        """
        secret = Secret(name)
        secret.reveal()  # fail now, at the step that asked, not later
        return secret

    def checkpoint(self) -> None:
        """Force a checkpoint after this step, whatever the policy says."""
        self._force = True

    def add_usage(
        self,
        *,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cost_usd: float | None = 0.0,
        llm_calls: int = 0,
        tool_calls: int = 0,
    ) -> None:
        """Add to the run's usage counters (saved with the next checkpoint); ``cost_usd``
        None for a call whose price is unknown, which makes the run's cost unknown."""
        self._usage = self._usage + Usage(
            input_tokens, output_tokens, cost_usd, llm_calls, tool_calls
        )

    def tag(self, **metadata: Any) -> None:
        """Attach metadata (JSON scalars) to the checkpoint taken after this step."""
        refuse_reserved(metadata, f"step {self.node!r} metadata")
        self._metadata.update(metadata)

    @property
    def usage(self) -> Usage:
        """Usage added by this step so far."""
        return self._usage

    @property
    def forced(self) -> bool:
        return self._force

    @property
    def metadata(self) -> Mapping[str, Any]:
        return self._metadata


OnChunk = Callable[[str], Any]
"""What ``stream=`` takes: called with each piece of a model's answer as it arrives."""


def _model_name(call: ModelCall) -> str:
    return call.name.removeprefix("llm:")


def _call_attributes(prepared: Any) -> dict[str, Any]:
    """A call's journal identity on its span: what to look up in ``savegame effects``."""
    return {
        "savegame.request_id": prepared.request_id,
        "savegame.effect.kind": str(getattr(prepared.kind, "value", prepared.kind)),
        "savegame.replayed": prepared.replay,
    }


def _replayed(result: Any, stream: OnChunk | None) -> ModelResponse:
    response = as_response(result, 0)
    if stream is not None and response.content:
        stream(response.content)
    return response


def _ask(model: ChatModel, call: ModelCall, stream: OnChunk | None) -> Any:
    streamer = getattr(model, "stream", None) if stream is not None else None
    if streamer is not None:
        return streamer(call.messages, call.specs, stream)
    out = model.complete(call.messages, call.specs)
    if stream is not None and isinstance(out, ModelResponse) and out.content:
        stream(out.content)  # a model that cannot stream: its answer as one piece
    return out


async def _aask(model: ChatModel, call: ModelCall, stream: OnChunk | None) -> Any:
    # A model with an async twin (the savegame.models adapters) is awaited, not run on
    # the event loop's thread.
    if stream is not None:
        streamer = getattr(model, "astream", None) or getattr(model, "stream", None)
        if streamer is not None:
            out = streamer(call.messages, call.specs, stream)
            return await out if inspect.isawaitable(out) else out
    asker = getattr(model, "acomplete", None) or model.complete
    out = asker(call.messages, call.specs)
    response = await out if inspect.isawaitable(out) else out
    if stream is not None and isinstance(response, ModelResponse) and response.content:
        stream(response.content)
    return response


def _cut(calls: Calls, marker: EffectRecord | None, error: BaseException) -> None:
    """A stream that raised: its marker says so. If even that cannot be written, the
    marker stays pending and the next execution settles it abandoned; the step's own
    error is the one to raise."""
    if marker is not None:
        with contextlib.suppress(Exception):
            calls.stream_ended(marker, error)
