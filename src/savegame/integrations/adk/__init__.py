"""A durable Google ADK agent (``savegame[adk]``): each model request and each tool call
one journaled call of a savegame step.

::

    from google.adk.agents import LlmAgent
    from savegame.integrations.adk import run_agent

    agent = LlmAgent(name="support", model="gemini-2.5-flash", tools=[lookup_order])

    @flow.step(entry=True)
    async def answer(state, ctx):
        turn = await run_agent(ctx, agent, state["question"], session=state.get("session"))
        return {"answer": turn.text, "session": turn.session}, END

Built on ADK's plugin interface, as DBOS's ADK integration is: :class:`SavegamePlugin`
(:mod:`._plugin`) answers each model request (:mod:`._models`) and each tool call
(:mod:`._tools`, declared per name in :mod:`._options`) from the step's journal, or
makes it and records it; :func:`run_agent` (:mod:`._session`) runs one turn with the
ADK session kept in the run's state.
"""

from __future__ import annotations

try:
    import google.adk  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is not installed
    raise ImportError(
        "savegame.integrations.adk needs google-adk: pip install 'savegame[adk]'"
    ) from exc

from savegame.integrations.adk._plugin import SavegamePlugin
from savegame.integrations.adk._scope import current, durable, request_id
from savegame.integrations.adk._session import AgentTurn, run_agent

__all__ = ["AgentTurn", "SavegamePlugin", "current", "durable", "request_id", "run_agent"]
