"""An ADK tool call as one journaled call of the step (``ctx.call``'s rules).

The plugin runs the tool itself, inside the call (``before_tool_callback`` answers for
it), so the journal's rules hold around the tool's own code: a recorded result is
handed back without running it; a write's intent is committed before it runs and its
result after; a write with ``approval`` (or ADK's ``require_confirmation``) pauses the
run until a person decides, and runs with the arguments they approved (an edit
included); one in doubt after a crash is retried (idempotent), reconciled, or left to
a person. ADK's after-tool callbacks then see the result as if the tool had returned it.

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

from savegame.effects import Tool, ainvoke_call
from savegame.errors import ConfigurationError
from savegame.integrations.adk import _scope
from savegame.integrations.adk._options import Unit

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
        before = _actions(tool_context)
        with _scope.calling(request_id):
            result = await tool.run_async(args=arguments, tool_context=tool_context)
        if tool_context.actions.requested_tool_confirmations:
            raise ConfigurationError(
                f"run {scope.calls.run_id}, step {scope.calls.node!r}: tool {tool.name!r} "
                "asked for a confirmation from inside its code (tool_context."
                "request_confirmation); in a durable run declare it instead: "
                "FunctionTool(require_confirmation=...) or "
                f"SavegamePlugin(tools={{{tool.name!r}: {{'effect': 'write', 'approval': True}}}})"
            )
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
        safe_errors=unit.safe_errors,
        durable=True,
    )
    prepared = await asyncio.to_thread(scope.calls.before, journaled, dict(args))
    if prepared.replay:
        result = prepared.result
    else:
        result = await ainvoke_call(scope.calls, journaled, prepared)
    scope.ctx.add_usage(tool_calls=1)
    return as_adk_result(_put_back(result, tool_context))
