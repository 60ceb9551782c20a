"""What savegame's durable runner adds to an OpenAI Agents SDK turn (issue 32).

One turn is one ``Runner.run`` of an agent with one function tool: a model request
that asks for the tool, the tool, a model request that answers. Every column runs
the same agent, the SDK's own ``OpenAIResponsesModel`` (``--api chat``:
``OpenAIChatCompletionsModel``) talking HTTP to the same in-process model server
(``http.server`` on a thread, a scripted answer in well under a millisecond), so
what differs is what each runner does around the SDK:

* ``Runner.run``: the SDK alone, nothing kept;
* savegame, ``run_agent`` in a workflow step, one savegame run per turn: both model
  requests and the tool journaled (committed before the SDK goes on), the run's
  checkpoints written; on an SQLite file (WAL, ``synchronous=FULL``) and on
  ``memory://`` (what is left is CPU);
* DBOS, ``DBOSRunner.run`` (``dbos-openai-agents``) in a ``@DBOS.workflow``, the tool a
  ``@DBOS.step``, on an SQLite system database: when it is installed
  (``pip install -e '.[benchmark]'``).

The columns run interleaved, a turn of each per round in a shuffled order; DBOS runs
in rounds of its own beside ``Runner.run`` again (its threads, once launched, run
beside everything after). The table gives the median milliseconds of one turn over
``--turns`` rounds (after ``--warmup``), the ratio to the ``Runner.run`` measured beside
it, and the median overhead per turn.

    python benchmarks/openai_agents_turns.py --turns 60
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from agents import (
    Agent,
    Model,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    function_tool,
    set_tracing_disabled,
)
from openai import AsyncOpenAI
from workload import machine, markdown

import savegame
from savegame import END, StepContext, Workflow
from savegame.integrations.openai_agents import run_agent

set_tracing_disabled(True)
USAGE = {"input_tokens": 12, "output_tokens": 5, "total_tokens": 17}


class _Model(BaseHTTPRequestHandler):
    """A model that asks for the tool when the last input is the user's, and answers
    once the tool's output is there (Responses API and Chat Completions)."""

    calls = 0

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        _Model.calls += 1
        call_id = f"call_{_Model.calls}"
        if self.path.endswith("/responses"):
            answered = body["input"][-1].get("type") == "function_call_output"
            item: dict[str, Any] = (
                {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
                 "content": [{"type": "output_text", "text": "It is 100.", "annotations": []}]}
                if answered
                else {"type": "function_call", "id": f"fc_{call_id}", "call_id": call_id,
                      "name": "balance", "arguments": '{"customer": "c1"}', "status": "completed"}
            )  # fmt: skip
            reply: dict[str, Any] = {
                "id": "resp_1", "object": "response", "created_at": 1700000000,
                "model": "gpt-4o", "status": "completed", "output": [item],
                "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
                "usage": {**USAGE, "input_tokens_details": {"cached_tokens": 0},
                          "output_tokens_details": {"reasoning_tokens": 0}},
            }  # fmt: skip
        else:
            answered = body["messages"][-1]["role"] == "tool"
            message: dict[str, Any] = {"role": "assistant", "content": "It is 100."}
            if not answered:
                message = {"role": "assistant", "content": None, "tool_calls": [
                    {"id": call_id, "type": "function",
                     "function": {"name": "balance", "arguments": '{"customer": "c1"}'}}]}  # fmt: skip
            reply = {
                "id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000,
                "model": "gpt-4o",
                "choices": [{"index": 0, "message": message,
                             "finish_reason": "stop" if answered else "tool_calls"}],
                "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
            }  # fmt: skip
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def model(url: str, api: str) -> Model:
    client = AsyncOpenAI(base_url=url, api_key="k", max_retries=0)
    if api == "chat":
        return OpenAIChatCompletionsModel("gpt-4o", openai_client=client)
    return OpenAIResponsesModel("gpt-4o", openai_client=client)


@function_tool
def balance(customer: str) -> float:
    """The customer's balance."""
    return 100.0


Turn = Callable[[], Awaitable[object]]


def sdk_alone(agent: Agent[Any]) -> Turn:
    async def turn() -> object:
        return (await Runner.run(agent, "What is c1's balance?")).final_output

    return turn


def with_savegame(agent: Agent[Any], sg: savegame.Savegame) -> Turn:
    flow = Workflow("bench-openai-agents")

    @flow.step(entry=True)
    async def answer(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        done = await run_agent(ctx, agent, state["question"])
        return {"answer": done.final_output}, END

    async def turn() -> object:
        result = await sg.arun(flow, {"question": "What is c1's balance?"})
        return result.state["answer"]

    return turn


def with_dbos(url: str, api: str, folder: Path) -> tuple[Turn | str, Callable[[], None]]:
    """DBOS's turn and how to shut DBOS down, or why it cannot run."""
    try:
        from dbos import DBOS, DBOSConfig
        from dbos_openai_agents import DBOSRunner
    except ImportError as exc:
        return f"not installed ({exc.name})", lambda: None
    config: DBOSConfig = {
        "name": "bench-openai-agents",
        "system_database_url": f"sqlite:///{folder / 'dbos.sqlite'}",
        "log_level": "WARNING",
    }
    DBOS(config=config)

    @DBOS.step()
    async def dbos_balance(customer: str) -> float:
        """The customer's balance."""
        return 100.0

    tool = function_tool(dbos_balance, name_override="balance")
    agent: Agent[Any] = Agent(name="bank", model=model(url, api), tools=[tool])

    @DBOS.workflow()
    async def turn_flow(question: str) -> str:
        return str((await DBOSRunner.run(agent, question)).final_output)

    DBOS.launch()

    async def turn() -> object:
        return await turn_flow("What is c1's balance?")

    return turn, DBOS.destroy


def interleaved(turns: dict[str, Turn], rounds: int, warmup: int) -> dict[str, list[float]]:
    """Each round runs one turn of every column, in a shuffled order (seeded), so a drift
    of the machine (other processes, a warming cache, what the previous turn left
    behind) falls on all columns alike."""
    rng = random.Random(32)

    async def go() -> dict[str, list[float]]:
        seconds: dict[str, list[float]] = {name: [] for name in turns}
        names = list(turns)
        for i in range(warmup + rounds):
            rng.shuffle(names)
            for name in names:
                started = time.perf_counter()
                answer = await turns[name]()
                took = time.perf_counter() - started
                assert answer == "It is 100.", (name, answer)
                if i >= warmup:
                    seconds[name].append(took)
        return seconds

    return asyncio.run(go())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--api", choices=["responses", "chat"], default="responses")
    args = parser.parse_args()

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Model)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"

    def agent() -> Agent[Any]:
        # A client per column: each column runs in an event loop of its own.
        return Agent(name="bank", model=model(url, args.api), tools=[balance])

    labels = {
        "sdk": ("`Runner.run` (the SDK alone)", "-"),
        "sqlite": ("savegame `run_agent`, a run per turn", "SQLite file"),
        "memory": ("savegame `run_agent`, a run per turn", "memory://"),
        "sdk2": ("`Runner.run`, DBOS launched beside it", "-"),
        "dbos": ("DBOS `DBOSRunner.run`, a workflow per turn", "SQLite file"),
    }
    measured: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        with (
            savegame.connect(f"sqlite:///{folder / 'runs.db'}") as on_file,
            savegame.connect("memory://") as in_memory,
        ):
            turns: dict[str, Turn] = {
                "sdk": sdk_alone(agent()),
                "sqlite": with_savegame(agent(), on_file),
                "memory": with_savegame(agent(), in_memory),
            }
            print(f"{args.turns} rounds of {len(turns)} turns ...", file=sys.stderr)
            measured.update(interleaved(turns, args.turns, args.warmup))
        # DBOS apart, with the SDK beside it again: once launched, its threads (queues,
        # the system database) run beside whatever the process does next.
        dbos, stop = with_dbos(url, args.api, folder)
        if not isinstance(dbos, str):
            print(f"{args.turns} rounds of DBOS and Runner.run ...", file=sys.stderr)
            try:
                beside = interleaved(
                    {"sdk2": sdk_alone(agent()), "dbos": dbos}, args.turns, args.warmup
                )
            finally:
                stop()
            measured.update(beside)
    server.shutdown()
    rows: list[tuple[str, str, list[float] | str, float]] = [
        (*labels[name], seconds, statistics.median(measured["sdk2" if name == "dbos" else "sdk"]))
        for name, seconds in measured.items()
    ]
    if isinstance(dbos, str):
        rows.append((*labels["dbos"], dbos, 0.0))

    table = []
    for label, store, seconds, floor in rows:
        if isinstance(seconds, str):
            table.append([label, store, seconds, "-", "-"])
            continue
        median = statistics.median(seconds)
        table.append(
            [label, store, f"{median * 1000:.2f}", f"{median / floor:.2f}",
             f"{(median - floor) * 1000:+.2f}"]
        )  # fmt: skip
    api = "Responses API" if args.api == "responses" else "Chat Completions"
    print(f"One turn (model, tool, model; {api}), median of {args.turns}; {machine()}\n")
    print(
        markdown(
            ["runner", "store", "median ms / turn", "x Runner.run", "overhead ms / turn"],
            table,
            numeric_from=2,
        )
    )


if __name__ == "__main__":
    main()
