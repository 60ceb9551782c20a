"""A durable OpenAI Agents SDK run (``savegame[openai-agents]``): each model request and
each function tool call one journaled call of a savegame step.

::

    from agents import Agent, function_tool
    from savegame.integrations.openai_agents import run_agent

    @flow.step(entry=True)
    async def answer(state, ctx):
        run = await run_agent(ctx, agent, state["question"], tools={"refund": {"effect": "write"}})
        return {"answer": run.final_output}, END

Where things are::

    _runner.py    SavegameRunner, run_agent, AgentRun: a run as calls of a step
    _graph.py     the durable copy of an agent graph (tools, models, handoffs)
    _model.py     DurableModel: a model request as a model call (ctx.llm's entry)
    _tools.py     a function tool's call as a journaled call (effects, approvals)
    _declare.py   what a tool is to savegame (read, write, ...): by name or declare()
    _scope.py     the step a run belongs to; request_id() of the running tool call
"""

from __future__ import annotations

try:
    import agents  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is not installed
    raise ImportError(
        "savegame.integrations.openai_agents needs the OpenAI Agents SDK: "
        "pip install 'savegame[openai-agents]'"
    ) from exc

from savegame.integrations.openai_agents._declare import declare
from savegame.integrations.openai_agents._model import DurableModel, DurableProvider
from savegame.integrations.openai_agents._runner import AgentRun, SavegameRunner, run_agent
from savegame.integrations.openai_agents._scope import current, request_id

__all__ = [
    "AgentRun",
    "DurableModel",
    "DurableProvider",
    "SavegameRunner",
    "current",
    "declare",
    "request_id",
    "run_agent",
]
