"""The agent loop (LLM <-> tools) on top of workflows."""

from savegame.agent._loop import Agent, tool_spec
from savegame.agent._model import (
    ChatModel,
    Message,
    ModelResponse,
    ScriptedModel,
    ToolCall,
    ToolSpec,
)

__all__ = [
    "Agent",
    "ChatModel",
    "Message",
    "ModelResponse",
    "ScriptedModel",
    "ToolCall",
    "ToolSpec",
    "tool_spec",
]
