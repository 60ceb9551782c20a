"""The durable copy of an agent graph: what the SDK runs inside a step.

The SDK resolves a model and calls a tool through the agent objects it is given, so a
run is made durable by handing it copies: each agent's function tools journaled
(:mod:`._tools`), an agent's own ``Model`` instance wrapped in :class:`DurableModel`
(a model named by string comes through the run config's provider, wrapped there), and
its handoffs' agents copied the same way, cycles included (a triage agent and a
specialist that hands back). The user's agents are left as they are. Hosted tools
(web search, file search) run at the provider, inside the journaled model call; MCP
servers' tools and the local shell, computer and patch tools are not journaled.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from agents import Agent, FunctionTool, Handoff, Model, RunContextWrapper

from savegame.integrations.openai_agents._declare import Unit, unit_of
from savegame.integrations.openai_agents._model import DurableModel
from savegame.integrations.openai_agents._tools import agent_tool, journaled


class Graph:
    """Durable copies of the agents of one run, each agent copied once."""

    def __init__(self, declared: Mapping[str, Unit]) -> None:
        self._declared = declared
        self._copies: dict[int, Agent[Any]] = {}

    def agent(self, agent: Agent[Any]) -> Agent[Any]:
        found = self._copies.get(id(agent))
        if found is not None or getattr(agent, "_savegame_copy", False):
            return found or agent
        model = agent.model
        if isinstance(model, Model) and not isinstance(model, DurableModel):
            model = DurableModel(model)
        # Placed before its handoffs are copied, so a cycle finds it.
        copy = agent.clone(model=model, tools=[self._tool(t, agent.name) for t in agent.tools])
        object.__setattr__(copy, "_savegame_copy", True)
        self._copies[id(agent)] = copy
        copy.handoffs = [self._handoff(h) for h in agent.handoffs]
        return copy

    def _tool(self, tool: Any, agent: str) -> Any:
        if not isinstance(tool, FunctionTool):
            return tool
        if tool._is_agent_tool:
            return agent_tool(tool, agent)
        return journaled(tool, agent, unit_of(tool, self._declared))

    def _handoff(self, handoff: Any) -> Any:
        if isinstance(handoff, Agent):
            return self.agent(handoff)
        if not isinstance(handoff, Handoff):
            return handoff
        invoke = handoff.on_invoke_handoff

        async def on_invoke(ctx: RunContextWrapper[Any], text: str) -> Any:
            target = await invoke(ctx, text)
            return self.agent(target) if isinstance(target, Agent) else target

        return dataclasses.replace(handoff, on_invoke_handoff=on_invoke)
