"""Failures are one `error:` line on stderr and a non-zero exit; tracebacks only with --debug."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from savegame.cli.errors import CliError, exit_code, one_line
from savegame.errors import ConfigurationError, EffectSettledError
from tests.cli.conftest import savegame_cli


def assert_one_error_line(out: Any, *fragments: str) -> None:
    assert out.exit_code != 0
    assert "Traceback" not in out.stderr + out.stdout
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("error: ")
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--input", '{"until": 3'], ["--input is not valid JSON"]),
        (["--input", "[1, 2]"], ["--input must be a JSON object", "list"]),
    ],
    ids=["malformed", "not-an-object"],
)
def test_bad_input_json(
    cli: Any, ref: str, store: str, args: list[str], fragments: list[str]
) -> None:
    out = cli("run", ref, *args, "--store", store)
    assert_one_error_line(out, *fragments)
    assert out.exit_code == 2  # a usage error, like the parser's own
    assert cli("runs", "--store", store, "--json").json() == []


@pytest.mark.parametrize(
    ("make_ref", "fragment"),
    [
        (lambda path: f"{path.parent / 'missing.py'}:wf", "no file"),
        (lambda path: f"{path}:nowhere", "has no attribute 'nowhere'; its workflows: wf ("),
        (lambda path: f"{path}:fw", "has no attribute 'fw'; did you mean 'wf'?"),
        (lambda path: "json:dumsp", "'json' has no attribute 'dumsp'; did you mean 'dump'?"),
        (lambda path: f"{path}:not_a_workflow", "not a savegame Workflow or Agent"),
        (lambda path: "no_such_module_xyz:wf", "cannot import 'no_such_module_xyz'"),
        (lambda path: "json:dumps", "json:dumps is function"),
        (lambda path: "just-a-name", "must look like module:attr"),
    ],
    ids=[
        "missing-file",
        "missing-attr",
        "misspelt-attr",
        "misspelt-module-attr",
        "not-a-workflow",
        "missing-module",
        "function",
        "no-colon",
    ],
)
def test_bad_workflow_reference(
    cli: Any, workflow_file: Any, store: str, make_ref: Any, fragment: str
) -> None:
    out = cli("run", make_ref(workflow_file), "--store", store)
    assert_one_error_line(out, fragment)


def test_a_misspelt_next_step_is_refused_before_anything_runs(
    cli: Any, tmp_path: Path, store: str
) -> None:
    flow = tmp_path / "typo_flow.py"
    flow.write_text(
        "from savegame import END, Workflow\n"
        "wf = Workflow('typo')\n"
        "@wf.step(entry=True)\n"
        "def charge(state, ctx):\n"
        "    return {}, 'notfy'\n"
        "@wf.step\n"
        "def notify(state, ctx):\n"
        "    return {}, END\n"
    )
    out = cli("run", f"{flow}:wf", "--store", store)
    assert out.stderr == (
        "error: workflow 'typo' has no step 'notfy': step 'charge' returns it as its next "
        "step; did you mean 'notify'? (steps: charge, notify)\n"
    )
    assert (out.exit_code, out.stdout) == (2, "")
    assert cli("runs", "--store", store, "--json").json() == []


@pytest.mark.parametrize(
    "command",
    [["show", "01NOSUCHRUN"], ["history", "01NOSUCHRUN"], ["resume", "01NOSUCHRUN"]],
    ids=["show", "history", "resume"],
)
def test_unknown_run_id(cli: Any, store: str, command: list[str]) -> None:
    out = cli(*command, "--store", store)
    assert_one_error_line(out, "01NOSUCHRUN", f"in {store}")
    assert out.exit_code == 3


def test_resume_of_a_completed_run_is_refused(cli: Any, ref: str, store: str) -> None:
    assert cli("run", ref, "--run-id", "done-1", "--store", store).exit_code == 0
    out = cli("resume", "done-1", "--store", store)
    assert_one_error_line(out)
    assert out.stderr == "error: cannot resume run done-1: it is completed\n"
    assert out.exit_code == 4


def test_bad_store_url_and_status(cli: Any, store: str) -> None:
    assert_one_error_line(cli("runs", "--store", "ftp://x"), "unknown store URL 'ftp://x'")
    assert_one_error_line(
        cli("runs", "--status", "sleeping", "--store", store), "unknown status 'sleeping'"
    )


def test_mistakes_on_the_command_line_exit_2_whoever_finds_them(cli: Any, store: str) -> None:
    """The parser, the CLI (UsageError) and the runtime (ConfigurationError) agree: exit 2."""
    assert cli("runs", "--limit", "0", "--store", store).exit_code == 2
    assert cli("runs", "--status", "sleeping", "--store", store).exit_code == 2
    assert cli("runs", "--store", "ftp://x").exit_code == 2
    assert exit_code(ConfigurationError("workflow has no entry step")) == 2
    assert exit_code(CliError("run r1 is still running after 30s")) == 1  # not a usage error


def test_debug_shows_the_traceback(cli: Any, store: str) -> None:
    out = cli("--debug", "show", "01NOSUCHRUN", "--store", store)
    assert out.exit_code == 3
    assert out.stderr.startswith("Traceback (most recent call last):")
    assert "savegame.errors.NotFoundError" in out.stderr
    assert out.stderr.splitlines()[-1] == f"error: no run or checkpoint '01NOSUCHRUN' in {store}"


def test_a_crash_while_importing_the_workflow_is_one_line(
    cli: Any, tmp_path: Any, store: str
) -> None:
    broken = tmp_path / "broken_flow.py"
    broken.write_text("import definitely_not_installed_pkg\n")
    out = cli("run", f"{broken}:wf", "--store", store)
    assert_one_error_line(
        out, f"cannot import '{broken}'", "No module named 'definitely_not_installed_pkg'"
    )
    assert out.exit_code == 2  # the workflow's code does not import here: fix the setup
    broken.write_text("raise KeyError('OPENAI_API_KEY')\n")  # whatever its code raises
    out = cli("run", f"{broken}:wf", "--store", store)
    assert_one_error_line(out, f"cannot import '{broken}'", "KeyError: 'OPENAI_API_KEY'")
    assert out.exit_code == 2


def test_the_demo_refuses_a_store_other_processes_cannot_see(cli: Any) -> None:
    out = cli("demo", "--store", "memory://")
    assert_one_error_line(out, "cannot be shared between processes")


def test_debug_can_come_from_the_environment(
    cli: Any, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAVEGAME_DEBUG", "1")
    out = cli("history", "01NOSUCHRUN", "--store", store)
    assert out.exit_code == 3
    assert "Traceback (most recent call last):" in out.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["effects", "01NOSUCHRUN"],
        ["approve", "01NOSUCHRUN"],
        ["reject", "01NOSUCHRUN", "--reason", "no"],
        ["cancel", "01NOSUCHRUN"],
        ["compensate", "01NOSUCHRUN"],
        ["resolve", "01NOSUCHRUN", "--effect", "x", "--done", "--result", "1"],
    ],
    ids=["effects", "approve", "reject", "cancel", "compensate", "resolve"],
)
def test_unknown_run_id_in_control_commands(cli: Any, store: str, command: list[str]) -> None:
    out = cli(*command, "--store", store)
    assert_one_error_line(out, "01NOSUCHRUN", f"in {store}")
    assert out.exit_code == 3


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["approve", "r1", "--edit", "{amount: 1}"], ["--edit is not valid JSON"]),
        (
            ["approve", "r1", "--edit", "[1, 2]"],
            ["--edit must be a JSON object of tool arguments", "list"],
        ),
        (["resume", "r1", "--value", "yes please"], ["--value is not valid JSON"]),
        (["resume", "r1", "--interrupt", "r1:1:0:approval"], ["give --value too"]),
        (
            ["resolve", "r1", "--effect", "r1:1:0", "--done", "--result", "{"],
            ["--result is not valid JSON"],
        ),
        (["resolve", "r1", "--effect", "r1:1:0"], ["--done or --not-done"]),
        (
            ["resolve", "r1", "--effect", "r1:1:0", "--not-done", "--result", "1"],
            ["--result goes with --done"],
        ),
    ],
    ids=[
        "edit-malformed",
        "edit-not-object",
        "value",
        "interrupt-alone",
        "result",
        "no-verdict",
        "result-not-done",
    ],
)
def test_bad_control_arguments(
    cli: Any, shop: Any, store: str, args: list[str], fragments: list[str]
) -> None:
    paused = cli(
        "run",
        f"{shop}:refunds",
        "--run-id",
        "r1",
        "--input",
        '{"order_id": "A", "amount": 500}',
        "--store",
        store,
    )
    assert paused.exit_code == 0, paused.stderr
    out = cli(*args, "--store", store)
    assert_one_error_line(out, *fragments)
    assert out.exit_code == 2
    # Nothing was decided: the approval still waits.
    assert [p["interrupt_id"] for p in cli("approvals", "--store", store, "--json").json()] == [
        "r1:1:0:approval"
    ]


def test_nothing_pending(cli: Any, shop: Any, store: str) -> None:
    done = cli(
        "run",
        f"{shop}:refunds",
        "--run-id",
        "s1",
        "--input",
        '{"order_id": "B", "amount": 5}',
        "--store",
        store,
    )
    assert done.exit_code == 0, done.stderr
    out = cli("approve", "s1", "--store", store)
    assert_one_error_line(out)
    assert out.stderr == "error: cannot find a pending approval for run s1: it is completed\n"
    assert out.exit_code == 4
    out = cli("reject", "s1", "--reason", "late", "--store", store)
    assert (out.exit_code, out.stderr) == (
        4,
        "error: cannot find a pending approval for run s1: it is completed\n",
    )
    out = cli("resume", "s1", "--value", "1", "--store", store)
    assert (out.exit_code, out.stderr) == (
        4,
        "error: cannot find a pending interrupt for run s1: it is completed\n",
    )
    out = cli("resolve", "s1", "--effect", "s1:1:0", "--not-done", "--store", store)
    assert_one_error_line(out, "cannot resolve s1:1:0 of run s1: it is write entry done")
    assert out.exit_code == 4
    out = cli("resolve", "s1", "--effect", "s1:9:9", "--done", "--result", "1", "--store", store)
    assert_one_error_line(out, "s1:9:9")
    assert out.exit_code == 3
    out = cli("approve", "s1", "--interrupt", "nope", "--store", store)
    assert (out.exit_code, out.stderr) == (
        3,
        f"error: no pending interrupt 'nope in run s1' in {store}\n",
    )


def test_a_gate_decided_by_someone_else_first_is_a_run_state_exit() -> None:
    """The loser of an approve/reject race is told, as for a run that waits for nothing."""
    exc = EffectSettledError("r1", "r1:1:0:approval", "done", "pending")
    assert exit_code(exc) == 4
    assert one_line(exc) == (
        "journal entry r1:1:0:approval of run r1 is already done, not pending:"
        " it was settled by someone else first"
    )


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["run", "--run-id", "a\nb"], r"run_id 'a\nb' has whitespace (U+000A) at position 1"),
        (["run", "--run-id", ""], "run_id must not be empty"),
        (["run", "--thread", "x" * 300], "thread_id is 300 characters long; at most 200"),
        (["submit", "--thread", "t\tab"], r"thread_id 't\tab' has whitespace (U+0009)"),
        (["submit", "--run-id", "r\x1b[2J"], "has a control character (U+001B)"),
    ],
    ids=["run-newline", "run-empty", "run-too-long", "submit-tab", "submit-escape"],
)
def test_ids_given_on_the_command_line_are_checked(
    cli: Any, ref: str, store: str, args: list[str], fragment: str
) -> None:
    command, *options = args
    out = cli(command, ref, *options, "--store", store)
    assert_one_error_line(out, fragment)
    assert out.exit_code == 2
    assert cli("runs", "--store", store, "--json").json() == []


def test_a_run_id_with_a_newline_in_a_real_process(
    tmp_path: Path, workflow_file: Path, proc: Any
) -> None:
    store = f"sqlite:///{tmp_path / 'ids.db'}"
    out = proc("run", "counter_flow.py:wf", "--run-id", "a\nb", "--store", store, cwd=tmp_path)
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == (
        "error: run_id 'a\\nb' has whitespace (U+000A) at position 1: "
        "ids take no whitespace or control characters\n"
    )
    assert proc("runs", "--store", store, "--json", cwd=tmp_path).stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--input", '{"a": {"$sg:tuple": 5}}'], "TypeError: 'int' object is not iterable"),
        (["--input", '{"a": {"$sg:dict": 5}}'], "AttributeError"),
        (["--input", '{"a": {"$sg:datetime": "soon"}}'], "Invalid isoformat string"),
        (["--input", '{"a": {"$sg:zoned": ["2024-01-01T00:00", "Mars/Olympus", 0]}}'], "Mars"),
        (["--input", '{"a": {"$sg:what": 1}}'], "unknown tag $sg:what"),
    ],
    ids=["tuple", "dict", "datetime", "zone", "unknown-tag"],
)
def test_a_tagged_value_that_does_not_decode_is_a_usage_error(
    cli: Any, ref: str, store: str, args: list[str], fragment: str
) -> None:
    out = cli("run", ref, *args, "--store", store)
    assert_one_error_line(out, "--input holds a tagged value that does not decode", fragment)
    assert out.exit_code == 2
    out = cli("resume", "r1", "--value", '{"$sg:set": [[1]]}', "--store", store)
    assert_one_error_line(out, "--value holds a tagged value", "unhashable type: 'list'")
    assert out.exit_code == 2


@pytest.mark.parametrize(
    "args",
    [
        ["runs", "--limit", "99999999999999999999"],
        ["history", "r1", "--limit", "99999999999999999999"],
        ["stats", "--limit", "99999999999999999999"],
        ["worker", "--lease-ttl", "1e308", "--exit-when-idle", "0"],
        ["worker", "--poll", "1e308", "--exit-when-idle", "0"],
    ],
    ids=["runs-limit", "history-limit", "stats-limit", "lease-ttl", "poll"],
)
def test_numbers_past_what_the_store_or_the_clock_can_take_are_refused(
    cli: Any, store: str, args: list[str]
) -> None:
    # These were OverflowErrors: SQLite's integers, or a wait past the platform's time_t.
    out = cli(*args, "--store", store)
    assert out.exit_code == 2, out.stderr
    assert "Overflow" not in out.stderr and "Traceback" not in out.stderr
    said = " ".join(out.stderr.replace("│", " ").split())  # the parser's box wraps its lines
    assert "Input should be less than or equal to" in said


def test_a_worker_with_a_hundred_thousand_slots_is_refused(tmp_path: Path, proc: Any) -> None:
    # One thread and store connection per slot: this hung the process.
    store = f"sqlite:///{tmp_path / 'w.db'}"
    args = ["worker", "--concurrency", "100000", "--exit-when-idle", "0", "--store", store]
    out = proc(*args, cwd=tmp_path)
    assert out.returncode == 2
    said = " ".join(out.stderr.replace("│", " ").split())  # the parser's box wraps its lines
    assert "'--concurrency'" in said and "less than or equal to 256" in said


FLAKY_TOOL = """
import os
from savegame import END, Workflow, tool

COUNT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "count")


@tool(retries=2, backoff=0)
def lookup(key):
    tries = int(open(COUNT).read()) + 1 if os.path.exists(COUNT) else 1
    open(COUNT, "w").write(str(tries))
    if tries < 3:
        raise ConnectionError(f"try {tries}: the API hung up")
    return key.upper()


wf = Workflow("flaky-tool")


@wf.step(entry=True)
def ask(state, ctx):
    return {"got": ctx.call(lookup, "a")}, END
"""


def test_a_retry_is_a_readable_warning_line_not_a_bare_event_name(tmp_path: Path) -> None:
    (tmp_path / "flaky.py").write_text(FLAKY_TOOL)
    store = f"sqlite:///{tmp_path / 'runs.db'}"
    out = savegame_cli("run", "flaky.py:wf", "--store", store, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stderr.splitlines()
    assert "stamina.retry_scheduled" not in out.stderr
    assert lines == [
        "warning: retry 1 in 0.0 s after ConnectionError('try 1: the API hung up')",
        "warning: retry 2 in 0.0 s after ConnectionError('try 2: the API hung up')",
    ]
