"""Effects: calls to the outside world made exactly once, their journal, people's
decisions on them, and compensation.

Where things are::

    _tools.py          Tool and @tool: what a call may do (read or write, idempotent,
                       reconcile, compensate, needs approval, retries, timeout)
    _journal.py        Journal: a run's entries, verified as they load, written through the store
    _calls.py          Calls: the rules behind ctx.call and ctx.llm (replay, approval,
                       in doubt, call, attempts)
    _replay.py         Replay: a fork's calls reused from the journal of the branch it left;
                       a strict replay's Diverged (what the journal does not answer)
    _attempts.py       invoke_call: one call's attempts (timeout, retries while safe)
    _retry.py          Backoff, stamina's schedule, timeouts for steps and calls
    _llm.py            model calls: ChatModel, ModelResponse, ToolCall, ToolSpec (registered
                       with the codec), ModelCall (what a call is journaled as)
    _expiry.py         approvals that expire: the deadline stored with the gate, applied once
                       (reject by "expiry", or escalate: an approval.escalated event)
    decisions.py       what people do from outside: approve, reject, supply, resolve, close
    _compensation.py   run_compensation: undo a run's completed writes, once each
    _patches.py        ctx.patched / ctx.deprecate_patch: a code change only where a run has
                       not been yet, decided once and journaled (a marker of kind patch)
    _waits.py          Waits: ctx.wait_for and ctx.sleep without a process held; events
                       (what ``savegame send`` and a child run's end journal); ChildRun
                       (registered with the codec: a planner keeps them in its state)

``decisions`` stays a public module: the runtime calls its verbs qualified
(``decisions.approve``, ``decisions.pending``), which is how they read right.
"""

from savegame.effects import decisions
from savegame.effects._attempts import ainvoke as ainvoke_call
from savegame.effects._attempts import invoke as invoke_call
from savegame.effects._calls import Calls
from savegame.effects._compensation import run_compensation
from savegame.effects._expiry import BY_EXPIRY, ESCALATED, OnExpiry
from savegame.effects._journal import Journal
from savegame.effects._llm import (
    ChatModel,
    Message,
    ModelCall,
    ModelResponse,
    ToolCall,
    ToolSpec,
    as_response,
    below_zero,
    tool_spec,
)
from savegame.effects._patches import patched
from savegame.effects._prompts import STREAM_MARK, AskedRequest, asked, is_stream_marker
from savegame.effects._replay import (
    EXECUTED,
    FORK_KEY,
    MODES,
    REPLAY_KEY,
    REUSED,
    Diverged,
    Mode,
    Origin,
    Replay,
    Unserved,
)
from savegame.effects._retry import (
    Backoff,
    Expired,
    RetryOn,
    aattempts,
    as_backoff,
    check_retries,
    retry_wait,
    retryable,
    within,
)
from savegame.effects._streams import ABANDONED
from savegame.effects._tools import (
    Tool,
    as_tool,
    check_approval,
    close_match,
    registered,
    tool,
    unknown_compensation,
)
from savegame.effects._waits import (
    CHILD_TOPIC,
    EVENT_NODE,
    PARENT_KEY,
    ChildRun,
    Waits,
    as_delta,
    check_topic,
    child_topic,
    end_event,
    event_entry,
    event_request_id,
    parent_of,
)
from savegame.effects.decisions import PendingInterrupt, default_actor

__all__ = [
    "ABANDONED",
    "BY_EXPIRY",
    "CHILD_TOPIC",
    "ESCALATED",
    "EVENT_NODE",
    "EXECUTED",
    "FORK_KEY",
    "MODES",
    "PARENT_KEY",
    "REPLAY_KEY",
    "REUSED",
    "STREAM_MARK",
    "AskedRequest",
    "Backoff",
    "Calls",
    "ChatModel",
    "ChildRun",
    "Diverged",
    "Expired",
    "Journal",
    "Message",
    "Mode",
    "ModelCall",
    "ModelResponse",
    "OnExpiry",
    "Origin",
    "PendingInterrupt",
    "Replay",
    "RetryOn",
    "Tool",
    "ToolCall",
    "ToolSpec",
    "Unserved",
    "Waits",
    "aattempts",
    "ainvoke_call",
    "as_backoff",
    "as_delta",
    "as_response",
    "as_tool",
    "asked",
    "below_zero",
    "check_approval",
    "check_retries",
    "check_topic",
    "child_topic",
    "close_match",
    "decisions",
    "default_actor",
    "end_event",
    "event_entry",
    "event_request_id",
    "invoke_call",
    "is_stream_marker",
    "parent_of",
    "patched",
    "registered",
    "retry_wait",
    "retryable",
    "run_compensation",
    "tool",
    "tool_spec",
    "unknown_compensation",
    "within",
]
