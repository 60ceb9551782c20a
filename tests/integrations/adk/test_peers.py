"""What the comparison table in docs/guides/adk.md says of ADK alone and of DBOS's ADK
plugin, checked against them: a turn that dies in a write tool, after the write, and
goes on (ADK's resumability; DBOS's recovery, with ``dbos-google-adk`` from the
``benchmark`` extra, skipped without it) gets its model answer back without asking
again, but runs the write a second time. The death is a BaseException neither records
as the turn's end, so each finds the turn unfinished, as after a kill."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from google.adk.agents import LlmAgent

from tests.provider import GEMINI, FakeProvider, gemini

from .bank import gemini as gemini_model

pytestmark = pytest.mark.slow  # DBOS's own system database and launch


class Died(BaseException):
    """The process dying inside the tool, after its write."""


def test_dbos_plugin_replays_the_model_answer_but_runs_an_undecorated_write_again(
    fake: FakeProvider, tmp_path: Path
) -> None:
    pytest.importorskip("dbos_google_adk", reason="DBOS's ADK plugin: pip install dbos-google-adk")
    from dbos import DBOS, SetWorkflowID
    from dbos_google_adk import DBOSPlugin
    from google.adk.apps import App
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    ledger: list[float] = []

    def transfer(amount: float) -> str:
        """Send money."""
        ledger.append(amount)
        if len(ledger) == 1:
            raise Died()
        return "sent"

    agent = LlmAgent(name="peer", model=gemini_model(fake.root), tools=[transfer])
    runner = InMemoryRunner(app=App(name="peer", root_agent=agent, plugins=[DBOSPlugin()]))
    DBOS(config={"name": "adk-peer", "system_database_url": f"sqlite:///{tmp_path / 'dbos.db'}"})

    @DBOS.workflow()
    async def turn(message: str) -> Any:
        session = await runner.session_service.create_session(app_name="peer", user_id="u")
        text = None
        content = types.Content(role="user", parts=[types.Part(text=message)])
        async for event in runner.run_async(
            user_id="u", session_id=session.id, new_message=content
        ):
            if event.is_final_response() and event.content and event.content.parts:
                text = event.content.parts[0].text
        return text

    fake.script(GEMINI, gemini(None, [("transfer", {"amount": 20})]), gemini("Sent."))
    DBOS.launch()
    try:

        async def died_then_recovered() -> Any:
            with SetWorkflowID("w1"), pytest.raises(Died):
                await turn("Send 20.")
            assert (await DBOS.get_workflow_status_async("w1")).status == "PENDING"
            [handle] = DBOS._recover_pending_workflows()
            return await asyncio.to_thread(handle.get_result)

        assert asyncio.run(died_then_recovered()) == "Sent."
    finally:
        DBOS.destroy()
    # The model's first answer came from DBOS's step, not the server...
    assert len(fake.bodies(GEMINI)) == 2
    # ...but the write ran twice: nothing journaled it.
    assert ledger == [20, 20]


@pytest.mark.filterwarnings("ignore:.*ResumabilityConfig. This feature is experimental:UserWarning")
def test_adk_resumability_replays_the_model_answer_but_runs_the_write_again(
    fake: FakeProvider,
) -> None:
    """ADK alone, with ``ResumabilityConfig(is_resumable=True)`` and a session service
    that outlives the death (here the in-memory one, the process going on): resumed by
    invocation id, the invocation goes on from the model's answer in the session, and
    the tool, which has no response event, runs again: at-least-once, as ADK says."""
    from google.adk.apps import App, ResumabilityConfig
    from google.adk.runners import InMemoryRunner
    from google.genai import types

    ledger: list[float] = []

    def transfer(amount: float) -> str:
        """Send money."""
        ledger.append(amount)
        if len(ledger) == 1:
            raise Died()
        return "sent"

    agent = LlmAgent(name="alone", model=gemini_model(fake.root), tools=[transfer])
    resumable = ResumabilityConfig(is_resumable=True)
    runner = InMemoryRunner(app=App(name="alone", root_agent=agent, resumability_config=resumable))
    fake.script(GEMINI, gemini(None, [("transfer", {"amount": 20})]), gemini("Sent."))

    async def died_then_resumed() -> list[str]:
        session = await runner.session_service.create_session(app_name="alone", user_id="u")
        content = types.Content(role="user", parts=[types.Part(text="Send 20.")])
        with pytest.raises(Died):
            async for _ in runner.run_async(
                user_id="u", session_id=session.id, new_message=content
            ):
                pass
        kept = await runner.session_service.get_session(
            app_name="alone", user_id="u", session_id=session.id
        )
        assert kept is not None
        texts = []
        async for event in runner.run_async(
            user_id="u", session_id=session.id, invocation_id=kept.events[-1].invocation_id
        ):
            parts = event.content.parts if event.content is not None else None
            texts += [p.text for p in parts or () if p.text]
        return texts

    assert asyncio.run(died_then_resumed()) == ["Sent."]
    assert len(fake.bodies(GEMINI)) == 2  # the first answer came from the session
    assert ledger == [20, 20]  # the write ran again
