"""Finding a workflow again from its reference, as a resume in a fresh process or a worker does."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from savegame import Workflow
from savegame.errors import ConfigurationError, WorkflowImportError
from savegame.runtime import load
from savegame.testing.together import together

SLOW_FILE = """
import time

from savegame import Workflow

# Long enough that threads started together all ask while the first import runs.
time.sleep(0.3)

wf = Workflow("slow")
"""


def test_threads_loading_one_file_at_once_all_get_the_workflow(tmp_path: Path) -> None:
    # A worker's slots resolve a run's workflow reference in parallel threads;
    # one of them used to get the half-imported module and fail the run.
    path = tmp_path / "slow_workflow.py"
    path.write_text(SLOW_FILE)
    ref = f"{path}:wf"
    outcomes = together([lambda: load(ref) for _ in range(4)])
    assert all(isinstance(o, Workflow) for o in outcomes), outcomes
    assert len({id(o) for o in outcomes}) == 1


def test_a_file_that_fails_to_import_can_be_loaded_once_fixed(tmp_path: Path) -> None:
    path = tmp_path / "broken_workflow.py"
    path.write_text("raise RuntimeError('not yet')\n")
    # What the module raised is the cause: a worker tells "does not import here" apart
    # from a broken run by the error's class.
    with pytest.raises(WorkflowImportError, match=r"cannot import .*: RuntimeError: not yet") as e:
        load(f"{path}:wf")
    assert isinstance(e.value.__cause__, RuntimeError)
    path.write_text("from savegame import Workflow\n\nwf = Workflow('fixed')\n")
    assert isinstance(load(f"{path}:wf"), Workflow)


def test_a_missing_attribute_names_the_file_and_the_reference(tmp_path: Path) -> None:
    path = tmp_path / "empty_workflow.py"
    path.write_text("x = 1\n")
    with pytest.raises(ConfigurationError, match=r"no attribute 'wf'.*empty_workflow\.py:wf"):
        load(f"{path}:wf")


def test_a_module_reference_imports_the_module() -> None:
    assert load("savegame.runtime._loader:load") is load
    assert "savegame.runtime._loader" in sys.modules


def test_a_file_that_loads_another_file_on_a_thread_while_imported(tmp_path: Path) -> None:
    """A registry built in a thread pool while its module imports: one lock per file,
    so the helper thread does not wait on the file that is waiting for it."""
    (tmp_path / "inner_workflow.py").write_text(
        "from savegame import Workflow\nwf = Workflow('in')\n"
    )
    (tmp_path / "outer_workflow.py").write_text(
        textwrap.dedent(
            f"""
            from concurrent.futures import ThreadPoolExecutor
            from savegame import Workflow
            from savegame.runtime import load

            with ThreadPoolExecutor(1) as pool:
                inner = pool.submit(load, {str(tmp_path / "inner_workflow.py")!r} + ":wf")
                inner = inner.result(timeout=10)
            wf = Workflow("out")
            """
        )
    )
    outer = load(f"{tmp_path / 'outer_workflow.py'}:wf")
    assert isinstance(outer, Workflow) and outer.name == "out"
