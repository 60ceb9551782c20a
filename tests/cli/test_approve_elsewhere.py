"""approve / reject from a process that may not have the workflow's code: the decision is
recorded, the run continues where the code is (here, a worker, a later resume). Real
`python -m savegame` processes on a real SQLite file; the approvals guide's commands as written."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import orjson
import pytest

from .conftest import SHOP, clean_env

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "effects.md"

MAILER = textwrap.dedent(
    """

    def mail_down():
        return os.path.exists(os.path.join(HERE, "MAIL_DOWN"))


    mailing = Workflow("mailing")


    @mailing.step(entry=True)
    def refund_and_mail(state, ctx):
        receipt = ctx.call(refund, order_id=state["order_id"], amount=state["amount"])
        if mail_down():
            raise RuntimeError("the mailer is down")
        return {"receipt": receipt, "mailed": True}, END
    """
)


class Service:
    """The agent's code lives in ``code/shopmod.py``; only processes started with
    ``has_code`` can import it (module reference ``shopmod:refunds``)."""

    def __init__(self, root: Path) -> None:
        self.code = root / "code"
        self.code.mkdir()
        (self.code / "shopmod.py").write_text(SHOP + MAILER)
        self.elsewhere = root / "elsewhere"
        self.elsewhere.mkdir()
        self.store = f"sqlite:///{root / 'runs.db'}"

    def sg(self, *args: str, has_code: bool = True) -> subprocess.CompletedProcess[str]:
        env = clean_env()
        if has_code:
            env["PYTHONPATH"] = os.pathsep.join([str(self.code), env["PYTHONPATH"]])
        return subprocess.run(
            [sys.executable, "-m", "savegame", *args, "--store", self.store],
            cwd=self.elsewhere,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )

    def start(self, flow: str, run_id: str, **state: Any) -> None:
        out = self.sg(
            "run", f"shopmod:{flow}", "--run-id", run_id, "--input", orjson.dumps(state).decode()
        )
        assert out.returncode == 0, out.stderr
        assert "paused: interrupted" in out.stdout, out.stdout

    def status(self, run_id: str) -> str:
        out = self.sg("runs", "--json", has_code=False)
        return next(r["status"] for r in orjson.loads(out.stdout) if r["run_id"] == run_id)

    def ledger(self) -> list[str]:
        path = self.code / "ledger.txt"
        return path.read_text().splitlines() if path.exists() else []


@pytest.fixture
def service(tmp_path: Path) -> Service:
    return Service(tmp_path)


def test_approving_where_the_code_is_not_records_it_and_a_worker_continues(
    service: Service,
) -> None:
    service.start("refunds", "r1", order_id="A", amount=500)

    out = service.sg("approve", "r1", "--by", "alice", has_code=False)
    assert out.returncode == 0, out.stderr
    assert out.stderr == (
        "warning: approved, but run r1 was not continued here: its workflow does not load "
        "here: cannot import 'shopmod' for workflow 'shopmod:refunds': No module named 'shopmod'\n"
    )
    assert out.stdout == (
        "approved refund (r1:1:0:approval) by alice\n"
        f"next: savegame resume r1 --store {service.store}  "
        "(a worker (savegame worker) or `savegame resume` continues it)\n"
    )
    assert service.ledger() == []
    assert service.status("r1") == "queued"
    journal = orjson.loads(service.sg("effects", "r1", "--json", has_code=False).stdout)
    assert [(e["kind"], e["status"], e["metadata"]["by"]) for e in journal] == [
        ("approval", "done", "alice")
    ]

    worker = service.sg("worker", "--exit-when-idle", "0.5")
    assert worker.returncode == 0, worker.stderr
    assert service.status("r1") == "completed"
    assert service.ledger() == ["refund A 500"]


def test_approve_json_where_the_code_is_not(service: Service) -> None:
    service.start("refunds", "r1", order_id="A", amount=500)
    out = service.sg("reject", "r1", "--reason", "too much", "--json", has_code=False)
    assert out.returncode == 0, out.stderr
    assert out.stderr.startswith("warning: rejected, but run r1 was not continued here: ")
    shown = orjson.loads(out.stdout)
    assert {k: shown[k] for k in ("run_id", "decision", "continued", "queued")} == {
        "run_id": "r1",
        "decision": "rejected",
        "continued": False,
        "queued": True,
    }
    resumed = service.sg("resume", "r1", "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert orjson.loads(resumed.stdout)["state"]["rejected"] == "too much"
    assert service.ledger() == []


def test_a_decision_whose_continuation_fails_exits_0_and_names_the_failure(
    service: Service,
) -> None:
    service.start("mailing", "m1", order_id="B", amount=300)
    (service.code / "MAIL_DOWN").touch()
    out = service.sg("approve", "m1")
    assert out.returncode == 0, out.stderr
    assert out.stderr == (
        "warning: approved, but run m1 was not continued here: run m1: step "
        "'refund_and_mail' raised RuntimeError: the mailer is down\n"
    )
    assert f"next: savegame resume m1 --store {service.store}" in out.stdout
    assert service.status("m1") == "failed"
    (service.code / "MAIL_DOWN").unlink()
    resumed = service.sg("resume", "m1")
    assert resumed.returncode == 0, resumed.stderr
    assert service.ledger() == ["refund B 300"]  # the approved refund happened once


def guide_block() -> list[str]:
    """The commands in the guide's approvals section (docs/guides/effects.md), as written."""
    text = GUIDE.read_text()
    block = text[text.index("## Ask a person first: approvals") :]
    block = block[block.index("```bash") + len("```bash") : block.index("```\n\n")]
    return [line.split("  #")[0].strip() for line in block.strip().splitlines()]


def test_the_guide_approval_commands_work_as_written(service: Service) -> None:
    commands = guide_block()
    assert commands == [
        "savegame approvals",
        """savegame approve RUN [--interrupt ID] [--edit '{"order_id": "A-1", "amount": 90}']""",
        'savegame reject RUN --reason "over the limit"',
        """savegame resume RUN --value '"gold"'""",
        "savegame approve RUN --no-resume",
        "savegame resume RUN",
    ]
    service.start("refunds", "edit", order_id="A-1", amount=500)
    service.start("refunds", "no", order_id="A-2", amount=500)
    service.start("ask", "plan")
    service.start("refunds", "later", order_id="A-3", amount=500)

    def run(line: str, run_id: str = "", *keep: str) -> subprocess.CompletedProcess[str]:
        """The guide's line for ``run_id``: its optional parts left out, or kept as written."""

        def optional(part: re.Match[str]) -> str:
            return " " + part[1] if part[1].split()[0] in keep else ""

        line = re.sub(r"\s*\[([^]]*)\]", optional, line.replace("RUN", run_id))
        args = shlex.split(line)
        assert args[0] == "savegame"
        out = service.sg(*args[1:])
        assert out.returncode == 0, f"{line}: {out.stderr}"
        assert out.stderr == "", line
        return out

    listed = run(commands[0])
    assert all(f" {r} " in listed.stdout for r in ("edit", "no", "plan", "later")), listed.stdout
    approved = run(commands[1], "edit", "--edit")
    assert "run edit resumed and ended: completed" in approved.stdout
    rejected = run(commands[2], "no")
    assert "run no resumed and ended: completed" in rejected.stdout
    answered = run(commands[3], "plan")
    assert "run plan resumed and ended: completed" in answered.stdout
    recorded = run(commands[4], "later")
    assert "run later not continued here: not asked to (resume=False)" in recorded.stdout
    assert service.ledger() == ["refund A-1 90"]
    continued = run(commands[5], "later")
    assert "run later resumed and ended: completed" in continued.stdout
    assert service.ledger() == ["refund A-1 90", "refund A-3 500"]
