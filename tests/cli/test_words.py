"""What the CLI says, word for word: counts with their nouns, hints a shell can run as printed."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import savegame
from tests import services
from tests.cli.conftest import clean_env


def test_one_step_is_one_step(cli: Any, ref: str, store: str) -> None:
    out = cli("run", ref, "--run-id", "one", "--input", '{"until": 1}', "--store", store)
    assert out.exit_code == 0, out.stderr
    assert "run one ended: completed after 1 step\n" in out.stdout
    assert "1 llm call" not in out.stdout  # no usage line: nothing was used


def test_a_printed_hint_runs_as_printed_in_a_shell(shop: Path, tmp_path: Path, proc: Any) -> None:
    """A store URL with ``&`` (two options) is quoted: unquoted, the shell would run the
    command in the background up to the ``&`` and then fail on the rest."""
    with services.postgres_schema() as schema:
        store = services.with_query(services.postgres_url(schema), pool_max="3")
        assert "&" in store
        given = '{"order_id": "A", "amount": 500}'
        out = proc("run", "shop_flow.py:refunds", "--run-id", "r1", "--input", given,
                   "--store", store, cwd=tmp_path)  # fmt: skip
        assert out.returncode == 0, out.stderr
        hints = [line.split(":", 1)[1].strip() for line in out.stdout.splitlines()
                 if line.lstrip().startswith("approve:")]  # fmt: skip
        assert hints == [f"savegame approve r1 --store {shlex.quote(store)} [--edit JSON]"]

        command = hints[0].removesuffix(" [--edit JSON]") + " --by ana"
        python = f"{shlex.quote(sys.executable)} -m savegame"
        pasted = subprocess.run(
            ["bash", "-c", command.replace("savegame", python, 1)],
            cwd=tmp_path,
            env=clean_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert pasted.returncode == 0, pasted.stderr
        approval, refund = savegame.client.list_effects("r1", store=store)
        assert (approval.status.value, approval.metadata["by"]) == ("done", "ana")
        assert refund.result == {"order_id": "A", "amount": 500}
        assert savegame.client.get_run("r1", store=store).status.value == "completed"


def test_quiet_prints_the_run_and_its_status_on_one_line(
    cli: Any, ref: str, shop: Path, store: str, workflow_file: Path
) -> None:
    asked = '{"order_id": "A", "amount": 500}'
    out = cli("run", f"{shop}:refunds", "--run-id", "r1", "-i", asked, "--store", store, "-q")
    assert (out.exit_code, out.stdout, out.stderr) == (0, "r1 interrupted\n", "")
    out = cli("approve", "r1", "--by", "ana", "--store", store, "--quiet")
    assert (out.exit_code, out.stdout, out.stderr) == (0, "r1 completed\n", "")

    out = cli("run", f"{shop}:refunds", "--run-id", "r2", "-i", asked, "--store", store, "-q")
    out = cli("reject", "r2", "--reason", "no", "--no-resume", "--store", store, "--quiet")
    assert (out.exit_code, out.stdout) == (0, "r2 queued\n")

    (workflow_file.parent / "FAIL").touch()
    out = cli("run", ref, "--run-id", "c1", "--store", store, "--quiet")
    assert (out.exit_code, out.stdout) == (1, "")  # the error, as without: on stderr, exit 1
    assert out.stderr == "error: run c1: step 'tick' raised RuntimeError: the flaky API said no\n"
    (workflow_file.parent / "FAIL").unlink()
    out = cli("resume", "c1", "--store", store, "--quiet")
    assert (out.exit_code, out.stdout) == (0, "c1 completed\n")

    first = cli("history", "c1", "--store", store, "--json").json()[-1]["checkpoint_id"]
    out = cli("fork", first, "--store", store, "--quiet")
    forked = savegame.client.list_runs(store=store)[0]
    assert forked.run_id not in ("r1", "r2", "c1")
    assert (out.exit_code, out.stdout) == (0, f"{forked.run_id} completed\n")
    out = cli("fork", first, "--no-run", "--store", store, "-q")
    waiting = savegame.client.list_runs(store=store)[0]
    assert (out.exit_code, out.stdout) == (0, f"{waiting.run_id} {waiting.status.value}\n")


def test_quiet_leaves_json_as_it_is(cli: Any, ref: str, store: str) -> None:
    plain = cli("run", ref, "--run-id", "j1", "--store", store, "--json").json()
    quiet = cli("run", ref, "--run-id", "j2", "--store", store, "--json", "--quiet").json()
    assert quiet.keys() == plain.keys()
    assert (quiet["run_id"], quiet["status"], quiet["state"]) == ("j2", "completed", plain["state"])
