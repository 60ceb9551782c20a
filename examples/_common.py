"""What the examples share: the model and store options, and how a run's end is printed.

Every example talks to an OpenAI-compatible server through ``savegame.models.OpenAI``:
OpenAI itself with ``OPENAI_API_KEY`` set, or any local server (Ollama, vLLM,
llama.cpp's server) by ``--base-url``. The tests point them at ``tests/provider.py``.
"""

from __future__ import annotations

import argparse
import json
import os

from savegame import RunResult, RunStatus
from savegame.client import pending_interrupts
from savegame.models import OpenAI


def parser(description: str) -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(description=description)
    parse.add_argument(
        "--base-url",
        default=os.environ.get("OPENAI_BASE_URL"),
        help="an OpenAI-compatible server, e.g. http://localhost:11434/v1 (default: OpenAI)",
    )
    parse.add_argument(
        "--model",
        default=os.environ.get("SAVEGAME_EXAMPLE_MODEL", "gpt-4o-mini"),
        help="the model's name at that server",
    )
    parse.add_argument(
        "--store",
        default=os.environ.get("SAVEGAME_STORE", "sqlite:///examples.db"),
        help="where runs are kept",
    )
    return parse


def model(args: argparse.Namespace) -> OpenAI:
    # A local server takes any key; OpenAI's own needs OPENAI_API_KEY.
    key = os.environ.get("OPENAI_API_KEY") or ("local" if args.base_url else None)
    return OpenAI(args.model, base_url=args.base_url, api_key=key, temperature=0)


def report(result: RunResult, store: str, script: str) -> None:
    """The answer, or what the run waits for and the command that continues it."""
    if result.status is RunStatus.INTERRUPTED:
        for waiting in pending_interrupts(result.run_id, store=store):
            print(
                f"waiting for approval: {waiting.name} {json.dumps(waiting.payload, sort_keys=True)}"
            )
        print(f"run: {result.run_id}")
        print(f"approve: python {script} approve {result.run_id}")
        print(f"reject:  python {script} reject {result.run_id} --reason '...'")
        return
    print(f"run: {result.run_id} ({result.status.value})")
    print(f"answer: {result.state.get('answer')}")
