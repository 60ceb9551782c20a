"""The store a command uses is never a surprise: a store that is not there is said so, and
only the commands that start a run create one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests import services
from tests.cli.test_errors import assert_one_error_line

RUN = "01NOSUCHRUN"

#: Every command that reads or changes what is in a store (all but run, submit, import,
#: schedule add, queues declare, worker, demo, ui).
READERS = {
    "runs": ["runs"],
    "history": ["history", RUN],
    "show": ["show", RUN],
    "effects": ["effects", RUN],
    "approvals": ["approvals"],
    "stats": ["stats"],
    "verify": ["verify"],
    "prune": ["prune", "--keep-last", "1"],
    "prune-dry-run": ["prune", "--ttl", "7d", "--dry-run"],
    "rekey": ["rekey"],
    "resume": ["resume", RUN],
    "approve": ["approve", RUN],
    "reject": ["reject", RUN, "--reason", "no"],
    "resolve": ["resolve", RUN, "--effect", "e", "--not-done"],
    "cancel": ["cancel", RUN],
    "compensate": ["compensate", RUN],
    "tree": ["tree", RUN],
    "diff": ["diff", RUN, "01OTHER"],
    "fork": ["fork", RUN, "--yes"],
    "export": ["export", RUN, "--output", "out.sgx"],
    "models": ["models", RUN],
    "send": ["send", RUN, "topic", "1"],
    "answer": ["answer", RUN, "--value", "1"],
    "queues": ["queues"],
    "schedule-list": ["schedule", "list"],
    "schedule-pause": ["schedule", "pause", "nightly"],
}


@pytest.mark.parametrize("args", list(READERS.values()), ids=list(READERS))
def test_a_command_on_a_store_that_does_not_exist_says_so_and_creates_nothing(
    cli: Any, tmp_path: Path, args: list[str]
) -> None:
    missing = tmp_path / "typo" / "savegame.db"
    url = f"sqlite:///{missing}"
    out = cli(*args, "--store", url)
    assert_one_error_line(out, f"no store at {url}", f"the file {missing} does not exist")
    assert out.exit_code == 3
    assert out.stdout == ""
    assert not missing.parent.exists()  # no file, no folder


def test_the_default_store_is_not_created_by_looking(tmp_path: Path, proc: Any) -> None:
    out = proc("runs", cwd=tmp_path)
    assert out.returncode == 3
    assert out.stderr == (
        f"error: no store at sqlite:///savegame.db: the file {tmp_path / 'savegame.db'} "
        "does not exist (only starting a run creates a store)\n"
    )
    assert list(tmp_path.iterdir()) == []  # not an empty savegame.db printing "no runs"
    out = proc("runs", "--json", cwd=tmp_path)
    assert (out.returncode, out.stdout) == (3, "")
    assert '"code":3' in out.stderr and '"type":"StoreNotFoundError"' in out.stderr


def test_run_creates_the_store_and_then_the_readers_see_it(
    cli: Any, ref: str, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'new' / 'runs.db'}"
    assert cli("run", ref, "--run-id", "r1", "--store", url).exit_code == 0
    assert [r["run_id"] for r in cli("runs", "--store", url, "--json").json()] == ["r1"]


def test_a_run_that_is_not_there_names_the_store_searched(cli: Any, store: str) -> None:
    out = cli("show", "nope", "--store", store)
    assert out.stderr == f"error: no run or checkpoint 'nope' in {store}\n"
    assert out.exit_code == 3
    out = cli("effects", "nope", "--store", store)
    assert_one_error_line(out, f"no run 'nope' in {store}")


def test_a_password_in_the_store_url_is_never_printed(cli: Any) -> None:
    # Nothing listens on port 1: the open fails, and so would a search; either way the
    # store is named, without its password.
    out = cli("show", "nope", "--store", "postgresql://app:s3cret@127.0.0.1:1/prod")
    assert "s3cret" not in out.stdout + out.stderr
    assert_one_error_line(out, "postgresql://app@127.0.0.1:1/prod")


def test_a_postgres_store_is_named_without_its_password(cli: Any) -> None:
    with services.postgres_schema() as schema:
        url = services.postgres_url(schema)
        scheme, _, rest = url.partition("://")
        user, _, host = rest.partition("@")
        with_password = f"{scheme}://{user}:s3cret@{host}"
        out = cli("show", "nope", "--store", with_password)
    assert "s3cret" not in out.stdout + out.stderr
    assert out.stderr == f"error: no run or checkpoint 'nope' in {url}\n"
    assert out.exit_code == 3
