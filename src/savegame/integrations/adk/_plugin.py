"""SavegamePlugin: ADK's plugin interface, making a Runner's agents durable in savegame.

ADK gives a plugin the first word before each model request and each tool call
(``before_model_callback`` / ``before_tool_callback``): what a callback returns is used
instead of calling the model or the tool. Inside a savegame step this plugin answers
every one of them itself, as one journaled call of the step: the model is asked (or
the tool run) by the plugin, inside the call, and its answer recorded before ADK sees
it; a resumed, retried or forked step gets the recorded answer back. Outside a step the
plugin answers nothing and the Runner is ADK's own.

ADK does not run the agent's own model callbacks and before-tool callbacks, nor other
plugins' after-model callbacks, for an answer a plugin supplied; this plugin runs the
agent's (``before_model_callback`` first, which may answer instead of the model,
``after_model_callback`` on the answer, recorded or new, and ``before_tool_callback``
before a journaled tool call, so a guardrail still decides) so an agent behaves the
same with or without it. Put it last in ``plugins=[...]``: the plugins before it run
first.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from google.adk.agents import BaseAgent, ParallelAgent
from google.adk.agents.callback_context import CallbackContext
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.plugins import BasePlugin
from google.adk.tools.agent_tool import AgentTool
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types

from savegame.errors import ConfigurationError
from savegame.integrations._model_calls import journaled_model_call
from savegame.integrations.adk import _scope
from savegame.integrations.adk._models import (
    PAYLOAD,
    call_ids,
    model_call,
    recorded,
    response_of,
    with_call_ids,
)
from savegame.integrations.adk._options import READ, units
from savegame.integrations.adk._tools import call_tool


class SavegamePlugin(BasePlugin):
    """Makes the model requests and tool calls of an ADK ``Runner`` journaled calls of a
    savegame step: add it to the Runner and run the Runner inside a step, with
    :func:`run_agent` (or inside ``durable(ctx)``)::

        durable = SavegamePlugin(tools={"refund": {"effect": "write", "approval": True}})
        runner = InMemoryRunner(agent=agent, app_name="support", plugins=[durable])

    Tools are reads unless declared otherwise by name here, with :func:`savegame.tool`'s
    options (``effect``, ``idempotent`` (the tool reads :func:`request_id` and the outside
    system deduplicates on it), ``approval``, ``reconcile``, ``safe_errors``), or gated by
    ADK's own ``FunctionTool(require_confirmation=...)``, which makes the call a write a
    person approves (``savegame approve``).
    """

    def __init__(
        self, *, tools: Mapping[str, Mapping[str, Any]] | None = None, name: str = "savegame"
    ) -> None:
        super().__init__(name=name)
        self._units = units(tools)

    async def before_agent_callback(
        self, *, agent: BaseAgent, callback_context: CallbackContext
    ) -> types.Content | None:
        if _scope.current() is not None and isinstance(agent, ParallelAgent):
            # Its branches ask their models concurrently: the journal's positions would
            # follow whichever answered first, and a resume would find other calls there.
            raise _scope.Carried(
                ConfigurationError(
                    f"ADK agent {agent.name!r} is a ParallelAgent: its branches' calls have no "
                    "fixed order to journal them in; run them one after another "
                    "(SequentialAgent) inside a savegame step, or as steps of their own"
                )
            )
        return None

    async def before_model_callback(
        self, *, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse | None:
        scope = _scope.current()
        if scope is None:
            return None
        with _scope.carried():
            return await self._model_request(scope, callback_context, llm_request)

    async def _model_request(
        self, scope: _scope.Scope, callback_context: CallbackContext, llm_request: LlmRequest
    ) -> LlmResponse:
        invocation = callback_context._invocation_context
        agent = invocation.agent
        before: Sequence[Callable[..., Any]] = getattr(
            agent, "canonical_before_model_callbacks", ()
        )
        answered = await _first_answer(
            before, callback_context=callback_context, llm_request=llm_request
        )
        if isinstance(answered, LlmResponse):
            return answered  # the agent's own code answered: nothing left to journal
        llm = getattr(agent, "canonical_model", None)
        if not isinstance(llm, BaseLlm):
            raise ConfigurationError(
                f"ADK agent {getattr(agent, 'name', None)!r} has no model SavegamePlugin can call "
                f"({type(llm).__name__})"
            )
        # ADK counts its calls against RunConfig.max_llm_calls before it asks; a replayed
        # call counts too, so a resumed run stops where an uninterrupted one would.
        invocation.increment_llm_call_count()
        response = await self._journaled(scope, llm, llm_request)
        scope.turnstile(callback_context.invocation_id).expect(call_ids(response))
        after: Sequence[Callable[..., Any]] = getattr(agent, "canonical_after_model_callbacks", ())
        altered = await _first_answer(
            after, callback_context=callback_context, llm_response=response
        )
        return altered if isinstance(altered, LlmResponse) else response

    async def _journaled(
        self, scope: _scope.Scope, llm: BaseLlm, llm_request: LlmRequest
    ) -> LlmResponse:
        """One model request as a model call of the step: its request kept by parts, its
        response committed at once, before ADK sees it."""
        call = model_call(llm.model, llm_request)

        async def ask(request_id: str) -> dict[str, Any]:
            response = await _ask(llm, llm_request)
            with_call_ids(response, request_id)
            return recorded(response, llm.model)

        kept = await journaled_model_call(
            scope.ctx, scope.calls, call, ask,
            system="google-adk", payload=PAYLOAD, recorded_by="an ADK agent",
        )  # fmt: skip
        return response_of(kept)

    async def before_tool_callback(
        self, *, tool: BaseTool, tool_args: dict[str, Any], tool_context: ToolContext
    ) -> dict[str, Any] | None:
        scope = _scope.current()
        if scope is None:
            return None
        turnstile = scope.turnstile(tool_context.invocation_id)
        call_id = tool_context.function_call_id
        await turnstile.enter(call_id)
        if type(tool) is BaseTool:
            # ADK's stand-in for a tool the model named but the agent lacks: ADK answers
            # the model itself (the tools it has), with nothing to run or journal.
            await turnstile.leave(call_id)
            return None
        if isinstance(tool, AgentTool):
            # Its agent's model requests and tools are journaled one by one as it runs
            # (plugins reach it); its turn is held until it returns (after_tool_callback),
            # so those calls take their positions before the next tool's.
            return None
        try:
            with _scope.carried():
                # ADK skips the agent's own before-tool callbacks for a call a plugin
                # answers: run here, a guardrail among them still decides first.
                agent = tool_context._invocation_context.agent
                guards: Sequence[Callable[..., Any]] = getattr(
                    agent, "canonical_before_tool_callbacks", ()
                )
                result: Any = await _first_answer(
                    guards, stop=_not_none, tool=tool, args=tool_args, tool_context=tool_context
                )
                if result is None:
                    unit = self._units.get(tool.name, READ)
                    result = await call_tool(scope, unit, tool, tool_args, tool_context)
        finally:
            await turnstile.leave(call_id)
        return result  # type: ignore[no-any-return]

    async def after_tool_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        result: dict[str, Any],
    ) -> dict[str, Any] | None:
        await self._done(tool_context)
        return None

    async def on_tool_error_callback(
        self,
        *,
        tool: BaseTool,
        tool_args: dict[str, Any],
        tool_context: ToolContext,
        error: Exception,
    ) -> dict[str, Any] | None:
        await self._done(tool_context)
        return None

    async def _done(self, tool_context: ToolContext) -> None:
        """A call is over: its turn passes on. An AgentTool's ends here; so does the turn of
        a call a plugin before this one answered (this plugin never saw it start), which
        would otherwise hold the calls after it back for good."""
        scope = _scope.current()
        if scope is not None:
            await scope.turnstile(tool_context.invocation_id).leave(tool_context.function_call_id)


async def _ask(llm: BaseLlm, request: LlmRequest) -> LlmResponse:
    """The model's whole answer to ``request`` (one non-streamed response)."""
    last: LlmResponse | None = None
    async for response in llm.generate_content_async(request, stream=False):
        if not response.partial:
            last = response
    if last is None:
        raise ConfigurationError(f"model {llm.model}: no response to a request")
    return last


def _not_none(answer: Any) -> bool:
    return answer is not None


async def _first_answer(
    callbacks: Sequence[Callable[..., Any]],
    *,
    stop: Callable[[Any], bool] = bool,
    **kwargs: Any,
) -> Any:
    """Run an agent's callbacks in order, as ADK does: the first answer that ``stop``
    accepts wins (a truthy one for model callbacks, any but None for tool callbacks)."""
    for callback in callbacks:
        answer = callback(**kwargs)
        if inspect.isawaitable(answer):
            answer = await answer
        if stop(answer):
            return answer
    return None
