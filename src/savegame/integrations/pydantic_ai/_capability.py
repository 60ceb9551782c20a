"""SavegameDurability: pydantic-ai's durability capability for savegame.

Built on pydantic-ai's extension point for a new durable-execution engine
(``pydantic_ai.durable_exec``: a ``BaseDurabilityCapability`` subclass that declares
its engine and supplies an operation backend), as its Temporal, DBOS and Prefect
capabilities are. The base routes every model request and tool call of a run through
the backend (:mod:`savegame.integrations.pydantic_ai._units`); this class says what a
savegame step is to pydantic-ai: the durable container (a run inside ``durable(ctx)``),
where replay-stable ids come from, and which tools are writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic_ai.agent import EventStreamHandler
from pydantic_ai.agent.abstract import AbstractAgent
from pydantic_ai.durable_exec import (
    JSON_CODEC,
    BaseDurabilityCapability,
    DurabilityEngineSpec,
    DurableOperationBackend,
    conversation_id_from_run_id,
)
from pydantic_ai.models import Model
from pydantic_ai.tools import AgentDepsT

from savegame.integrations.pydantic_ai import _scope
from savegame.integrations.pydantic_ai._units import SavegameBackend, Unit, UnitConfig


@dataclass(init=False, kw_only=True)
class SavegameDurability(BaseDurabilityCapability[AgentDepsT]):
    """Makes a pydantic-ai ``Agent`` durable in savegame: attach it to the agent and run
    the agent inside a step, in ``durable(ctx)`` (or with :func:`run_agent`).

    Each model request and each tool call is one journaled call of the step: a resumed,
    retried or forked run gets the recorded answer back instead of asking again.
    Tools are reads unless declared otherwise, by name here or in the tool's metadata::

        durability = SavegameDurability(tools={"block_card": {"effect": "write", "approval": True}})
        agent = Agent(model, name="bank", capabilities=[durability])

        @agent.tool_plain(metadata={"savegame": {"effect": "write", "idempotent": True}})
        def refund(amount: float) -> str: ...

    The options are :func:`savegame.tool`'s: ``effect``, ``idempotent`` (the tool reads
    :func:`request_id` and the outside system deduplicates on it), ``approval``,
    ``reconcile``, ``safe_errors``. Outside ``durable(ctx)`` the agent runs as usual.
    """

    engine_spec = DurabilityEngineSpec(
        engine_name="savegame",
        durable_unit_noun="call",
        durable_unit_plural="calls",
        durable_container_noun="step",
        # The journal keeps pure data (JSON trees), never Python objects.
        codec=JSON_CODEC,
        wrapped_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
        toolset_lifecycles={
            "function": "enter-always",
            "mcp": "enter-in-durable-unit",
            "dynamic": "enter-never",
        },
        # A toolset added per run would have its calls made outside the journal.
        unsupported_runtime_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
        tool_call_result_upgrade_lenient=False,
        journal_discovery=True,
        # Calls are numbered by their position in the step: parallel tool calls would
        # take positions in whatever order they happened to start.
        sequential_tools_in_durable_context=True,
        tool_config_key="savegame",
    )

    def __init__(
        self,
        *,
        tools: Mapping[str, Mapping[str, Any]] | None = None,
        models: Mapping[str, Model] | None = None,
        event_stream_handler: EventStreamHandler[AgentDepsT] | None = None,
        name: str | None = None,
    ) -> None:
        """Args:
        tools: per tool name, savegame.tool's options for it (``{"effect": "write"}``).
        models: other models a run may switch to, by id (pydantic-ai's rule: a model
            instance is rebuilt by its id inside a unit).
        event_stream_handler: pydantic-ai's event stream handler.
        name: the agent's name in its calls' names (default: the agent's ``name``).
        """
        super().__init__(models=models, event_stream_handler=event_stream_handler, name=name)
        self._units = {
            tool_name: Unit.of(options, f"SavegameDurability(tools=...)[{tool_name!r}]")
            for tool_name, options in (tools or {}).items()
        }
        self._backend: SavegameBackend | None = None

    def _bind_to_agent(self, agent: AbstractAgent[AgentDepsT, Any]) -> None:
        self._backend = SavegameBackend(
            agent_name=self.name,
            default_model_id=self.default_model_id,
            config=UnitConfig(self._units),
            model_name=self._model_label,
        )
        self._register_toolsets(agent)

    def _model_label(self, model_id: str | None) -> str:
        """The name a model's calls are journaled under (``llm:<name>``): the model's own
        name, the same on every execution."""
        model: object = self._extra_models.get(model_id) if model_id is not None else None
        if model is None and model_id is None and self._agent is not None:
            model = getattr(self._agent, "model", None)
        if isinstance(model, Model):
            return model.model_name
        if isinstance(model, str):
            return model
        return model_id or self.default_model_id or "default"

    def get_durable_operation_backend(self) -> DurableOperationBackend[Any]:
        if self._backend is None:
            raise RuntimeError("SavegameDurability is used before it was bound to an agent")
        return self._backend

    @property
    def in_durable_context(self) -> bool:
        return _scope.current() is not None

    def get_default_run_id(self) -> str | None:
        ctx = _scope.current()
        if ctx is None:
            return None
        # The same on every execution of the step: the step's place in its run and the
        # position of the run's first call.
        return f"{ctx.run_id}:{ctx.step}:{_scope.calls_of(ctx).made}"

    def get_default_conversation_id(self, run_id: str) -> str | None:
        return conversation_id_from_run_id(run_id) if self.in_durable_context else None
