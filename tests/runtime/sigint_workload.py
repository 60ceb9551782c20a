"""Workflows a test stops with a real SIGINT, in a process of their own.

Each call a step makes logs ``start <n>`` to ``$SIGINT_LOG`` as it begins and ``end <n>``
as it returns; the call ``$SIGINT_HOLD`` names (``2``) waits between the two for the file
``$SIGINT_GATE`` to exist. So a test catches that call in flight: it waits for ``start 2``,
sends its SIGINT, waits for savegame's notice on stderr (the handler ran), then opens the
gate.

Run as a script, it drives one of them through the Python API and reports on stdout:
``python sigint_workload.py NAME STORE_URL HOW`` with HOW one of ``run``, ``arun``
(``asyncio.run(arun(...))``), ``handler`` (the program has its own SIGINT handler) or
``thread`` (the run is started from another thread).
"""

from __future__ import annotations

import asyncio
import faulthandler
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Any

import savegame
from savegame import END, Agent, RunResult, StepContext, Workflow, tool
from savegame.models import OpenAI, Price

STEPS = 4
GATE_TIMEOUT = 60.0

if os.environ.get("SIGINT_LOG"):
    # Under the harness: SIGUSR1 writes every thread's stack to stderr, which the harness
    # asks for before it gives up on a child (where was it when the notice never came?).
    faulthandler.register(signal.SIGUSR1, all_threads=True)


def _log(line: str) -> None:
    path = os.environ.get("SIGINT_LOG")
    if path:
        with open(path, "a") as log:
            log.write(line + "\n")


def _held(what: str) -> bool:
    """Whether call ``what`` must wait at the gate still."""
    gate = os.environ.get("SIGINT_GATE")
    held = what == os.environ.get("SIGINT_HOLD")
    return held and gate is not None and not Path(gate).exists()


def _through_gate(what: str) -> None:
    _log(f"start {what}")
    deadline = time.monotonic() + GATE_TIMEOUT
    while _held(what) and time.monotonic() < deadline:
        time.sleep(0.01)
    _log(f"end {what}")


async def _athrough_gate(what: str) -> None:
    _log(f"start {what}")
    deadline = time.monotonic() + GATE_TIMEOUT
    while _held(what) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    _log(f"end {what}")


@tool(effect="write", idempotent=True)
def work(n: int, *, request_id: str) -> int:
    _through_gate(str(n))
    return n * 10


@tool(effect="write", idempotent=True)
async def awork(n: int, *, request_id: str) -> int:
    await _athrough_gate(str(n))
    return n * 10


def _next(n: int) -> str:
    return "tick" if n < STEPS else END


sync_wf = Workflow("sigint-sync")


@sync_wf.step(entry=True)
def tick(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    n = state.get("n", 0) + 1
    return {"n": n, "seen": [*state.get("seen", []), ctx.call(work, n)]}, _next(n)


async_wf = Workflow("sigint-async")


@async_wf.step(name="tick", entry=True)
async def atick(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    n = state.get("n", 0) + 1
    return {"n": n, "seen": [*state.get("seen", []), await ctx.acall(awork, n)]}, _next(n)


pairs_wf = Workflow("sigint-pairs")


@pairs_wf.step(name="tick", entry=True)
def pair(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    """Two calls a step: a Ctrl-C in the first stops the step before the second."""
    n = state.get("n", 0) + 1
    first, second = ctx.call(work, 2 * n - 1), ctx.call(work, 2 * n)
    return {"n": n, "seen": [*state.get("seen", []), first, second]}, _next(n)


@tool(effect="read")
def child_process(n: int) -> int:
    """A tool that runs a process of its own, in the run's process group: a terminal's
    Ctrl-C reaches it too, and it dies of it."""
    script = (
        "import os, sys, time; from pathlib import Path\n"
        "log = os.environ.get('SIGINT_LOG')\n"
        "if log: open(log, 'a').write('start ' + sys.argv[1] + '\\n')\n"
        "gate = os.environ.get('SIGINT_GATE')\n"
        "held = sys.argv[1] == os.environ.get('SIGINT_HOLD')\n"
        "while held and gate and not Path(gate).exists(): time.sleep(0.01)\n"
    )
    subprocess.run([sys.executable, "-c", script, str(n)], check=True)
    _log(f"end {n}")
    return n * 10


shell_wf = Workflow("sigint-shell")


@shell_wf.step(name="tick", entry=True)
def shell(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    n = state.get("n", 0) + 1
    return {"n": n, "seen": [*state.get("seen", []), ctx.call(child_process, n)]}, _next(n)


def lookup(city: str) -> str:
    """The weather in a city."""
    _through_gate(f"lookup {city}")
    return f"sunny in {city}"


def make_agent(base_url: str) -> Agent:
    """The agent, its model the OpenAI adapter against the test's provider at ``base_url``."""
    model = OpenAI(
        "gpt-4o-2024-08-06", base_url=base_url, api_key="test", price=Price(input=1, output=2)
    )
    return Agent("sigint-agent", model, tools=[lookup])


agent = make_agent(os.environ.get("SIGINT_MODEL_URL", "http://127.0.0.1:9/v1"))

TARGETS: dict[str, Any] = {
    "sync_wf": sync_wf,
    "async_wf": async_wf,
    "pairs_wf": pairs_wf,
    "shell_wf": shell_wf,
    "agent": agent,
}
INPUTS: dict[str, dict[str, Any]] = {"agent": {"input": "Weather in Oslo?"}}


def _report(word: str, result: RunResult) -> None:
    print(word, result.run_id, result.step, result.status.value, flush=True)


def _drive(name: str, store: str, how: str) -> RunResult:
    target, given = TARGETS[name], INPUTS.get(name, {})
    if how == "arun":
        return asyncio.run(savegame.arun(target, given, store=store))
    if how == "thread":
        box: dict[str, RunResult] = {}
        ended = threading.Event()

        def drive() -> None:
            box["result"] = savegame.run(target, given, store=store)
            ended.set()

        threading.Thread(target=drive).start()
        # An Event, not join(): a join the KeyboardInterrupt cuts short returns at once
        # from then on (before Python 3.12), the thread still running.
        try:
            ended.wait()
        except KeyboardInterrupt:
            print("MAIN INTERRUPTED", flush=True)
            ended.wait()
        return box["result"]
    if how == "handler":
        got: list[int] = []

        def mine(signum: int, frame: FrameType | None) -> None:
            got.append(signum)

        signal.signal(signal.SIGINT, mine)
        result = savegame.run(target, given, store=store)
        print("HANDLER", len(got), signal.getsignal(signal.SIGINT) is mine, flush=True)
        return result
    return savegame.run(target, given, store=store)


def main(name: str, store: str, how: str) -> None:
    try:
        result = _drive(name, store, how)
    except KeyboardInterrupt as exc:
        stopped = getattr(exc, "result", None)
        if isinstance(stopped, RunResult):
            _report("INTERRUPTED", stopped)
        else:
            print("INTERRUPTED", flush=True)
        print("MESSAGE", exc, flush=True)
        raise  # uncaught, as a program would leave it: the process ends by SIGINT
    _report("RESULT", result)


if __name__ == "__main__":
    main(*sys.argv[1:4])
