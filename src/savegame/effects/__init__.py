"""Effects: calls to the outside world made exactly once, their journal, people's
decisions on them, and compensation.

Where things are::

    _tools.py          Tool and @tool: what a call may do (read or write, idempotent,
                       reconcile, compensate, needs approval)
    _journal.py        Journal: a run's entries, verified as they load, written through the store
    _calls.py          Calls: the rules behind ctx.call and ctx.llm (replay, approval,
                       in doubt, call)
    _llm.py            model calls: ChatModel, ModelResponse, ToolCall, ToolSpec (registered
                       with the codec), ModelCall (what a call is journaled as)
    decisions.py       what people do from outside: approve, reject, supply, resolve, close
    _compensation.py   run_compensation: undo a run's completed writes, once each

``decisions`` stays a public module: the runtime calls its verbs qualified
(``decisions.approve``, ``decisions.pending``), which is how they read right.
"""

from savegame.effects import decisions
from savegame.effects._calls import Calls
from savegame.effects._compensation import run_compensation
from savegame.effects._journal import Journal
from savegame.effects._llm import (
    ChatModel,
    Message,
    ModelCall,
    ModelResponse,
    ToolCall,
    ToolSpec,
    as_response,
    tool_spec,
)
from savegame.effects._tools import Tool, as_tool, tool
from savegame.effects.decisions import PendingInterrupt, default_actor

__all__ = [
    "Calls",
    "ChatModel",
    "Journal",
    "Message",
    "ModelCall",
    "ModelResponse",
    "PendingInterrupt",
    "Tool",
    "ToolCall",
    "ToolSpec",
    "as_response",
    "as_tool",
    "decisions",
    "default_actor",
    "run_compensation",
    "tool",
    "tool_spec",
]
