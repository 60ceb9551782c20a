"""A framework's model request as a journaled model call of the step, for the agent SDK
integrations (pydantic-ai, the OpenAI Agents SDK, Google ADK).

Each integration turns its framework's request into a :class:`~savegame.effects.ModelCall`
and its response into what the journal keeps; what happens between is the same for all
three, and is here: the ``chat`` span, the journal's answer on a replay (the request made
only when nothing is recorded), the response committed at once, before the framework sees
it, and the usage counted whether the call was made now or replayed.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from savegame.effects import Calls, ModelCall
from savegame.errors import ConfigurationError
from savegame.runtime import StepContext, traced_model_call


async def journaled_model_call(
    ctx: StepContext,
    calls: Calls,
    call: ModelCall,
    ask: Callable[[str], Awaitable[dict[str, Any]]],
    *,
    system: str,
    payload: str,
    recorded_by: str,
    payload_type: type | tuple[type, ...] = object,
) -> dict[str, Any]:
    """What the journal keeps of ``call``'s response: recorded before, or ``ask``ed now.

    Args:
        ask: makes the request and returns the response as the journal is to keep it;
            given the call's request id (ADK writes it into its function calls' ids).
        system: the span's ``gen_ai.system``.
        payload: the key under which the integration keeps its framework's response.
        recorded_by: who records such entries, for the error a foreign one gets (``"a
            pydantic-ai agent"``).
        payload_type: what a recorded payload must be for the integration to read it.

    Raises:
        ConfigurationError: the entry recorded at this position was not recorded by this
            integration (another framework's, or ``ctx.llm``'s): nothing to hand back.
    """
    with traced_model_call(
        ctx.run_id, ctx.step, call.name.removeprefix("llm:"), system=system
    ) as traced:
        # In a worker thread: the journal may commit (a store's round trip) and the event
        # loop runs the framework's other tasks meanwhile.
        prepared = await asyncio.to_thread(calls.before_llm, call)
        traced.prepared(prepared)
        kept: dict[str, Any]
        if prepared.replay:
            kept = prepared.result
            if (
                not isinstance(kept, dict)
                or payload not in kept
                or not isinstance(kept[payload], payload_type)
            ):
                raise ConfigurationError(
                    f"run {calls.run_id}: the model call {prepared.request_id} was not "
                    f"recorded by {recorded_by}: nothing to hand back to it"
                )
        else:
            kept = await ask(prepared.request_id)
            await asyncio.to_thread(calls.after_llm, prepared, kept)
        # Counted whether made now or replayed: a resumed run's usage equals an
        # uninterrupted one's.
        cost = kept.get("cost_usd")
        ctx.add_usage(
            input_tokens=int(kept.get("input_tokens") or 0),
            output_tokens=int(kept.get("output_tokens") or 0),
            cost_usd=float(cost) if isinstance(cost, int | float) else None,
            llm_calls=1,
        )
        traced.answered(kept, replayed=prepared.replay)
        return kept
