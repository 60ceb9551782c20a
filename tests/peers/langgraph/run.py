"""Run LangGraph's own graph tests with SavegameSaver as their checkpointer.

    python tests/peers/langgraph/run.py [--workdir DIR] [--keep] [-- PYTEST ARGS]

Downloads the sdist of the langgraph release installed here (its ``tests/`` ship in it),
adds SavegameSaver to the suite's two checkpointer fixtures (``savegame_fixtures.py``,
one line appended to its ``tests/conftest.py``), and runs every test file that uses
them, on a SQLite file and on PostgreSQL (``SAVEGAME_TEST_POSTGRES``, a fresh schema
per test); then LangGraph's prune tests, written for PostgresSaver, against
SavegameSaver. Prints the counts per store and exits non-zero if any test failed.

The tests a SavegameSaver cannot pass by design are in :data:`BY_DESIGN`, with the
reason (docs/guides/langgraph.md: "LangGraph's own tests pass"); they are deselected by name and listed,
never skipped silently. The test dependencies are the ``langgraph-suite`` extra.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
STORES = ("savegame_sqlite", "savegame_postgres")
#: Test ids (relative to the sdist) that cannot pass with SavegameSaver, and why.
BY_DESIGN = {
    "tests/test_prune_postgres.py::test_keep_latest_keeps_a_turn_saved_after_it_read_the_heads": (
        "drives a second PostgresSaver and hooks its prune SQL (PRUNE_HEADS_SQL)"
    ),
    "tests/test_prune_postgres.py::test_keep_latest_refuses_a_thread_that_switches_to_a_delta_channel_mid_batch": (
        "drives a second PostgresSaver and hooks its prune SQL (PRUNE_DELTA_THREADS_SQL)"
    ),
    "tests/test_prune_postgres.py::test_keep_latest_keeps_a_delta_channel_turn_saved_after_the_thread_check": (
        "drives a second PostgresSaver and hooks its prune SQL (PRUNE_DELTA_THREADS_SQL)"
    ),
    "tests/test_prune_postgres.py::test_keep_latest_refuses_a_batch_with_a_delta_channel_thread": (
        "PostgresSaver refuses to prune a thread with a DeltaChannel; SavegameSaver prunes "
        "it, keeping the checkpoints the channel's value is rebuilt from"
    ),
    "tests/test_prune_postgres.py::test_akeep_latest_refuses_a_batch_with_a_delta_channel_thread": (
        "PostgresSaver refuses to prune a thread with a DeltaChannel; SavegameSaver prunes "
        "it, keeping the checkpoints the channel's value is rebuilt from"
    ),
}
PRUNE_TESTS = "tests/test_prune_postgres.py"
_FIXTURES = re.compile(r"\b(sync|async)_checkpointer\b")


def sdist(version: str, into: Path) -> Path:
    """The langgraph sdist of ``version`` unpacked in ``into``; its root."""
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
         f"langgraph=={version}", "-d", str(into)],
        check=True,
    )  # fmt: skip
    (archive,) = into.glob(f"langgraph-{version}.tar.gz")
    with tarfile.open(archive) as tar:
        tar.extractall(into, filter="data")
    root = into / f"langgraph-{version}"
    conftest = root / "tests" / "conftest.py"
    conftest.write_text(
        conftest.read_text()
        + "\nfrom savegame_fixtures import async_checkpointer, sync_checkpointer  # noqa\n"
    )
    return root


def graph_tests(root: Path) -> list[str]:
    """The suite's test files that take a checkpointer fixture."""
    return sorted(
        str(path.relative_to(root))
        for path in (root / "tests").glob("test_*.py")
        if _FIXTURES.search(path.read_text())
    )


def pytest(root: Path, args: list[str], report: Path, *, no_docker: bool) -> int:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(HERE), str(root)]),
        # The suite's own stores and caches (not checkpointers) then need no Docker services.
        "NO_DOCKER": "true" if no_docker else "false",
    }
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--tb=short",
               f"--junitxml={report}", *args]  # fmt: skip
    print("+", " ".join(command[1:]), flush=True)
    return subprocess.run(command, cwd=root, env=env).returncode


def counts(report: Path) -> dict[str, Counter[str]]:
    """Outcomes per store (``other``: tests without a checkpointer) from a JUnit report."""
    found: dict[str, Counter[str]] = {}
    if report.exists():
        for case in ET.parse(report).iter("testcase"):
            name = case.get("name", "")
            store = next((s for s in STORES if s in name), None)
            outcome = "passed"
            for child in case:
                if child.tag in ("failure", "error"):
                    outcome = "failed"
                elif child.tag == "skipped":
                    outcome = "skipped"
            found.setdefault(store or "other", Counter())[outcome] += 1
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, help="unpack the sdist here (default: a temp dir)")
    parser.add_argument("-n", default="2", help="pytest-xdist workers (default 2)")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    options = parser.parse_args()
    version = importlib.metadata.version("langgraph")
    work = options.workdir or Path(tempfile.mkdtemp(prefix="langgraph-suite-"))
    work.mkdir(parents=True, exist_ok=True)
    root = sdist(version, work)
    files = graph_tests(root)
    deselect = [arg for test in BY_DESIGN for arg in ("--deselect", test)]
    reports = [work / "graph.xml", work / "prune.xml"]
    print(f"langgraph {version}: {len(files)} test files take a checkpointer", flush=True)
    failed = pytest(
        root, ["-n", options.n, *files, *options.pytest_args], reports[0], no_docker=True
    )
    # The prune tests skip without "Docker" (their Postgres): run them with NO_DOCKER off.
    failed |= pytest(root, [PRUNE_TESTS, *deselect, *options.pytest_args], reports[1],
                     no_docker=False)  # fmt: skip
    print(f"\nLangGraph {version}'s tests with SavegameSaver:")
    for title, report in zip(("graph tests", "prune tests"), reports, strict=True):
        for store, outcome in sorted(counts(report).items()):
            tally = ", ".join(f"{n} {k}" for k, n in sorted(outcome.items()))
            print(f"  {title:<12} {store:<18} {tally}")
    print(f"  by design, not run ({len(BY_DESIGN)}):")
    for test, reason in BY_DESIGN.items():
        print(f"    {test.split('::')[1]}: {reason}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
