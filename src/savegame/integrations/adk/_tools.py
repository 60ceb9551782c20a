"""An ADK tool call as one journaled call of the step (``ctx.call``'s rules).

The plugin runs the tool itself, inside the call (``before_tool_callback`` answers for
it), so the journal's rules hold around the tool's own code: a recorded result is
handed back without running it; a write's intent is committed before it runs and its
result after; a write with ``approval`` (or ADK's ``require_confirmation``) pauses the
run until a person decides, and runs with the arguments they approved (an edit
included); one in doubt after a crash is retried (idempotent), reconciled, or left to
a person. A tool that asks for a confirmation from inside its code
(``tool_context.request_confirmation``) pauses the run at a savegame interrupt that
names the tool, its arguments, the hint and the payload; a person's answer
(``savegame answer RUN --value '{"confirmed": true, "payload": ...}'``) is the
``ToolConfirmation`` the tool is called again with. ADK's after-tool callbacks then see the result as if the tool had returned it.

What a tool does to its ``ToolContext`` besides returning (``tool_context.state[...] =``,
``actions.transfer_to_agent``, ``skip_summarization``...) is ADK's ``EventActions``, which
become part of the function response event. A replay does not run the tool, so those
are recorded with the result (:data:`RESULT`, :data:`ACTIONS`) and put back on replay:
a resumed step's session gets the same state as an uninterrupted one's. Artifacts a tool
saves live in ADK's artifact service, not in the journal.
"""

from __future__ import annotations

import asyncio
from typing import Any

from google.adk.events.event_actions import EventActions
from google.adk.tools.base_tool import BaseTool
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.adk.tools.tool_context import ToolContext

from savegame.codec import decode_value, encode_value
from savegame.effects import Tool, ainvoke_call
from savegame.errors import ConfigurationError
from savegame.integrations._told import in_stable_order
from savegame.integrations.adk import _scope
from savegame.integrations.adk._options import Unit
from savegame.runtime import traced_tool_call

RESULT, ACTIONS = "adk:result", "adk:actions"
"""The keys of a recorded tool result that changed its ToolContext's actions."""


def _actions(tool_context: ToolContext) -> dict[str, Any]:
    # Python mode: a state value that is not pure data reaches savegame's encoder, which
    # names its path, instead of ADK's serializer, which would store its repr.
    return tool_context.actions.model_dump(exclude_defaults=True)


def _put_back(recorded: Any, tool_context: ToolContext) -> Any:
    """The tool's result, its recorded actions applied to ``tool_context``."""
    if not (isinstance(recorded, dict) and set(recorded) == {RESULT, ACTIONS}):
        return recorded
    actions = EventActions.model_validate(recorded[ACTIONS])
    live = tool_context.actions
    for name in actions.model_fields_set:
        value = getattr(actions, name)
        current = getattr(live, name)
        if isinstance(current, dict) and isinstance(value, dict):
            current.update(value)  # the context's State writes through this very dict
        else:
            setattr(live, name, value)
    return recorded[RESULT]


def journal_name(agent_name: str, tool_name: str) -> str:
    """A tool call's entry name: ``adk:<agent>.<tool>`` (an agent's tools are its own)."""
    return f"adk:{agent_name}.{tool_name}"


def as_adk_result(value: Any) -> Any:
    """What ADK makes of a tool's return value; never None, which would tell ADK that
    no callback answered and run the tool a second time."""
    return {"result": None} if value is None else value


class ConfirmationAsked(ConfigurationError):
    """A tool asked for a confirmation from inside its code (``tool_context.
    request_confirmation``) and returned without doing what it asks about: its call is
    settled not done (one of every call's ``safe_errors``), and a person answers."""

    def __init__(self, tool: str, hint: str, payload: Any) -> None:
        super().__init__(f"tool {tool!r} asks for a confirmation: {hint}")
        self.hint, self.payload = hint, payload


def _confirmation(answer: Any, where: str) -> ToolConfirmation:
    """A person's answer (``savegame answer RUN --value ...``) as ADK's ToolConfirmation."""
    if isinstance(answer, bool):
        return ToolConfirmation(confirmed=answer)
    if isinstance(answer, dict) and isinstance(answer.get("confirmed"), bool):
        return ToolConfirmation(confirmed=answer["confirmed"], payload=answer.get("payload"))
    raise ConfigurationError(
        f"{where}: answer a confirmation with true, false or "
        f'{{"confirmed": true, "payload": ...}}, not {answer!r}'
    )


def _restore(live: EventActions, saved: EventActions) -> None:
    """Put ``live`` back as it was (its dicts in place: the context's State writes
    through them)."""
    for name in type(live).model_fields:
        value, current = getattr(saved, name), getattr(live, name)
        if isinstance(current, dict) and isinstance(value, dict):
            current.clear()
            current.update(value)
        else:
            setattr(live, name, value)


async def call_tool(
    scope: _scope.Scope,
    unit: Unit,
    tool: BaseTool,
    args: dict[str, Any],
    tool_context: ToolContext,
) -> Any:
    name = journal_name(tool_context.agent_name, tool.name)
    if await tool.check_require_confirmation(args, tool_context):
        unit = unit.confirmed_by_adk(tool.name)

    async def body(request_id: str, **arguments: Any) -> Any:
        if unit.effect == "write" and unit.approval:
            # Approved by a person through savegame: ADK's own gate must let it through.
            tool_context.tool_confirmation = ToolConfirmation(confirmed=True)
        saved = tool_context.actions.model_copy(deep=True)
        before = _actions(tool_context)
        with _scope.calling(request_id):
            result = await tool.run_async(args=arguments, tool_context=tool_context)
        asked = tool_context.actions.requested_tool_confirmations.get(
            tool_context.function_call_id or ""
        )
        if asked is not None and tool_context.tool_confirmation is None:
            # ADK would end the invocation here and wait for the client's answer; this
            # call did not happen, and the tool runs again once a person answered.
            _restore(tool_context.actions, saved)
            raise ConfirmationAsked(tool.name, asked.hint, asked.payload)
        after = _actions(tool_context)
        if after != before:
            return {RESULT: result, ACTIONS: after}
        return result

    journaled = Tool(
        body,
        name,
        unit.effect,
        idempotent=unit.idempotent,
        compensate=None,
        approval=unit.approval,
        reconcile=unit.reconcile,
        safe_errors=(*unit.safe_errors, ConfirmationAsked),
        durable=True,
    )
    try:
        with traced_tool_call(scope.ctx.run_id, scope.ctx.step, name) as traced:
            prepared = await asyncio.to_thread(scope.calls.before, journaled, dict(args))
            traced.prepared(prepared)
            if prepared.replay:
                result = prepared.result
            else:
                # ADK is handed the result as the journal hands it back on a replay (a
                # dict's keys in the codec's order, not the tool's): the function response
                # the model is sent next must be the same bytes on every execution.
                made = await ainvoke_call(scope.calls, journaled, prepared)
                result = decode_value(encode_value(made, f"result.{name}"))
    except ConfirmationAsked as question:
        # A savegame interrupt bound to the tool and its arguments, at the next position:
        # the run pauses until a person answers it (savegame answer), then the tool is
        # called again, confirmed or not, at the position after.
        asked = {"tool": tool.name, "args": dict(args), "hint": question.hint}
        if question.payload is not None:
            asked["payload"] = question.payload
        answer = await asyncio.to_thread(scope.calls.interrupt, f"{name}:confirmation", asked)
        tool_context.tool_confirmation = _confirmation(answer, f"{name}:confirmation")
        return await call_tool(scope, unit, tool, args, tool_context)
    scope.ctx.add_usage(tool_calls=1)
    return as_adk_result(in_stable_order(_put_back(result, tool_context)))
