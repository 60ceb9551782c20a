"""The agent loop (LLM <-> tools) on top of workflows.

The ChatModel protocol and its records come from ``savegame.effects`` (any step
may call a model with ``ctx.llm``); they are exported here as well.
"""

from savegame.agent._context import ContextPolicy, Everything, KeepLast, Prompt
from savegame.agent._loop import Agent
from savegame.agent._model import ScriptedModel
from savegame.effects import ChatModel, Message, ModelResponse, ToolCall, ToolSpec, tool_spec

__all__ = [
    "Agent",
    "ChatModel",
    "ContextPolicy",
    "Everything",
    "KeepLast",
    "Message",
    "ModelResponse",
    "Prompt",
    "ScriptedModel",
    "ToolCall",
    "ToolSpec",
    "tool_spec",
]
