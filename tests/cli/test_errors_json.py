"""With --json an error is one JSON object on stderr (stdout keeps only results); usage
mistakes exit 2 whichever part of the CLI finds them, as the CLI reference (docs/reference/cli.md) says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.cli.test_errors import assert_one_error_line


def json_error(out: Any) -> dict[str, Any]:
    assert out.stdout == ""  # a program reading stdout never takes an error for data
    lines = out.stderr.splitlines()
    assert len(lines) == 1, out.stderr
    error: dict[str, Any] = orjson.loads(lines[0])
    assert error["code"] == out.exit_code
    return error


def test_a_not_found_error_as_json(cli: Any, store: str) -> None:
    out = cli("show", "nope", "--store", store, "--json")
    assert json_error(out) == {
        "error": f"no run or checkpoint 'nope' in {store}",
        "code": 3,
        "type": "NotFoundError",
    }


def test_a_step_error_of_run_as_json(cli: Any, ref: str, store: str, workflow_file: Path) -> None:
    (workflow_file.parent / "FAIL").touch()
    out = cli("run", ref, "--run-id", "r1", "--store", store, "--json")
    assert json_error(out) == {
        "error": "run r1: step 'tick' raised RuntimeError: the flaky API said no",
        "code": 1,
        "type": "StepError",
    }


@pytest.mark.parametrize(
    ("args", "fragment", "kind"),
    [
        (["runs", "--status", "bogus"], "unknown status 'bogus'", "UsageError"),
        (["runs", "--limit", "0"], "Invalid value for '--limit'", "BadParameter"),
        (["runs", "--no-such-flag"], "No such option: --no-such-flag", "NoSuchOption"),
        (["runs", "--store", "ftp://x"], "unknown store URL 'ftp://x'", "ConfigurationError"),
    ],
    ids=["cli", "parser", "unknown-option", "setup"],
)
def test_usage_errors_as_json_whoever_finds_them(
    cli: Any, store: str, args: list[str], fragment: str, kind: str
) -> None:
    out = cli(*args, "--json", *([] if "--store" in args else ["--store", store]))
    assert out.exit_code == 2
    error = json_error(out)
    assert fragment in error["error"] and error["type"] == kind


USAGE = {
    "bad-input-json": ["run", "REF", "--input", '{"n": '],
    "bogus-status": ["runs", "--status", "bogus"],
    "bad-ttl": ["prune", "--ttl", "5x"],
    "unknown-scheme": ["runs", "--store", "ftp://x"],
    "prune-nothing-to-do": ["prune"],
}


@pytest.mark.parametrize("args", list(USAGE.values()), ids=list(USAGE))
@pytest.mark.parametrize("as_json", [False, True], ids=["text", "json"])
def test_usage_errors_exit_2(
    cli: Any, ref: str, store: str, args: list[str], as_json: bool
) -> None:
    args = [ref if a == "REF" else a for a in args]
    tail = [] if "--store" in args else ["--store", store]
    out = cli(*args, *tail, *(["--json"] if as_json else []))
    assert out.exit_code == 2, out.stderr
    if as_json:
        json_error(out)
    else:
        assert_one_error_line(out)


def test_without_json_errors_stay_one_plain_line(cli: Any, store: str) -> None:
    out = cli("show", "nope", "--store", store)
    assert out.stderr == f"error: no run or checkpoint 'nope' in {store}\n"


def test_a_json_value_is_not_taken_for_the_flag(cli: Any, store: str) -> None:
    # "--json" after "--" is an argument, not the flag.
    out = cli("show", "--store", store, "--", "--json")
    assert out.stderr.startswith("error: no run or checkpoint '--json'")
