"""What a durable ADK turn costs against ADK's plain Runner (issue 32).

One turn is what a support agent's turn usually is: a model call that asks for a
tool, the tool (a read), and a model call that answers. The agent is a real
``LlmAgent`` whose real ``Gemini`` model (google-genai's client) asks a local server
in this process that speaks the Gemini API and answers at once, so the table shows
the framework's cost, not a model's. Each column runs the same turns:

* ``ADK alone``: ``InMemoryRunner.run_async``, a new session per turn;
* ``ADK, model asked by a plugin``: the same, with a plugin whose
  ``before_model_callback`` asks the model itself and returns its answer, journaling
  nothing: the path savegame's (and DBOS's) plugin takes through ADK, without the
  journal, to tell ADK's share from savegame's;
* ``savegame memory://`` and ``savegame SQLite``: one savegame run per turn whose step
  is ``run_agent(ctx, runner, ...)`` with ``SavegamePlugin`` (both model calls and the
  tool journaled, the session kept in the checkpoint); the SQLite file is savegame's
  default (WAL, ``synchronous=FULL``);
* ``ADK + DBOSPlugin``: DBOS's own ADK integration (``dbos-google-adk``), the Runner
  driven from a ``@DBOS.workflow()`` on an SQLite system database (its model calls
  are DBOS steps; the tool is not, as DBOS leaves tools to the user), when installed.

    python benchmarks/adk_turns.py --turns 40 --repeat 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import statistics
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Awaitable, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import metadata
from pathlib import Path
from typing import Any

from workload import machine, markdown

MODEL = "gemini-2.5-flash"


class Gemini(BaseHTTPRequestHandler):
    """``generateContent``, answered by turn: no model answer yet in the request, ask
    for the tool; else answer."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
        asked = any(c.get("role") == "model" for c in body.get("contents", ()))
        part = (
            {"text": "It is 120."}
            if asked
            else {"functionCall": {"name": "lookup_order", "args": {"order_id": "A-1"}}}
        )
        answer = json.dumps({
            "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}],
            "usageMetadata": {"promptTokenCount": 40, "candidatesTokenCount": 8, "totalTokenCount": 48},
            "modelVersion": MODEL,
        }).encode()  # fmt: skip
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: Any) -> None:
        pass


def lookup_order(order_id: str) -> dict[str, Any]:
    """Look an order up."""
    return {"order_id": order_id, "total": 120}


def agent(base_url: str) -> Any:
    from google.adk.agents import LlmAgent
    from google.adk.models import Gemini as GeminiModel

    model = GeminiModel(model=MODEL, base_url=base_url, client_kwargs={"api_key": "bench"})
    return LlmAgent(name="support", model=model, instruction="Be brief.", tools=[lookup_order])


def runner(base_url: str, *plugins: Any) -> Any:
    from google.adk.apps import App
    from google.adk.runners import InMemoryRunner

    return InMemoryRunner(
        app=App(name="support", root_agent=agent(base_url), plugins=list(plugins))
    )


async def plain_turn(adk: Any, message: Any) -> str | None:
    session = await adk.session_service.create_session(app_name="support", user_id="u")
    text = None
    async for event in adk.run_async(user_id="u", session_id=session.id, new_message=message):
        if event.is_final_response() and event.content and event.content.parts:
            text = event.content.parts[0].text
    return text


def asking_plugin() -> Any:
    from google.adk.plugins import BasePlugin

    class Asking(BasePlugin):
        async def before_model_callback(self, *, callback_context: Any, llm_request: Any) -> Any:
            llm = callback_context._invocation_context.agent.canonical_model
            last = None
            async for response in llm.generate_content_async(llm_request, stream=False):
                last = response
            return last

    return Asking(name="asking")


def time_turns(turns: int, one: Callable[[int], Awaitable[Any]]) -> float:
    """Median seconds of one turn, over ``turns`` turns (one warm-up turn first)."""

    async def all_turns() -> list[float]:
        await one(-1)
        spent = []
        for i in range(turns):
            started = time.perf_counter()
            await one(i)
            spent.append(time.perf_counter() - started)
        return spent

    return statistics.median(asyncio.run(all_turns()))


def plain(base_url: str, turns: int, *plugins: Any) -> float:
    from google.genai import types

    adk = runner(base_url, *plugins)
    message = types.Content(role="user", parts=[types.Part(text="What is A-1's total?")])

    async def one(i: int) -> None:
        assert await plain_turn(adk, message) == "It is 120."

    return time_turns(turns, one)


def durable(base_url: str, turns: int, store: str) -> float:
    from savegame import END, StepContext, Workflow, connect
    from savegame.integrations.adk import SavegamePlugin, run_agent

    adk = runner(base_url, SavegamePlugin())
    flow = Workflow("adk-bench")

    @flow.step(entry=True)
    async def turn(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        done = await run_agent(ctx, adk, state["question"])
        return {"answer": done.text, "session": done.session}, END

    with connect(store) as sg:

        async def one(i: int) -> None:
            result = await sg.arun(flow, {"question": "What is A-1's total?"})
            assert result.state["answer"] == "It is 120.", result.state

        return time_turns(turns, one)


def dbos(base_url: str, turns: int, folder: Path) -> float | None:
    try:
        from dbos import DBOS
        from dbos_google_adk import DBOSPlugin
    except ImportError:
        return None
    from google.genai import types

    DBOS(config={"name": "adk-bench", "system_database_url": f"sqlite:///{folder / 'dbos.db'}"})
    adk = runner(base_url, DBOSPlugin())
    message = types.Content(role="user", parts=[types.Part(text="What is A-1's total?")])

    @DBOS.workflow()
    async def turn() -> str | None:
        return await plain_turn(adk, message)

    DBOS.launch()
    try:

        async def one(i: int) -> None:
            assert await turn() == "It is 120."

        return time_turns(turns, one)
    finally:
        DBOS.destroy()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")  # ADK's experimental and deprecation notices
    logging.disable(logging.WARNING)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Gemini)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base_url = f"http://127.0.0.1:{server.server_address[1]}"
    columns: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(args.repeat):
            folder = Path(tmp) / str(n)
            folder.mkdir()
            columns.setdefault("ADK alone", []).append(plain(base_url, args.turns))
            columns.setdefault("ADK, model asked by a plugin", []).append(
                plain(base_url, args.turns, asking_plugin())
            )
            columns.setdefault("savegame memory://", []).append(
                durable(base_url, args.turns, "memory://")
            )
            columns.setdefault("savegame SQLite", []).append(
                durable(base_url, args.turns, f"sqlite:///{folder / 'runs.db'}")
            )
            found = (
                dbos(base_url, args.turns, folder)
                if n == 0 or "ADK + DBOSPlugin" in columns
                else None
            )
            if found is not None:
                columns.setdefault("ADK + DBOSPlugin", []).append(found)
    server.shutdown()

    base = statistics.median(columns["ADK alone"])
    rows = []
    for name, values in columns.items():
        median = statistics.median(values)
        rows.append(
            [name, f"{median * 1000:.1f}", f"{(median - base) * 1000:+.1f}", f"{median / base:.2f}"]
        )
    versions = [f"google-adk {metadata.version('google-adk')}"]
    if "ADK + DBOSPlugin" in columns:
        versions.append(
            f"dbos {metadata.version('dbos')}, dbos-google-adk {metadata.version('dbos-google-adk')}"
        )
    else:
        versions.append("dbos-google-adk not installed: no DBOS column")
    print(machine(*versions))
    print(
        f"{args.turns} turns x {args.repeat} repeats; one turn = model call + tool + model call\n"
    )
    print(markdown(["", "median ms / turn", "vs ADK alone", "x ADK alone"], rows, numeric_from=1))


if __name__ == "__main__":
    sys.exit(main())
