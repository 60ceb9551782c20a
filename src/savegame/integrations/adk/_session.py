"""One agent turn inside a savegame step, its ADK session kept in the run's state.

ADK keeps a conversation in a session service; savegame keeps a run in its checkpoints.
A step killed half-way leaves a session service holding the events of a turn the
checkpoint never saw. So the checkpoint is the truth: :func:`run_agent` rebuilds the
session from the state it was given (``AgentTurn.session`` of the previous turn, pure
data), runs the turn, and hands back the session with this turn's events for the step
to put in its state. The turn's model requests and tool calls are journaled
(:class:`SavegamePlugin`), so a step executed again rebuilds the same events from the
journal without asking or writing anything twice.

What ADK makes anew on each execution is not kept: event ids and timestamps (given
again when the session is rebuilt), and the invocation id, replaced by the turn's
place in the run (``savegame-<step>.<call>``), so a resumed run's state equals an
uninterrupted one's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from google.adk.agents import BaseAgent
from google.adk.agents.run_config import RunConfig
from google.adk.apps import App
from google.adk.events import Event
from google.adk.runners import InMemoryRunner, Runner
from google.adk.sessions import Session
from google.genai import types

from savegame.errors import ConfigurationError
from savegame.integrations.adk import _scope
from savegame.integrations.adk._plugin import SavegamePlugin
from savegame.runtime import StepContext

_VOLATILE = ("id", "timestamp")


@dataclass(frozen=True, slots=True)
class AgentTurn:
    """What one turn of an ADK agent left: its answer and the session to keep."""

    text: str | None
    """The text of the turn's final response (None: it ended without one)."""
    session: dict[str, Any]
    """The ADK session after the turn as pure data (``user_id``, ``state``, ``events``):
    put it in the run's state and pass it to the next turn's :func:`run_agent`."""

    @property
    def state(self) -> dict[str, Any]:
        """The session's state (ADK's ``session.state``, ``temp:`` keys left out)."""
        found = self.session.get("state")
        return dict(found) if isinstance(found, Mapping) else {}


_runners: dict[int, tuple[BaseAgent, Runner]] = {}
"""A Runner per agent given to run_agent (kept with its agent, so an id is never reused)."""


def _runner(given: Runner | BaseAgent) -> Runner:
    if isinstance(given, Runner):
        if not any(isinstance(p, SavegamePlugin) for p in given.plugin_manager.plugins):
            raise ConfigurationError(
                f"run_agent: the Runner of app {given.app_name!r} has no SavegamePlugin; "
                "add plugins=[SavegamePlugin(...)] or pass the agent itself"
            )
        return given
    if not isinstance(given, BaseAgent):
        raise ConfigurationError(f"run_agent: an ADK Runner or agent, not {type(given).__name__}")
    found = _runners.get(id(given))
    if found is None or found[0] is not given:
        runner = InMemoryRunner(
            app=App(name=given.name, root_agent=given, plugins=[SavegamePlugin()])
        )
        _runners[id(given)] = found = (given, runner)
    return found[1]


async def _restore(
    runner: Runner, session_id: str, user_id: str, kept: Mapping[str, Any], state: Mapping[str, Any]
) -> Session:
    """The session as the checkpoint has it, in the runner's session service."""
    service, app = runner.session_service, runner.app_name
    if await service.get_session(app_name=app, user_id=user_id, session_id=session_id):
        # A session service outlives the step: what is there may be a killed turn's.
        await service.delete_session(app_name=app, user_id=user_id, session_id=session_id)
    initial = dict(kept.get("state") or state)
    live = await service.create_session(
        app_name=app, user_id=user_id, state=initial, session_id=session_id
    )
    for event in kept.get("events") or ():
        await service.append_event(live, Event.model_validate(event))
    return live


def _dump(event: Event, invocation: str) -> dict[str, Any]:
    dumped: dict[str, Any] = event.model_dump(mode="json", exclude_none=True)
    for key in _VOLATILE:
        dumped.pop(key, None)
    dumped["invocation_id"] = invocation
    return dumped


def _text(event: Event) -> str | None:
    parts = event.content.parts if event.content is not None else None
    texts = [p.text for p in parts or () if p.text and not p.thought]
    return "".join(texts) if texts else None


async def run_agent(
    ctx: StepContext,
    agent: Runner | BaseAgent,
    message: str | types.Content,
    *,
    session: Mapping[str, Any] | None = None,
    user_id: str = "user",
    state: Mapping[str, Any] | None = None,
    run_config: RunConfig | None = None,
) -> AgentTurn:
    """Run one turn of an ADK agent as journaled calls of ``ctx``'s step.

    Args:
        ctx: the running step's context.
        agent: an ADK agent (run by an in-memory Runner with a default
            :class:`SavegamePlugin`), or your own Runner with a SavegamePlugin in its
            plugins (its session service holds a copy of the session).
        message: the user's message.
        session: the previous turn's ``AgentTurn.session`` (None: a new conversation).
        user_id: ADK's user id.
        state: the session's initial state, for a new conversation.
        run_config: ADK's RunConfig for the turn (a journaled model call is made whole,
            also in ``StreamingMode.SSE``).

    Returns:
        The turn's answer and the session to keep in the run's state.
    """
    runner = _runner(agent)
    kept = dict(session or {})
    user = str(kept.get("user_id") or user_id)
    with _scope.durable(ctx) as step:
        scope = _scope.current()
        assert scope is not None  # set by durable()
        turn = f"savegame-{step.step}.{scope.calls.made}"
        live = await _restore(runner, step.run_id, user, kept, state or {})
        known = len(live.events)
        content = (
            message
            if isinstance(message, types.Content)
            else types.Content(role="user", parts=[types.Part(text=message)])
        )
        text: str | None = None
        async for event in runner.run_async(
            user_id=user, session_id=live.id, new_message=content, run_config=run_config
        ):
            if event.is_final_response() and _text(event) is not None:
                text = _text(event)
        after = await runner.session_service.get_session(
            app_name=runner.app_name, user_id=user, session_id=live.id
        )
    if after is None:
        raise ConfigurationError(f"run {ctx.run_id}: the ADK session went away during the turn")
    events = [dict(e) for e in kept.get("events") or ()]
    events += [_dump(e, turn) for e in after.events[known:]]
    kept_state = {k: v for k, v in after.state.items() if not k.startswith("temp:")}
    return AgentTurn(text, {"user_id": user, "state": kept_state, "events": events})
