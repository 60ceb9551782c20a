"""SavegameRunner: the Agents SDK's ``Runner.run`` as calls of a savegame step.

A run starts from its input on every execution of the step: the SDK's loop runs
again, its model requests and tool calls answered from the step's journal up to where
the last execution stopped (a kill, a pause for a person), then made for real. So
there is no SDK ``RunState`` to keep: the journal is the run's state, and the step's
checkpoint holds what the step returns (:class:`AgentRun`, pure data).

Determinism: the journal numbers a step's calls by position, and the SDK starts all
function tools of a turn at once by default, so their positions would follow whichever
started first. The run config's ``tool_execution.max_function_tool_concurrency`` is
set to 1: the SDK then runs a turn's tools one after another in the order the model
asked for them, and every execution numbers them the same. (Keying calls by the
model's call ids instead would not do: Chat Completions servers reuse ids such as
``call_0`` across turns.)

An agent called as a tool (``Agent.as_tool``) runs through ``Runner.run`` inside the
outer run's tool call; the SDK's default runner is chained once, on first use, so
such a run is copied the same way (:class:`_Chained`, a pass-through anywhere else).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from agents import Agent, AgentsException, Model, RunConfig, RunResult, RunState
from agents.run import (
    AgentRunner,
    ToolExecutionConfig,
    get_default_agent_runner,
    set_default_agent_runner,
)
from agents.usage import serialize_usage
from pydantic_core import to_jsonable_python

from savegame.codec import register
from savegame.errors import ConfigurationError
from savegame.integrations.openai_agents import _scope
from savegame.integrations.openai_agents._declare import Unit
from savegame.integrations.openai_agents._graph import Graph
from savegame.integrations.openai_agents._model import DurableModel, DurableProvider
from savegame.integrations.openai_agents._tools import ours
from savegame.runtime import StepContext

_active: ContextVar[SavegameRunner | None] = ContextVar(
    "savegame_openai_agents_runner", default=None
)


@register(name="savegame.openai_agents.AgentRun")
@dataclass(frozen=True, slots=True)
class AgentRun:
    """What an Agents SDK run ended with, as pure data a step can return or keep."""

    final_output: Any
    """The last agent's final output (a pydantic model's as its JSON)."""
    last_agent: str
    """The name of the agent that gave it (after handoffs)."""
    usage: dict[str, Any] = field(default_factory=dict)
    """The SDK's usage of the whole run (``agents.usage.serialize_usage``)."""
    items: list[Any] = field(default_factory=list)
    """The conversation as input items for a next run (``RunResult.to_input_list()``)."""

    @classmethod
    def of(cls, result: RunResult) -> AgentRun:
        output = result.final_output
        if hasattr(output, "model_dump"):
            output = output.model_dump(mode="json")
        return cls(
            final_output=output,
            last_agent=result.last_agent.name,
            usage=serialize_usage(result.context_wrapper.usage),
            items=to_jsonable_python(result.to_input_list()),
        )


class SavegameRunner:
    """Runs an Agents SDK agent as journaled calls of a savegame step::

        runner = SavegameRunner(tools={"refund": {"effect": "write", "approval": True}})

        @flow.step(entry=True)
        async def answer(state, ctx):
            result = await runner.run(ctx, agent, state["question"])
            return {"answer": result.final_output}, END

    Tools are reads unless declared otherwise, by name here or with :func:`declare`; a
    function tool with the SDK's ``needs_approval`` is a write gated by savegame's
    approval. The options are :func:`savegame.tool`'s: ``effect``, ``idempotent`` (the
    tool reads :func:`request_id`), ``approval``, ``reconcile``, ``safe_errors``.
    """

    def __init__(self, *, tools: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        self.tools = {
            name: Unit.of(options, f"SavegameRunner(tools=...)[{name!r}]")
            for name, options in (tools or {}).items()
        }

    def prepare(
        self, agent: Agent[Any], given: RunConfig | Mapping[str, Any] | None
    ) -> tuple[Agent[Any], RunConfig]:
        """The durable copy of ``agent`` and the run config to run it with (``given``: the
        caller's, as ``Runner.run`` takes it: a RunConfig, its fields as a dict, or None)."""
        if isinstance(given, RunConfig):
            config = given
        elif isinstance(given, Mapping):
            config = RunConfig(**given)
        else:
            config = RunConfig()
        provider = config.model_provider
        if not isinstance(provider, DurableProvider):
            provider = DurableProvider(provider)
        model = config.model
        if isinstance(model, Model) and not isinstance(model, DurableModel):
            model = DurableModel(model)
        one_at_a_time = dataclasses.replace(
            config.tool_execution or ToolExecutionConfig(), max_function_tool_concurrency=1
        )
        config = dataclasses.replace(
            config, model_provider=provider, model=model, tool_execution=one_at_a_time
        )
        return Graph(self.tools).agent(agent), config

    async def run(
        self, ctx: StepContext, agent: Agent[Any], input: Any, **kwargs: Any
    ) -> RunResult:
        """``Runner.run(agent, input, **kwargs)`` as journaled calls of ``ctx``'s step.

        Raises:
            ConfigurationError: ``input`` is an SDK ``RunState`` (a step resumes by
                replaying its journal, not from one), or the run ended waiting on an
                approval savegame cannot gate (a hosted MCP tool's, a shell
                tool's).
        """
        if isinstance(input, RunState):
            raise ConfigurationError(
                f"run {ctx.run_id}, step {ctx.node!r}: savegame's runner starts from the "
                "run's input and replays its journal; pass the input, not a RunState"
            )
        _install()
        copy, config = self.prepare(agent, kwargs.pop("run_config", None))
        with _scope.durable(ctx), self._active(), _alone(ctx):
            try:
                result = await AgentRunner().run(copy, input, run_config=config, **kwargs)
            except AgentsException as error:
                found = ours(error)
                if found is error:
                    raise
                raise found from error
        if result.interruptions:
            names = sorted({str(getattr(i, "name", None) or i) for i in result.interruptions})
            raise ConfigurationError(
                f"run {ctx.run_id}, step {ctx.node!r}: the agent waits for approvals savegame "
                f"does not gate: {names} (function tools' and agent tools' needs_approval "
                "map onto savegame's approvals; other tools' do not)"
            )
        return result

    @contextmanager
    def _active(self) -> Iterator[None]:
        token = _active.set(self)
        try:
            yield
        finally:
            _active.reset(token)


_running: set[int] = set()
"""The journals (one per step execution, one per ``ctx.gather`` branch) with an Agents
SDK run in progress."""


@contextmanager
def _alone(ctx: StepContext) -> Iterator[None]:
    """Refuse a second run at once on one journal: the two would take the step's
    positions in whatever order their calls happened to come."""
    key = id(ctx.calls)
    if key in _running:
        raise ConfigurationError(
            f"run {ctx.run_id}, step {ctx.node!r}: two Agents SDK runs at once in one step "
            "would number their calls in the order they happen to run; run them in "
            "branches of their own: await ctx.gather(lambda c: run_agent(c, ...), ...)"
        )
    _running.add(key)
    try:
        yield
    finally:
        _running.discard(key)


async def run_agent(
    ctx: StepContext,
    agent: Agent[Any],
    input: Any,
    *,
    tools: Mapping[str, Mapping[str, Any]] | None = None,
    **kwargs: Any,
) -> AgentRun:
    """Run ``agent`` on ``input`` as journaled calls of ``ctx``'s step; what it ended with
    as pure data. ``tools`` declares tools by name (see :class:`SavegameRunner`); the
    other keyword arguments are ``Runner.run``'s (``context``, ``max_turns``,
    ``run_config``, ``hooks`` ...)."""
    return AgentRun.of(await SavegameRunner(tools=tools).run(ctx, agent, input, **kwargs))


class _Chained(AgentRunner):
    """The SDK's default runner, chained: a run started by ``Runner.run`` inside a
    journaled agent tool is run as a durable copy; anything else passes through."""

    def __init__(self, previous: AgentRunner) -> None:
        self.previous = previous

    async def run(self, starting_agent: Any, input: Any, **kwargs: Any) -> RunResult:
        runner = _active.get()
        if runner is not None and _scope.current() is not None and _scope.in_agent_tool():
            starting_agent, kwargs["run_config"] = runner.prepare(
                starting_agent, kwargs.get("run_config")
            )
        return await self.previous.run(starting_agent, input, **kwargs)

    def run_sync(self, starting_agent: Any, input: Any, **kwargs: Any) -> RunResult:
        return self.previous.run_sync(starting_agent, input, **kwargs)

    def run_streamed(self, starting_agent: Any, input: Any, **kwargs: Any) -> Any:
        if _active.get() is not None and _scope.current() is not None and _scope.in_agent_tool():
            # An agent tool with on_stream=: its events would reach the caller before its
            # answers are journaled, and a replay could not send them again.
            raise ConfigurationError(
                f"agent {getattr(starting_agent, 'name', '?')!r}: a streamed agent tool "
                "(as_tool(on_stream=...)) is not journaled; drop on_stream inside a step"
            )
        return self.previous.run_streamed(starting_agent, input, **kwargs)


def _install() -> None:
    current = get_default_agent_runner()
    if not isinstance(current, _Chained):
        set_default_agent_runner(_Chained(current))
