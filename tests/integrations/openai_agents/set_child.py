"""A run whose tool returns a set, then a gated call: started in one process, approved in
another (each with its own ``PYTHONHASHSEED``).

Usage: SAVEGAME_MODEL_URL=... set_child.py start|approve STORE_URL
Prints ``DONE <status>``, or ``ERROR <ClassName>`` for a savegame error.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from agents import Agent, function_tool, set_tracing_disabled

from savegame import END, SavegameError, StepContext, Workflow, approve, run
from savegame.integrations.openai_agents import run_agent

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
from tests.integrations.openai_agents.bank import model

set_tracing_disabled(True)


@function_tool
def tags() -> Any:
    """The tags."""
    return {"tags": {"kiwi", "apple", "fig", "plum", "date", "lime", "pear", "yuzu"}}


@function_tool(needs_approval=True)
def block_card(customer: str) -> str:
    """Block the card."""
    return "blocked"


agent: Agent[Any] = Agent(
    name="oai-set-child", model=model(os.environ["SAVEGAME_MODEL_URL"]), tools=[tags, block_card]
)
flow = Workflow("oai-set-child")


@flow.step(entry=True)
async def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    done = await run_agent(ctx, agent, "go")
    return {"answer": done.final_output}, END


def main() -> None:
    mode, url = sys.argv[1:3]
    try:
        if mode == "start":
            status = run(flow, {}, run_id="r1", store=url).status
        else:
            decided = approve("r1", store=url, workflow=flow)
            if decided.error is not None:
                raise decided.error
            assert decided.result is not None
            status = decided.result.status
    except SavegameError as exc:
        sys.stdout.write(f"ERROR {type(exc).__name__} {exc}\n")
        return
    sys.stdout.write(f"DONE {status.value}\n")


if __name__ == "__main__":
    main()
