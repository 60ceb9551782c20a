"""A small durable Agents SDK agent for the tests: the real ``Agent`` and the SDK's own
OpenAI models (Responses API or Chat Completions) talking HTTP to the test's local
provider.

``balance`` is a read; ``transfer`` a write to the outside world (a ledger file, one
line per transfer with its request id) that ``reconcile`` can ask about by request id;
``block_card`` a write gated by the SDK's own ``needs_approval=True``.
``SAVEGAME_HOOK=<name>`` makes the process print ``HOOK <name>`` and block there, for a
parent's SIGKILL: ``balance:mid`` (in the tool round, after the transfer),
``transfer:after`` (the ledger written, the result not yet journaled), ``model:after``
(a model answer journaled, the step not yet checkpointed).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from agents import (
    Agent,
    Model,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunHooks,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI

from savegame import END, StepContext, Workflow
from savegame.integrations.openai_agents import request_id, run_agent

set_tracing_disabled(True)

#: What the agent is told; a test changes it to play a redeploy with another prompt.
INSTRUCTIONS = {"text": "You are a bank's support agent. Be brief."}


def hook(name: str) -> None:
    if os.environ.get("SAVEGAME_HOOK") == name:
        sys.stdout.write(f"HOOK {name}\n")
        sys.stdout.flush()
        sys.stdin.readline()


def ledger_lines(ledger: Path) -> list[dict[str, Any]]:
    if not ledger.exists():
        return []
    return [json.loads(line) for line in ledger.read_text().splitlines() if line]


def model(base_url: str, api: str = "responses") -> Model:
    client = AsyncOpenAI(base_url=base_url, api_key="k", max_retries=0)
    if api == "chat":
        return OpenAIChatCompletionsModel("gpt-4o", openai_client=client)
    return OpenAIResponsesModel("gpt-4o", openai_client=client)


class _Hooks(RunHooks[Any]):
    async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
        hook("model:after")


def build(
    name: str, base_url: str, ledger: Path, api: str = "responses"
) -> tuple[Workflow, Agent[Any]]:
    def found(request: str) -> Any:
        for line in ledger_lines(ledger):
            if line["request_id"] == request:
                return f"sent {line['amount']}"
        return None

    @function_tool
    def balance(customer: str) -> float:
        """The customer's balance."""
        hook("balance:mid")
        return 100.0

    @function_tool
    def transfer(customer: str, amount: float) -> str:
        """Send money from the customer's account."""
        with ledger.open("a") as out:
            out.write(json.dumps({"request_id": request_id(), "amount": amount}) + "\n")
        hook("transfer:after")
        return f"sent {amount}"

    @function_tool(needs_approval=True)
    def block_card(customer: str) -> str:
        """Block the customer's card."""
        with ledger.open("a") as out:
            out.write(json.dumps({"request_id": request_id(), "blocked": customer}) + "\n")
        return "blocked"

    agent: Agent[Any] = Agent(
        name=name,
        instructions=lambda ctx, agent: INSTRUCTIONS["text"],
        model=model(base_url, api),
        tools=[balance, transfer, block_card],
    )
    tools = {"transfer": {"effect": "write", "reconcile": found}}
    flow = Workflow(name)

    @flow.step(entry=True)
    async def support(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        run = await run_agent(ctx, agent, state["question"], tools=tools, hooks=_Hooks())
        return {"answer": run.final_output, "usage": run.usage}, END

    return flow, agent


flow: Workflow | None = None
if "SAVEGAME_MODEL_URL" in os.environ:  # the crash tests' child process
    flow, _ = build(
        "oai-crash",
        os.environ["SAVEGAME_MODEL_URL"],
        Path(os.environ["SAVEGAME_LEDGER"]),
        os.environ.get("SAVEGAME_API", "responses"),
    )


def path_of(api: str) -> str:
    """The provider path the SDK's model asks on for ``api``."""
    from tests.provider import CHAT, RESPONSES

    return CHAT if api == "chat" else RESPONSES


def script(
    fake: Any, api: str, *turns: tuple[str | None, list[tuple[str, dict[str, Any]]]]
) -> None:
    """Script the model's turns (text, tool calls) on ``api``'s path; each tool call gets
    an id of its own (``call_<turn>_<n>``), as a real provider's are."""
    from tests.provider import chat, responses

    answer = chat if api == "chat" else responses
    fake.script(
        path_of(api),
        *(
            answer(text, calls, call_ids=[f"call_{t}_{n}" for n in range(len(calls))])
            for t, (text, calls) in enumerate(turns)
        ),
    )
