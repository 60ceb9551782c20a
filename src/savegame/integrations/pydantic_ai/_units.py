"""pydantic-ai's durable operations as savegame calls: the operation backend.

pydantic-ai hands a durability engine each operation (a model request, a tool call, a
toolset's discovery) as an async body to run in one named durable unit
(``CallableOperationBackend.execute``). Here a unit is one call of the running step's
journal (:class:`savegame.effects.Calls`), at the step's next position. A model
request is a model call, as ``ctx.llm``'s are (:mod:`._models`); anything else a tool
call named by pydantic-ai's journal naming
(``bank__function_toolset__<id>.call_tool:refund``). A recorded result is returned
without running the body, a write's intent is committed before it runs and its result
after, a write declared with ``approval`` pauses the run until a person decides, and
one in doubt after a crash is retried (idempotent), reconciled, or left to a person.
Everything pydantic-ai asks, a model request included, is committed when it returns.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic_ai.durable_exec import (
    JSON_CODEC,
    CallableOperationBackend,
    CallToolResult,
    DurableOperationConfig,
    DurableOperationId,
    JournalOperationNamer,
    ModelRequestId,
    OperationConfigRole,
    ToolsetCallToolId,
    ToolsetValidateToolArgumentsId,
)

# What pydantic-ai's own engines record a tool's return value as (DBOS imports it the same way).
from pydantic_ai.durable_exec._toolset import wrap_tool_call_result

from savegame.effects import Calls, Tool, ainvoke_call
from savegame.errors import ConfigurationError
from savegame.integrations._model_calls import journaled_model_call
from savegame.integrations.pydantic_ai import _entries, _scope
from savegame.integrations.pydantic_ai._models import PAYLOAD, model_call, recorded
from savegame.runtime import StepContext, traced_tool_call

Approval = bool | Callable[[dict[str, Any]], bool]
_OPTIONS = frozenset({"effect", "idempotent", "approval", "reconcile", "safe_errors"})


@dataclass(frozen=True)
class Unit:
    """How one operation is called: what ``savegame.tool`` would say of it."""

    effect: Literal["read", "write"] = "read"
    idempotent: bool = False
    approval: Approval = False
    reconcile: Callable[[str], Any] | None = None
    safe_errors: tuple[type[BaseException], ...] = field(default=())

    @classmethod
    def of(cls, declared: Mapping[str, Any], where: str) -> Unit:
        unknown = set(declared) - _OPTIONS
        if unknown:
            raise ConfigurationError(
                f"{where}: unknown savegame option(s) {sorted(unknown)}; "
                f"the options are {sorted(_OPTIONS)}"
            )
        effect = declared.get("effect", "read")
        if effect not in ("read", "write"):
            raise ConfigurationError(f"{where}: effect must be 'read' or 'write', not {effect!r}")
        unit = cls(
            effect=effect,
            idempotent=bool(declared.get("idempotent", False)),
            approval=declared.get("approval", False),
            reconcile=declared.get("reconcile"),
            safe_errors=tuple(declared.get("safe_errors", ())),
        )
        if unit.effect == "read" and (unit.idempotent or unit.reconcile or unit.approval):
            # Only a write has an intent to gate, deduplicate or reconcile.
            raise ConfigurationError(
                f"{where}: idempotent, reconcile and approval are for writes (effect='write')"
            )
        return unit


READ = Unit()


class UnitConfig(DurableOperationConfig[Unit]):
    """Every operation is a read, except the tools declared otherwise: by name
    (``SavegameDurability(tools=...)``) or in the tool's metadata under ``"savegame"``."""

    def __init__(self, tools: Mapping[str, Unit]) -> None:
        self._tools = dict(tools)

    def base(self, role: OperationConfigRole, *, operation_id: DurableOperationId) -> Unit:
        return READ

    def for_tool(
        self,
        role: OperationConfigRole,
        *,
        operation_id: DurableOperationId,
        tool: object | None,
        tool_name: str,
    ) -> Unit:
        if isinstance(operation_id, ToolsetValidateToolArgumentsId):
            return READ  # checking the model's arguments changes nothing
        metadata = getattr(getattr(tool, "tool_def", None), "metadata", None) or {}
        declared = metadata.get("savegame")
        if declared is not None:
            if not isinstance(declared, Mapping):
                raise ConfigurationError(
                    f"tool {tool_name!r}: its 'savegame' metadata must be a dict of "
                    f"savegame.tool's options, not {type(declared).__name__}"
                )
            return Unit.of(declared, f"tool {tool_name!r} metadata")
        return self._tools.get(tool_name, READ)


class EditRefused(ConfigurationError):
    """An approval's edit of a pydantic-ai tool call: refused before the tool ran, so the
    write is settled not done (it is one of every unit's ``safe_errors``)."""


class SavegameBackend(CallableOperationBackend[Unit]):
    """Runs each operation's body as one call of the current step's journal."""

    def __init__(
        self,
        *,
        agent_name: str,
        default_model_id: str | None,
        config: UnitConfig,
        model_name: Callable[[str | None], str],
    ) -> None:
        namer = JournalOperationNamer(agent_name, default_model_id=default_model_id or "default")
        super().__init__(namer=namer, config=config)
        self._model_name = model_name

    async def execute(
        self,
        *,
        operation_id: DurableOperationId,
        name: str,
        body: Callable[[], Awaitable[object]],
        cache_key: tuple[object, ...],
        config: Unit,
    ) -> object:
        ctx = _scope.current()
        if ctx is None:  # the base calls a backend only inside the durable container
            raise ConfigurationError(f"{name}: not inside durable(ctx)")
        calls = _scope.calls_of(ctx)
        if isinstance(operation_id, ModelRequestId):
            return await self._model_request(ctx, calls, operation_id, cache_key, body)
        asked = _entries.arguments(operation_id, cache_key)

        async def unit(call: dict[str, Any], request_id: str) -> object:
            if call != asked:
                # An approver's edit would change what the journal says was called, not
                # what pydantic-ai calls: refused rather than ignored.
                raise EditRefused(
                    f"{name}: an approval's edit of a pydantic-ai tool call is not supported "
                    "(approve or reject it)"
                )
            with _scope.calling(request_id):
                return await body()

        tool = Tool(
            unit,
            name,
            config.effect,
            idempotent=config.idempotent,
            compensate=None,
            approval=config.approval,
            reconcile=_recorded(config.reconcile),
            safe_errors=(*config.safe_errors, EditRefused),
            durable=True,
        )
        with traced_tool_call(ctx.run_id, ctx.step, name) as traced:
            prepared = await asyncio.to_thread(calls.before, tool, {"call": asked})
            traced.prepared(prepared)
            if prepared.replay:
                payload = prepared.result
                settled = prepared.entry.metadata.get("resolved") if prepared.entry else None
                if settled == "done" and isinstance(operation_id, ToolsetCallToolId):
                    payload = await asyncio.to_thread(as_return, payload)  # a person's result
            else:
                payload = await ainvoke_call(calls, tool, prepared)
        if isinstance(operation_id, ToolsetCallToolId):
            ctx.add_usage(tool_calls=1)
        return payload

    async def _model_request(
        self,
        ctx: StepContext,
        calls: Calls,
        operation_id: ModelRequestId,
        cache_key: tuple[object, ...],
        body: Callable[[], Awaitable[object]],
    ) -> object:
        """A model request is a model call of the step (``ctx.llm``'s entry): its request
        kept by parts, its response committed at once, before pydantic-ai sees it."""
        call = model_call(self._model_name(operation_id.model_id), cache_key)

        async def ask(request_id: str) -> dict[str, Any]:
            return recorded(await body())

        kept = await journaled_model_call(
            ctx, calls, call, ask,
            system="pydantic-ai", payload=PAYLOAD, recorded_by="a pydantic-ai agent",
        )  # fmt: skip
        return kept[PAYLOAD]


def as_return(value: Any) -> Any:
    """``value`` as pydantic-ai's engines record a tool's return value (what a unit's body
    returns), for a result that did not come from the body: a ``reconcile``'s answer, a
    person's ``savegame resolve --result``."""

    async def returned() -> Any:
        return value

    # Called in a worker thread (Calls.before and Calls.failed run off the loop) or
    # before the body would have run; wrapping runs nothing that waits.
    wrapped = asyncio.run(wrap_tool_call_result(returned()))
    return JSON_CODEC.dump(CallToolResult, wrapped)


def _recorded(reconcile: Callable[[str], Any] | None) -> Callable[[str], Any] | None:
    """A tool's ``reconcile``, answering what the journal records for a call, so a
    reconciled call replays as if it had returned."""
    if reconcile is None:
        return None
    check = reconcile

    def recorded(request_id: str) -> Any:
        found = check(request_id)
        return None if found is None else as_return(found)

    return recorded
