"""A function tool's call as one journaled call of the running savegame step.

Each call of a wrapped ``FunctionTool`` takes the step's next position: a recorded
result is handed back without running the tool; a write's intent is committed before
it runs and its result after; a write whose tool says ``needs_approval`` (the SDK's
own flag, or ``approval`` declared to savegame) pauses the run as savegame's approval
of that call (tool and arguments), decided by ``savegame approve``/``reject`` or the
UI, in another process if need be; one in doubt after a crash is retried
(idempotent), reconciled, or left to a person.

The SDK turns a tool's exception into a message for the model (the tool's
``failure_error_function``). Savegame's rules must see the exception first (a write
that raised may have happened: in doubt, not "done with an error message"), so the tool
is called with the SDK's handler off and the handler is applied here, once savegame
has settled the call. A person's rejection reaches the model as the SDK's own
rejection message, as ``RunState.reject`` would send it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
from collections.abc import Awaitable, Callable
from typing import Any

from agents import FunctionTool, ModelBehaviorError
from agents.tool import (
    DEFAULT_APPROVAL_REJECTION_MESSAGE,
    maybe_invoke_function_tool_failure_error_function,
    set_function_tool_failure_error_function,
)
from agents.tool_context import ToolContext

from savegame.codec import decode_value, encode_value
from savegame.effects import Tool, ainvoke_call
from savegame.errors import ApprovalRejected, ConfigurationError, SavegameError
from savegame.integrations._told import in_stable_order
from savegame.integrations.openai_agents import _scope
from savegame.integrations.openai_agents._declare import Unit
from savegame.runtime import traced_tool_call

Invoke = Callable[[ToolContext[Any], str], Awaitable[Any]]


class EditRefused(ConfigurationError):
    """An approval's edit of an Agents SDK tool call: refused before the tool ran (the
    SDK's history would show the model's arguments, not the ones used), so the write is
    settled not done (it is one of every call's ``safe_errors``)."""


def arguments_of(name: str, text: str) -> dict[str, Any]:
    """What the journal says was called: the tool and the model's arguments."""
    try:
        parsed: Any = json.loads(text or "{}")
    except ValueError:
        parsed = {"raw": text}
    return {"tool": name, "args": parsed}


def check_arguments(name: str, text: str) -> None:
    """Refuse what is not a JSON object as the SDK's own function tools do, before any
    gate or journal entry: no code of the tool runs on it, so no person is asked to
    approve it and no write is left in doubt; the model is told, as by the SDK alone."""
    try:
        parsed: Any = json.loads(text) if text else {}
    except ValueError:
        raise ModelBehaviorError(f"Invalid JSON input for tool {name}") from None
    if not isinstance(parsed, dict):
        raise ModelBehaviorError(f"Invalid JSON input for tool {name}: expected a JSON object")


async def _asks_approval(tool: FunctionTool, ctx: ToolContext[Any], call: dict[str, Any]) -> bool:
    """The SDK's ``needs_approval`` for this call (a flag or the tool's own predicate)."""
    gate = tool.needs_approval
    if not callable(gate):
        return bool(gate)
    args = call["args"] if isinstance(call["args"], dict) else {}
    answer: Any = gate(ctx, args, ctx.tool_call_id)
    if inspect.isawaitable(answer):
        answer = await answer
    return bool(answer)


def journaled(tool: FunctionTool, agent: str, unit: Unit) -> FunctionTool:
    """A copy of ``tool`` whose calls are journaled calls of the running step; named
    ``<agent>.<tool>`` in the journal."""
    raw = dataclasses.replace(tool, needs_approval=False)
    # The copy's exceptions reach savegame's rules; the original's handler runs after.
    set_function_tool_failure_error_function(raw, None)
    inner: Invoke = raw.on_invoke_tool
    name = f"{agent}.{tool.name}"

    async def invoke(ctx: ToolContext[Any], text: str) -> Any:
        step = _scope.current()
        if step is None:
            return await tool.on_invoke_tool(ctx, text)
        try:
            check_arguments(tool.name, text)
            return await _call(step, ctx, text)
        except ApprovalRejected as rejected:
            # The SDK's semantics for a rejected call: the model is told and goes on.
            reason = "" if rejected.reason == "no reason given" else f" {rejected.reason}"
            return DEFAULT_APPROVAL_REJECTION_MESSAGE + reason
        except SavegameError:
            raise  # a journal's verdict (not pure data, non-determinism), not the tool's
        except Exception as error:
            handled = await maybe_invoke_function_tool_failure_error_function(
                function_tool=tool, context=ctx, error=error
            )
            if handled is None:
                raise
            return handled

    async def _call(step: Any, ctx: ToolContext[Any], text: str) -> Any:
        calls = _scope.calls_of(step)
        asked = arguments_of(tool.name, text)
        gated = unit.approval or await _asks_approval(tool, ctx, asked)

        async def body(call: dict[str, Any], request_id: str) -> Any:
            if call != asked:
                raise EditRefused(
                    f"{name}: an approval's edit of an Agents SDK tool call is not "
                    "supported (approve or reject it)"
                )
            with _scope.calling(request_id):
                return await inner(ctx, text)

        entry = Tool(
            body,
            name,
            # A tool the SDK may gate changes something, whether this call is gated or not.
            "write" if gated or tool.needs_approval is not False else unit.effect,
            idempotent=unit.idempotent,
            compensate=None,
            approval=gated,
            reconcile=unit.reconcile,
            safe_errors=(*unit.safe_errors, EditRefused),
            durable=True,
        )
        with traced_tool_call(step.run_id, step.step, name) as traced:
            prepared = await asyncio.to_thread(calls.before, entry, {"call": asked})
            traced.prepared(prepared)
            if prepared.replay:
                result = prepared.result
            else:
                # The SDK is handed the result as the journal hands it back on a replay (a
                # dict's keys in the codec's order, not the tool's): the model's next
                # request, which holds the SDK's text of it, must be the same on every
                # execution.
                made = await ainvoke_call(calls, entry, prepared)
                result = decode_value(encode_value(made, f"result.{name}"))
        step.add_usage(tool_calls=1)
        return in_stable_order(result)

    return dataclasses.replace(tool, needs_approval=False, on_invoke_tool=invoke)


def ours(error: BaseException) -> BaseException:
    """The savegame error behind an SDK error, else ``error``: the SDK reports a tool's
    exception as ``UserError("Error running tool ...")``, but a journal's verdict (not
    pure data, non-determinism, a refused edit) is for savegame's runner to handle."""
    seen: BaseException | None = error
    visited: set[int] = set()
    while seen is not None and id(seen) not in visited:
        if isinstance(seen, SavegameError):
            return seen
        visited.add(id(seen))
        seen = seen.__cause__
    return error


def agent_tool(tool: FunctionTool, agent: str) -> FunctionTool:
    """An agent called as a tool (``Agent.as_tool``): not one call of its own but a run
    whose model requests and tools are journaled one by one, as the outer run's are.
    With the SDK's ``needs_approval``, a person's approval of the call (tool and
    arguments) comes first, journaled as a gate named ``<agent>.<tool>``: a write that
    does nothing but record the decision, so a replay knows it was given."""
    raw = dataclasses.replace(tool, needs_approval=False)
    set_function_tool_failure_error_function(raw, None)
    inner: Invoke = raw.on_invoke_tool
    name = f"{agent}.{tool.name}"

    async def gate(step: Any, ctx: ToolContext[Any], text: str) -> None:
        asked = arguments_of(tool.name, text)
        if not await _asks_approval(tool, ctx, asked):
            return
        calls = _scope.calls_of(step)

        def decided(call: dict[str, Any], request_id: str) -> str:
            if call != asked:
                raise EditRefused(
                    f"{name}: an approval's edit of an Agents SDK tool call is not "
                    "supported (approve or reject it)"
                )
            return "approved"

        entry = Tool(
            decided, name, "write", idempotent=False, compensate=None, approval=True,
            reconcile=None, safe_errors=(EditRefused,), durable=True,
        )  # fmt: skip
        prepared = await asyncio.to_thread(calls.before, entry, {"call": asked})
        if not prepared.replay:
            await ainvoke_call(calls, entry, prepared)

    async def invoke(ctx: ToolContext[Any], text: str) -> Any:
        step = _scope.current()
        if step is None:
            return await tool.on_invoke_tool(ctx, text)
        try:
            check_arguments(tool.name, text)
            await gate(step, ctx, text)
            with _scope.nested():
                return await inner(ctx, text)
        except ApprovalRejected as rejected:
            reason = "" if rejected.reason == "no reason given" else f" {rejected.reason}"
            return DEFAULT_APPROVAL_REJECTION_MESSAGE + reason
        except SavegameError:
            raise
        except Exception as error:
            found = ours(error)
            if found is not error:
                raise found from error
            handled = await maybe_invoke_function_tool_failure_error_function(
                function_tool=tool, context=ctx, error=error
            )
            if handled is None:
                raise
            return handled

    return dataclasses.replace(tool, needs_approval=False, on_invoke_tool=invoke)
