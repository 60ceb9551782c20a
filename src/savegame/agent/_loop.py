"""The agent loop as a workflow: receive -> llm -> tools -> llm ... -> END.

Each of those is a step, so every model turn and every tool round is a
checkpoint boundary: a crash costs at most the turn in flight.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from savegame.agent._context import CONTEXT_KEY, ContextPolicy, Everything
from savegame.effects import Backoff, ChatModel, Message, Tool, as_tool, tool_spec
from savegame.errors import ApprovalRejected, ConfigurationError, ModelTransientError
from savegame.runtime import END, CheckpointPolicy, StepContext, Workflow
from savegame.workspace import Workspace

MODEL_BACKOFF = Backoff(initial=1.0, maximum=30.0)
"""Waits between a failed model turn's attempts: a rate limit needs seconds, not 0.1."""


class Agent:
    """An LLM agent whose loop is a durable workflow.

    State keys: ``messages`` (the conversation), ``input`` (a user message to
    add at the start of the next run; cleared once added), ``answer`` (the
    model's final text), ``turns`` (model calls in the current run) and ``context``
    (what the context policy keeps between turns: a summary and what it covers).

    Args:
        name: the workflow name.
        model: a ChatModel.
        tools: tools (``@savegame.tool``) or plain functions (treated as reads)
            the model may call; every call goes through the journal.
        system: a system prompt put first in a new conversation.
        max_turns: model calls per run before the run stops with ``stopped="max_turns"``.
        retries: how many times a model turn that failed with a ModelTransientError (a
            rate limit, a 5xx, a lost connection: the ``savegame.models`` adapters raise
            it) is tried again; each failed attempt is checkpointed before the wait. A
            ModelRequestError (a 4xx) is not retried.
        backoff: the waits between those attempts (seconds, or a Backoff).
        stream: called with each piece of a model's answer as it arrives (``ctx.llm``'s
            ``stream=``: only final messages are journaled).
        context: what of the conversation each model turn is sent (a ContextPolicy,
            e.g. ``KeepLast(8, summarise=model)``); by default all of it. The state
            keeps every message either way.
        workspace: a directory the tools edit, snapshotted with every checkpoint and
            restored on resume and fork (``Workflow(workspace=)``).
        version: the code version its runs record (``Workflow(version=)``); without
            it, a digest of the loop's steps, which does not change with your tools or
            prompt: declare one when you run workers by version.
    """

    def __init__(
        self,
        name: str,
        model: ChatModel,
        tools: Sequence[Callable[..., Any]] = (),
        *,
        system: str | None = None,
        max_turns: int = 20,
        retries: int = 2,
        backoff: Backoff | float = MODEL_BACKOFF,
        stream: Callable[[str], Any] | None = None,
        context: ContextPolicy | None = None,
        workspace: Workspace | str | os.PathLike[str] | Callable[[str], Any] | None = None,
        state_version: int = 1,
        policy: CheckpointPolicy | None = None,
        version: str | None = None,
    ) -> None:
        self.model = model
        self.stream = stream
        if context is not None and not callable(getattr(context, "build", None)):
            raise ConfigurationError(
                f"agent {name!r}: context={context!r} is not a ContextPolicy (it has no build method)"
            )
        self.context: ContextPolicy = context or Everything()
        declared = [as_tool(fn) for fn in tools]
        self.tools: dict[str, Tool] = {t.name: t for t in declared}
        if len(self.tools) != len(declared):
            raise ConfigurationError(f"agent {name!r}: two tools share a name")
        self.specs = [tool_spec(t.fn, t.name) for t in declared]
        self.system = system
        self.max_turns = max_turns
        self.workflow = Workflow(
            name,
            state_version=state_version,
            policy=policy or CheckpointPolicy(),
            workspace=workspace,
            version=version,
        )
        caller = sys._getframe(1).f_globals
        module = caller.get("__name__")
        if module == "__main__" or str(module).startswith("savegame_user_"):
            self.workflow.defined_in = caller.get("__file__")
        else:
            self.workflow.defined_in = module
        self.workflow.add_step(self._receive, name="receive", entry=True)
        self.workflow.add_step(
            self._llm, name="llm", retries=retries, backoff=backoff, retry_on=ModelTransientError
        )
        self.workflow.add_step(self._tools, name="tools")

    def _receive(self, state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        messages: list[Message] = list(state.get("messages") or [])
        if not messages and self.system:
            messages.append({"role": "system", "content": self.system})
        text = state.get("input")
        if text:
            messages.append({"role": "user", "content": text})
        return {"messages": messages, "input": None, "turns": 0, "answer": None}, "llm"

    async def _llm(self, state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        turns = int(state.get("turns") or 0)
        if turns >= self.max_turns:
            return {"stopped": "max_turns"}, END
        # The policy's own model calls (a summary) come first, journaled like the turn's:
        # a re-executed turn pays for neither again.
        prompt = await self.context.build(state, ctx)
        response = await ctx.allm(
            self.model, list(prompt.messages), tools=self.specs, stream=self.stream
        )
        update: dict[str, Any] = {
            "messages": [*state["messages"], response.to_message()],
            "turns": turns + 1,
        }
        if prompt.memory is not None:
            update[CONTEXT_KEY] = dict(prompt.memory)
        if response.tool_calls:
            return update, "tools"
        return {**update, "answer": response.content}, END

    async def _tools(self, state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        messages: list[Message] = list(state["messages"])
        for call in messages[-1].get("tool_calls") or ():
            fn = self.tools.get(call["name"])
            content: Any
            if fn is None:
                content = {"error": f"unknown tool {call['name']!r}"}
            elif (refused := _refused(fn, call["arguments"])) is not None:
                content = {"error": refused}
            else:
                try:
                    content = await ctx.acall(fn, **call["arguments"])
                except ApprovalRejected as rejected:
                    # The model hears about the rejection and can answer accordingly.
                    content = {
                        "error": f"rejected by {rejected.by or 'a reviewer'}: {rejected.reason}"
                    }
            messages.append(
                {
                    "role": "tool",
                    "tool_call_id": call["id"],
                    "name": call["name"],
                    "content": content,
                }
            )
        return {"messages": messages}, "llm"


def _refused(fn: Tool, arguments: Any) -> str | None:
    """Why the model's arguments do not fit the tool (a missing or unknown name), or None.

    Told to the model like an unknown tool's name, so it can ask again: raised, the
    error would fail the run, and every resume would replay the journaled answer into
    the same failure.
    """
    if not isinstance(arguments, dict):
        return f"the arguments of tool {fn.name} must be an object, not {arguments!r:.200}"
    try:
        fn.bind((), arguments)
    except ConfigurationError as exc:
        return str(exc)
    return None
