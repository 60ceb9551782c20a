"""A durable pydantic-ai ``Agent`` (``savegame[pydantic-ai]``): each model request and
each tool call one journaled call of a savegame step.

::

    from pydantic_ai import Agent
    from savegame.integrations.pydantic_ai import SavegameDurability, run_agent

    agent = Agent("openai:gpt-4o", name="support", capabilities=[SavegameDurability()])

    @flow.step(entry=True)
    async def answer(state, ctx):
        result = await run_agent(ctx, agent, state["question"])
        return {"answer": result.output}, END

Built on pydantic-ai's extension point for a durable-execution engine, as its Temporal,
DBOS and Prefect integrations are (:mod:`._capability`); what an operation is journaled
as is in :mod:`._entries`, how it is called in :mod:`._units`.
"""

from __future__ import annotations

from typing import Any

try:
    import pydantic_ai  # noqa: F401
except ImportError as exc:  # pragma: no cover - the extra is not installed
    raise ImportError(
        "savegame.integrations.pydantic_ai needs pydantic-ai: pip install 'savegame[pydantic-ai]'"
    ) from exc

from savegame.integrations.pydantic_ai._capability import SavegameDurability
from savegame.integrations.pydantic_ai._scope import current, durable, request_id
from savegame.runtime import StepContext


async def run_agent(ctx: StepContext, agent: Any, *args: Any, **kwargs: Any) -> Any:
    """``await agent.run(*args, **kwargs)`` as journaled calls of ``ctx``'s step."""
    with durable(ctx):
        return await agent.run(*args, **kwargs)


__all__ = ["SavegameDurability", "current", "durable", "request_id", "run_agent"]
