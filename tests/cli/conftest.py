"""Fixtures for the CLI tests: a workflow file, a real SQLite store, and a runner."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from typer.testing import CliRunner

import savegame
from savegame.cli import app

SRC = str(Path(savegame.__file__).resolve().parents[1])

WORKFLOW = textwrap.dedent(
    """
    import datetime
    import os

    from savegame import END, Workflow

    FLAG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "FAIL")

    wf = Workflow("counter")


    @wf.step(entry=True)
    def tick(state, ctx):
        n = state.get("n", 0) + 1
        if n == 2 and os.path.exists(FLAG):
            raise RuntimeError("the flaky API said no")
        update = {"n": n, "seen": (*state.get("seen", ()), n), "day": datetime.date(2024, 1, n)}
        return update, ("tick" if n < state.get("until", 3) else END)


    not_a_workflow = 42
    """
)


SHOP = textwrap.dedent(
    """
    import os
    import signal

    from savegame import END, Workflow, tool
    from savegame.errors import ApprovalRejected

    HERE = os.path.dirname(os.path.abspath(__file__))


    def world(line):
        # The outside world: what really happened, whatever the journal says.
        with open(os.path.join(HERE, "ledger.txt"), "a") as fh:
            fh.write(line + "\\n")


    @tool(effect="write")
    def charge(amount):
        world(f"charge {amount}")
        if os.path.exists(os.path.join(HERE, "CRASH")):
            os.kill(os.getpid(), signal.SIGKILL)  # dies after charging, before the result is recorded
        return {"charge_id": "ch_1", "amount": amount}


    @tool(effect="write", idempotent=True, compensate="unrefund", approval=lambda a: a["amount"] > 100)
    def refund(order_id, amount, *, request_id):
        world(f"refund {order_id} {amount}")
        return {"order_id": order_id, "amount": amount}


    @tool(effect="write", idempotent=True)
    def unrefund(order_id, *, result, request_id):
        world(f"unrefund {order_id} {result['amount']}")
        return "cancelled"


    pay = Workflow("pay")


    @pay.step(entry=True)
    def pay_step(state, ctx):
        return {"receipt": ctx.call(charge, state["amount"])}, END


    refunds = Workflow("refunds")


    @refunds.step(entry=True)
    def refund_step(state, ctx):
        try:
            receipt = ctx.call(refund, order_id=state["order_id"], amount=state["amount"])
        except ApprovalRejected as rejected:
            return {"receipt": None, "rejected": rejected.reason, "by": rejected.by}, END
        return {"receipt": receipt}, END


    ask = Workflow("ask")


    @ask.step(entry=True)
    def ask_step(state, ctx):
        return {"plan": ctx.interrupt({"question": "Which plan?"}, name="plan")}, END
    """
)


@dataclass
class Result:
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return orjson.loads(self.stdout)


@pytest.fixture(autouse=True)
def _isolated_imports() -> Iterator[None]:
    # Loading path/file.py workflows adds to sys.path and sys.modules; keep tests independent.
    path, modules = list(sys.path), set(sys.modules)
    yield
    sys.path[:] = path
    for name in set(sys.modules) - modules:
        if name.startswith("savegame_user_"):
            del sys.modules[name]


@pytest.fixture(autouse=True)
def _no_env_store(monkeypatch: pytest.MonkeyPatch) -> None:
    # SAVEGAME_STORE, _DEBUG, _KEYS ...: a test sets what it needs.
    for name in [k for k in os.environ if k.startswith("SAVEGAME_")]:
        monkeypatch.delenv(name)


@pytest.fixture
def workflow_file(tmp_path: Path) -> Path:
    path = tmp_path / "counter_flow.py"
    path.write_text(WORKFLOW)
    return path


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    """A module of write tools and workflows; its ``ledger.txt`` is the outside world."""
    path = tmp_path / "shop_flow.py"
    path.write_text(SHOP)
    return path


@pytest.fixture
def ref(workflow_file: Path) -> str:
    return f"{workflow_file}:wf"


@pytest.fixture
def store(tmp_path: Path) -> str:
    """An empty SQLite store that exists: only run and submit create a missing one."""
    url = f"sqlite:///{tmp_path / 'savegame.db'}"
    savegame.open_store(url).close()
    return url


@pytest.fixture
def cli() -> Any:
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        out = runner.invoke(app, list(args), catch_exceptions=False)
        return Result(out.exit_code, out.stdout, out.stderr)

    return invoke


def clean_env() -> dict[str, str]:
    """The environment for a real ``python -m savegame``: no SAVEGAME_* settings, our sources first."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAVEGAME_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (SRC, env.get("PYTHONPATH")) if p)
    return env


def python_output(code: str, *args: str, **env: str) -> str:
    """What ``python -c CODE ARGS`` prints in a fresh interpreter (with :func:`clean_env`
    and ``env``); it must exit 0."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        env={**clean_env(), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


#: Typer's own drawing of the root help, with every command loaded (so the one-line help
#: in ``COMMANDS`` is checked against the docstrings too): what ``cli.root_help`` must equal.
TYPER_ROOT_HELP = (
    "import typer\n"
    "from typer import rich_utils\n"
    "from savegame.cli import app\n"
    "group = typer.main.get_command(app)\n"
    "ctx = typer.Context(group, info_name='savegame')\n"
    "for name in list(group.commands):\n"
    "    group.get_command(ctx, name)\n"
    "rich_utils.rich_format_help(obj=group, ctx=ctx, markup_mode='rich')\n"
    "print()\n"  # click's echo of the (empty) formatter after format_help
)


def savegame_cli(
    *args: str, cwd: Path, stdin: int | None = subprocess.DEVNULL
) -> subprocess.CompletedProcess[str]:
    """``python -m savegame ARGS`` in a real process, without the caller's SAVEGAME_* settings."""
    return subprocess.run(
        [sys.executable, "-m", "savegame", *args],
        cwd=cwd,
        env=clean_env(),
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def proc() -> Any:
    return savegame_cli
