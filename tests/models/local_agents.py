"""What the real-model tests run against the local model (``savegame.models.LocalServer``):
an Agent over each adapter, a workflow that makes its tool round with ``ctx.llm``, and a
tool that can stop dead for a parent's SIGKILL.

``SAVEGAME_HOOK=lookup_order`` makes the tool print ``HOOK lookup_order`` and block, once
the model's first answer (the tool call) is journaled and before the tool's result is.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from savegame import END, Agent, StepContext, Workflow
from savegame.models import Anthropic, LiteLLM, OpenAI
from savegame.models._local import MODEL

KINDS = ("chat", "responses", "anthropic", "litellm")
"""The adapters (and OpenAI's two APIs) the Agent drives the model through."""
QUESTION = "What does order A-1 cost?"
LIMIT = 64
"""Tokens per answer: a tool call takes about 35, and a runaway answer stops here."""


def lookup_order(order_id: str) -> dict[str, Any]:
    """Look an order up by id."""
    if os.environ.get("SAVEGAME_HOOK") == "lookup_order":
        sys.stdout.write("HOOK lookup_order\n")
        sys.stdout.flush()
        sys.stdin.readline()
    return {"id": order_id, "total": 120}


def model(kind: str, url: str) -> Any:
    """The adapter ``kind`` over the server at ``url`` (``http://127.0.0.1:<port>``)."""
    if kind == "chat":
        return OpenAI(MODEL, base_url=f"{url}/v1", api_key="local", temperature=0, max_tokens=LIMIT)
    if kind == "responses":
        return OpenAI(
            MODEL,
            api="responses",
            base_url=f"{url}/v1",
            api_key="local",
            temperature=0,
            max_output_tokens=LIMIT,
        )
    if kind == "anthropic":
        return Anthropic(MODEL, base_url=url, api_key="local", temperature=0, max_tokens=LIMIT)
    if kind == "litellm":
        return LiteLLM(
            f"openai/{MODEL}",
            base_url=f"{url}/v1",
            api_key="local",
            temperature=0,
            max_tokens=LIMIT,
        )
    raise ValueError(kind)


def agent(kind: str, url: str) -> Agent:
    return Agent(f"local-{kind}", model(kind, url), [lookup_order], system="Be brief.")


def llm_flow(url: str) -> Workflow:
    """One step, its tool round made by hand with ``ctx.llm`` and ``ctx.call``."""
    chosen = model("chat", url)
    wf = Workflow("local-llm")

    @wf.step(entry=True)
    def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        messages: list[dict[str, Any]] = [{"role": "user", "content": state["question"]}]
        first = ctx.llm(chosen, messages, tools=[lookup_order])
        messages.append(first.to_message())
        for call in first.tool_calls:
            found = ctx.call(lookup_order, **call.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": found})
        last = ctx.llm(chosen, messages, tools=[lookup_order])
        return {"messages": messages, "answer": last.content}, END

    return wf


def pydantic_flow(url: str) -> Workflow:
    """A pydantic-ai Agent made durable, its OpenAIChatModel on the local server."""
    from pydantic_ai import Agent as PydanticAgent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider
    from pydantic_ai.settings import ModelSettings

    from savegame.integrations.pydantic_ai import SavegameDurability, run_agent

    chosen = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=f"{url}/v1", api_key="local"))
    helper = PydanticAgent(
        chosen,
        name="local",
        instructions="Be brief.",
        model_settings=ModelSettings(temperature=0, max_tokens=LIMIT),
        capabilities=[SavegameDurability()],
        tools=[lookup_order],
    )
    wf = Workflow("local-pydantic-ai")

    @wf.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        result = await run_agent(ctx, helper, state["question"])
        return {"answer": result.output}, END

    return wf


def openai_agents_flow(url: str) -> Workflow:
    """An OpenAI Agents SDK Agent run by savegame's runner, its Chat Completions model on
    the local server."""
    from agents import Agent as SdkAgent
    from agents import ModelSettings as SdkSettings
    from agents import OpenAIChatCompletionsModel, function_tool, set_tracing_disabled
    from openai import AsyncOpenAI

    from savegame.integrations.openai_agents import run_agent

    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=f"{url}/v1", api_key="local", max_retries=0)
    helper: SdkAgent[Any] = SdkAgent(
        name="local",
        instructions="Be brief.",
        model=OpenAIChatCompletionsModel(MODEL, openai_client=client),
        model_settings=SdkSettings(temperature=0, max_tokens=LIMIT),
        tools=[function_tool(lookup_order)],
    )
    wf = Workflow("local-openai-agents")

    @wf.step(entry=True)
    async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        done = await run_agent(ctx, helper, state["question"], max_turns=4)
        return {"answer": done.final_output}, END

    return wf


def workflow(kind: str, url: str) -> Any:
    if kind == "llm":
        return llm_flow(url)
    if kind == "pydantic-ai":
        return pydantic_flow(url)
    if kind == "openai-agents":
        return openai_agents_flow(url)
    return agent(kind, url)


def given(kind: str) -> dict[str, Any]:
    asked = ("llm", "pydantic-ai", "openai-agents")
    return {"question": QUESTION} if kind in asked else {"input": QUESTION}
