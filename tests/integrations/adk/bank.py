"""A small durable ADK agent for the tests: a real ``LlmAgent`` whose real ``Gemini``
model (google-genai's client, over HTTP) asks the test's local provider.

``balance`` is a read; ``transfer`` a write to the outside world (a ledger file, one
line per transfer with its request id) that ``reconcile`` can ask about by request id;
``block_card`` a write gated by ADK's own ``require_confirmation``, which savegame turns
into an approval. ``SAVEGAME_HOOK=<name>`` makes the process print ``HOOK <name>`` and
block there, for a parent's SIGKILL: ``balance:mid`` (in the tool round, after the
transfer), ``transfer:after`` (the ledger written, the result not yet journaled),
``model:after`` (a model answer journaled, the step's checkpoint not yet written).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from google.adk.agents import LlmAgent
from google.adk.agents.callback_context import CallbackContext
from google.adk.apps import App
from google.adk.models import Gemini
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import InMemoryRunner
from google.adk.tools import FunctionTool

from savegame import END, StepContext, Workflow
from savegame.integrations.adk import SavegamePlugin, request_id, run_agent

#: What the agent is told; a test changes it to play a redeploy with another prompt.
INSTRUCTIONS = {"text": "You are a bank's support agent. Be brief."}
MODEL = "gemini-2.5-flash"


def hook(name: str) -> None:
    if os.environ.get("SAVEGAME_HOOK") == name:
        sys.stdout.write(f"HOOK {name}\n")
        sys.stdout.flush()
        sys.stdin.readline()


def ledger_lines(ledger: Path) -> list[dict[str, Any]]:
    if not ledger.exists():
        return []
    return [json.loads(line) for line in ledger.read_text().splitlines() if line]


def gemini(base_url: str) -> Gemini:
    return Gemini(model=MODEL, base_url=base_url, client_kwargs={"api_key": "test-key"})


def build(name: str, base_url: str, ledger: Path) -> tuple[Workflow, InMemoryRunner]:
    def found(request: str) -> Any:
        for line in ledger_lines(ledger):
            if line["request_id"] == request:
                return f"sent {line['amount']}"
        return None

    def balance(customer: str) -> float:
        """The customer's balance."""
        hook("balance:mid")
        return 100.0

    def transfer(customer: str, amount: float) -> str:
        """Send money from the customer's account."""
        with ledger.open("a") as out:
            out.write(json.dumps({"request_id": request_id(), "amount": amount}) + "\n")
        hook("transfer:after")
        return f"sent {amount}"

    def block_card(customer: str) -> str:
        """Block the customer's card."""
        with ledger.open("a") as out:
            out.write(json.dumps({"request_id": request_id(), "blocked": customer}) + "\n")
        return "blocked"

    def after_model(callback_context: CallbackContext, llm_response: LlmResponse) -> None:
        hook("model:after")

    agent = LlmAgent(
        name=name.replace("-", "_"),
        model=gemini(base_url),
        instruction=lambda _ctx: INSTRUCTIONS["text"],
        tools=[balance, transfer, FunctionTool(block_card, require_confirmation=True)],
        after_model_callback=after_model,
    )
    durable = SavegamePlugin(tools={"transfer": {"effect": "write", "reconcile": found}})
    runner = InMemoryRunner(app=App(name=name, root_agent=agent, plugins=[durable]))
    flow = Workflow(name)

    @flow.step(entry=True)
    async def support(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        turn = await run_agent(ctx, runner, state["question"], session=state.get("session"))
        return {"answer": turn.text, "session": turn.session}, END

    return flow, runner


flow: Workflow | None = None
if "SAVEGAME_MODEL_URL" in os.environ:  # the crash tests' child process
    flow, _ = build(
        "adk-crash", os.environ["SAVEGAME_MODEL_URL"], Path(os.environ["SAVEGAME_LEDGER"])
    )
