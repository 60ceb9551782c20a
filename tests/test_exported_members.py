"""The public API is what ``savegame/__init__.py`` exports; each package's ``__init__``
exports what the other packages and users import from it (its modules are private)."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

import savegame

#: The most names the root may export: the everyday ones (issue 31). Every other public
#: name lives in a namespace (``savegame.errors``, ``savegame.client``, ``savegame.inspect``
#: ...), which the root's ``_NAMES`` and ``_MOVED`` tables name.
ROOT_AT_MOST = 40

#: Every namespace the root points to: where its own names come from, and where its old
#: names moved.
NAMESPACES = sorted({*savegame._NAMES, *savegame._MOVED})


def test_the_root_is_small() -> None:
    assert len(savegame.__all__) <= ROOT_AT_MOST
    assert len(set(savegame.__all__)) == len(savegame.__all__)
    assert "__version__" in savegame.__all__


def test_a_name_is_at_the_root_or_moved_never_both() -> None:
    assert set(savegame.__all__) & set(savegame._NEW_HOME) == set()
    homes = [name for names in savegame._MOVED.values() for name in names]
    assert len(set(homes)) == len(homes)


@pytest.mark.parametrize("package", NAMESPACES)
def test_each_namespace_exports_what_the_root_sends_there(package: str) -> None:
    """A name the root points at is in its namespace's ``__all__`` (a module without one,
    ``savegame.codec.crypto``, exports every public name it defines): the new spelling
    is public there, not reached into."""
    module = importlib.import_module(package)
    sent = {*savegame._NAMES.get(package, ()), *savegame._MOVED.get(package, ())}
    public = getattr(module, "__all__", [n for n in vars(module) if not n.startswith("_")])
    assert sent - set(public) == set()


@pytest.mark.parametrize("old", sorted(savegame._NEW_HOME))
def test_an_old_root_name_warns_and_is_its_new_home(old: str) -> None:
    module, new = savegame._NEW_HOME[old]
    moved = getattr(importlib.import_module(module), new)
    with pytest.warns(DeprecationWarning, match=rf"savegame\.{old} moved to {module}\.{new}\b"):
        value = getattr(savegame, old)
    assert value is moved
    with pytest.warns(DeprecationWarning, match=rf"savegame\.{old} moved"):
        exec(f"from savegame import {old}", {})  # the statement users wrote
    assert old not in dir(savegame)


def test_an_old_operation_names_the_handles_method() -> None:
    with pytest.warns(DeprecationWarning, match=r"sg\.schedules\.pause\(\)"):
        savegame.pause_schedule  # type: ignore[attr-defined]  # noqa: B018
    with pytest.warns(DeprecationWarning, match=r"sg\.history\(\)"):
        savegame.history  # type: ignore[attr-defined]  # noqa: B018


MODELS_API = ["Anthropic", "LiteLLM", "LocalServer", "OpenAI", "Price", "lookup_price"]


def test_the_model_adapters_are_pinned() -> None:
    import savegame.models

    assert savegame.models.__all__ == MODELS_API


def test_the_errors_the_readme_promises_are_exported() -> None:
    import savegame.errors

    for name in ("EncryptionKeyError", "UnencryptedRecordError", "MissingBlobsError"):
        assert issubclass(getattr(savegame.errors, name), savegame.SavegameError)
    assert savegame.SavegameError is savegame.errors.SavegameError


#: What ``savegame.langgraph`` (``savegame[langgraph]``) gives a LangGraph user.
LANGGRAPH_API = ["MigrationReport", "SavegameSaver", "ThreadResult", "durable_tool", "migrate"]


def test_the_langgraph_api_is_pinned() -> None:
    pytest.importorskip("langgraph")
    import savegame.integrations.langgraph
    import savegame.langgraph

    assert savegame.langgraph.__all__ == LANGGRAPH_API
    for name in LANGGRAPH_API:
        assert getattr(savegame.langgraph, name) is getattr(savegame.integrations.langgraph, name)


#: What ``savegame.integrations.pydantic_ai`` (``savegame[pydantic-ai]``) gives a
#: pydantic-ai user.
PYDANTIC_AI_API = ["SavegameDurability", "current", "durable", "request_id", "run_agent"]


def test_the_pydantic_ai_api_is_pinned() -> None:
    pytest.importorskip("pydantic_ai")
    import savegame.integrations.pydantic_ai

    assert savegame.integrations.pydantic_ai.__all__ == PYDANTIC_AI_API


@pytest.mark.parametrize(
    "package",
    sorted(
        {
            "savegame",
            "savegame.control",
            "savegame.fleet",
            "savegame.models",
            "savegame.runtime",
            "savegame.tracing",
            "savegame.workspace",
            *NAMESPACES,
        }
    ),
)
def test_a_package_exports_only_names_it_has(package: str) -> None:
    module = importlib.import_module(package)
    assert [name for name in getattr(module, "__all__", ()) if not hasattr(module, name)] == []


#: What ``import savegame`` must not load: the public names' modules are imported when a
#: name is first read (PEP 562), so a script, ``savegame --help`` or a tool that only reads
#: ``__version__`` pays for none of them.
HEAVY = [
    "savegame.agent",
    "savegame.client",
    "savegame.codec",
    "savegame.control",
    "savegame.effects",
    "savegame.fleet",
    "savegame.inspect",
    "savegame.maintenance",
    "savegame.runtime",
    "savegame.stores",
    "savegame.workspace",
    "asyncio",
    "croniter",
    "cryptography",
    "sqlite3",
    "stamina",
]


def _fresh(code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout


def test_import_savegame_loads_none_of_its_packages() -> None:
    loaded = _fresh(
        "import sys, savegame\n"
        f"print(sorted(set({HEAVY!r}) & set(sys.modules)))\n"
        "print(sorted(m for m in sys.modules if m.startswith('savegame')))"
    ).splitlines()
    assert loaded == ["[]", "['savegame']"]


def test_every_exported_name_resolves_in_a_fresh_process() -> None:
    """Each name read first, alone, in its own interpreter would be too slow; one process
    reading them all in order still finds every one through the lazy table."""
    out = _fresh(
        "import savegame\n"
        "missing = [n for n in savegame.__all__ if getattr(savegame, n, None) is None]\n"
        "print(missing, sorted(set(savegame.__all__) - set(dir(savegame))))"
    )
    assert out == "[] []\n"


def test_a_lazy_name_is_the_object_its_module_defines() -> None:
    for name, module in savegame._MODULE_OF.items():
        assert getattr(savegame, name) is getattr(importlib.import_module(module), name)
    with pytest.raises(AttributeError, match="Wrkflow"):
        savegame.Wrkflow  # type: ignore[attr-defined]  # noqa: B018


def _type_checking_imports() -> dict[str, str]:
    """Exported name -> module, as the ``if TYPE_CHECKING:`` imports of the package give
    them to mypy and IDEs."""
    tree = ast.parse(Path(savegame.__file__).read_text())
    guard = next(
        node
        for node in tree.body
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    )
    return {
        alias.asname or alias.name: node.module or ""
        for node in guard.body
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("savegame")
        for alias in node.names
    }


def test_the_lazy_table_is_what_type_checkers_see() -> None:
    """Two lists of the same imports, one for run time, one for mypy: they must not drift."""
    seen = _type_checking_imports()
    assert seen == savegame._MODULE_OF
    assert sorted(seen) == sorted(n for n in savegame.__all__ if n != "__version__")


def test_a_script_does_not_pay_for_features_it_does_not_use() -> None:
    """What ``from savegame import Workflow, run`` leaves out: a schedule's cron parser, the
    retry schedule, a workspace's ignore patterns and encryption, imported when used."""
    code = (
        "import sys\n"
        "from savegame import Workflow, run\n"
        "print(sorted({'croniter', 'stamina', 'pathspec', 'cryptography'} & set(sys.modules)))"
    )
    assert _fresh(code) == "[]\n"


#: ``from savegame import a, (b, ...)`` and ``savegame.name`` (not in quotes: a codec's
#: registered type names, ``"savegame.ToolCall"``, are stored data, not spellings).
_FROM_LINE = re.compile(r"from savegame import (\([^)]*\)|[^\n]*)")
_ATTR = re.compile(r"(?<![\w.'\"])savegame\.(\w+)")
_REPO = Path(__file__).resolve().parents[1]


def _old_spellings(text: str) -> set[str]:
    old = set(savegame._NEW_HOME)
    found = {m.group(1) for m in _ATTR.finditer(text)} & old
    for m in _FROM_LINE.finditer(text):
        names = re.sub(r"#[^\n]*", "", m.group(1)).strip("()")
        found |= {part.split(" as ")[0].strip() for part in names.split(",")} & old
    return found


def test_nothing_of_ours_spells_an_old_root_name() -> None:
    """The suite runs with warnings as errors, so code that runs is held to the new names;
    this holds the rest: docs, docstrings, examples, benchmarks."""
    paths = [
        _REPO / "README.md",
        *sorted((_REPO / "docs").rglob("*.md")),
        *(
            p
            for top in ("src", "examples", "benchmarks", "docs")
            for p in sorted((_REPO / top).rglob("*.py"))
        ),
    ]
    # the tables of old names, and the page that tells users about them
    skip = {Path(savegame.__file__).resolve(), Path(__file__).resolve()}
    skip.add((_REPO / "docs" / "upgrading.md").resolve())
    found = {
        str(p.relative_to(_REPO)): sorted(names)
        for p in paths
        if p.resolve() not in skip and (names := _old_spellings(p.read_text()))
    }
    assert found == {}


def test_every_new_home_has_a_reference_page() -> None:
    """The API reference renders each namespace the root sends a name to."""
    pages = "\n".join(p.read_text() for p in (_REPO / "docs" / "reference" / "api").glob("*.md"))
    rendered = set(re.findall(r"^::: ([\w.]+)", pages, re.M))
    assert set(savegame._MOVED) - rendered == set()
    assert "savegame" in rendered


def test_the_upgrading_page_lists_every_moved_name() -> None:
    spec = importlib.util.spec_from_file_location(
        "moved_names", _REPO / "docs" / "hooks" / "moved_names.py"
    )
    assert spec is not None and spec.loader is not None
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    text = hook.table()
    assert "<!-- moved-names -->" in (_REPO / "docs" / "upgrading.md").read_text()
    for old, (module, new) in savegame._NEW_HOME.items():
        assert f"| `savegame.{old}` | `{module}.{new}` |" in text
