"""Imports point down the layers of docs/architecture.md, packages do not import each other in a
circle, and no package reaches into another's private modules.

Read from the source with ``ast``, so every import counts: at module level, inside a
function (a lazy import is still a dependency) and under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import savegame

SRC = Path(savegame.__file__).resolve().parent

#: Top to bottom. A module may import from its own rank and the ranks below it, never above.
#: A unit is a top-level package or module of ``savegame``; ``savegame`` is the package's
#: own ``__init__`` (the public API).
LAYERS: list[tuple[str, ...]] = [
    # the command line and ``python -m savegame``; the web UI (``savegame ui``); the contract
    # suite shipped for users' tests; adapters to other frameworks (``savegame.langgraph``
    # is the path users type)
    ("cli", "__main__", "ui", "testing", "integrations", "langgraph"),
    # the demo the CLI runs: an agent, its outside world, its processes, over the public API
    ("demo",),
    # the public API: the handle (``savegame.connect()``), run / resume / inspect / prune ...
    # and what savegame/__init__ exports
    ("savegame", "client", "inspect", "maintenance"),
    # the agent loop (LLM <-> tools), built on workflows
    ("agent",),
    # verbs on runs from outside (approve, cancel, fork, send ...); the worker fleet (submit,
    # Worker, schedules, queues): both over the engine's API, neither importing the other
    ("control", "fleet"),
    # the engine: workflows, the runner, setup, the saver, leases, children, waiting
    ("runtime",),
    # a directory's files captured at each checkpoint and put back: the saver uses it
    ("workspace",),
    # the runtime's spans through OpenTelemetry's API (savegame[otel]), imported lazily
    ("tracing",),
    # model adapters over the vendors' SDKs: they implement effects' ChatModel protocol and
    # need nothing of the runner
    ("models",),
    # request ids, journal, calls, approvals, compensation
    ("effects",),
    # pure-data check, encode, delta, compress, encrypt, migrate
    ("codec",),
    # the Store protocol and its backends
    ("stores",),
    # records, the error tree, control-flow signals, ids, secrets, URL redaction: used by
    # every layer
    ("model", "errors", "signals", "ids", "secrets", "redaction"),
]

RANK = {unit: rank for rank, units in enumerate(LAYERS) for unit in units}


def _module_name(path: Path) -> str:
    parts = ("savegame", *path.relative_to(SRC).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(SRC.rglob("*.py"))}


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _is_private(module: str) -> bool:
    return any(part.startswith("_") and not part.startswith("__") for part in module.split("."))


def _imports(module: str) -> Iterator[tuple[int, str, str | None]]:
    """(line, imported savegame module, imported name or None) for every import in ``module``."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "savegame":
                    yield node.lineno, alias.name, None
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            if base.split(".")[0] != "savegame":
                continue
            for alias in node.names:
                # ``from savegame import codec`` imports the module savegame.codec.
                sub = f"{base}.{alias.name}"
                if sub in MODULES:
                    yield node.lineno, sub, None
                else:
                    yield node.lineno, base, alias.name


def _edges() -> Iterator[tuple[str, int, str, str | None]]:
    for module in MODULES:
        for line, target, name in _imports(module):
            yield module, line, target, name


def test_every_unit_has_a_rank() -> None:
    units = {_unit(m) for m in MODULES}
    assert units - RANK.keys() == set(), "give the new package a place in LAYERS"
    assert RANK.keys() - units == set(), "LAYERS names a package that does not exist"


def test_no_import_runs_up_a_layer() -> None:
    upward = [
        f"{MODULES[module].relative_to(SRC.parent)}:{line}: {module} ({_unit(module)}, "
        f"rank {RANK[_unit(module)]}) imports {target} ({_unit(target)}, rank {RANK[_unit(target)]})"
        for module, line, target, _ in _edges()
        if RANK[_unit(target)] < RANK[_unit(module)]
    ]
    assert upward == []


def test_no_import_cycle_between_packages() -> None:
    graph: dict[str, set[str]] = {}
    for module, _, target, _ in _edges():
        if _unit(module) != _unit(target):
            graph.setdefault(_unit(module), set()).add(_unit(target))

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            unit = todo.pop()
            if unit == goal:
                return True
            if unit not in seen:
                seen.add(unit)
                todo.extend(graph.get(unit, ()))
        return False

    cycles = sorted(f"{a} <-> {b}" for a, out in graph.items() for b in out if reaches(b, a))
    assert cycles == []


def test_packages_use_each_other_through_their_public_names() -> None:
    # A package's _modules and _names are its own; what others need, its __init__ exports.
    reached = [
        f"{MODULES[module].relative_to(SRC.parent)}:{line}: {module} imports "
        f"{target}{'.' + name if name else ''}"
        for module, line, target, name in _edges()
        if _unit(module) != _unit(target)
        and (_is_private(target) or (name is not None and _is_private(name)))
    ]
    assert reached == []
