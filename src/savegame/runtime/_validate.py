"""A workflow checked before it runs: what can be known of its steps without running them.

A step names its next step in what it returns, so only the literal ones are known
beforehand (``return update, "plan"``, ``"a" if c else "b"``, a module constant); a
computed one is checked when the step returns it, as before. The tools a step calls
are the :class:`~savegame.effects.Tool` objects its code refers to by name (module
globals and closure variables); a tool reached another way (an attribute of another
module, a list) is checked when it is called, before its intent is committed.
"""

from __future__ import annotations

import ast
import difflib
import inspect
import textwrap
from collections.abc import Callable, Iterator
from types import CodeType
from typing import TYPE_CHECKING, Any

from savegame.effects import Tool, check_approval, unknown_compensation
from savegame.errors import ConfigurationError

if TYPE_CHECKING:
    from savegame.runtime._workflow import Workflow

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def check_workflow(wf: Workflow, end: str) -> None:
    """Raise ConfigurationError for the first thing in ``wf`` that cannot run as written."""
    if not wf.steps:
        raise ConfigurationError(f"workflow {wf.name!r} has no steps")
    wf.entry_step()
    known = ", ".join(sorted(wf.steps))
    for spec in wf.steps.values():
        for target in sorted(next_steps(spec.fn)):
            if target != end and target not in wf.steps:
                near = difflib.get_close_matches(target, list(wf.steps), n=1)
                hint = f"; did you mean {near[0]!r}?" if near else ""
                raise ConfigurationError(
                    f"workflow {wf.name!r} has no step {target!r}: step {spec.name!r} returns "
                    f"it as its next step{hint} (steps: {known})"
                )
        where = f"workflow {wf.name!r}, step {spec.name!r}"
        for found in tools_of(spec.fn):
            problem = unknown_compensation(found)
            if problem is not None:
                raise ConfigurationError(f"{where}: {problem}")
            check_approval(found.approval, f"{where}: tool {found.name}")


def _function(fn: Callable[..., Any]) -> Any:
    return inspect.unwrap(getattr(fn, "__func__", fn))


def next_steps(fn: Callable[..., Any]) -> set[str]:
    """The step names ``fn`` returns as literals in ``return update, next``."""
    func = _function(fn)
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return set()  # no source to read (a builtin, a REPL): checked when it returns
    node = tree.body[0] if tree.body else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return set()
    names = {**getattr(func, "__globals__", {}), **_closure(func)}
    found: set[str] = set()
    for returned in _returns(node):
        value = returned.value
        if isinstance(value, ast.Tuple) and len(value.elts) == 2:
            found |= _literals(value.elts[1], names)
    return found


def _returns(node: ast.FunctionDef | ast.AsyncFunctionDef) -> Iterator[ast.Return]:
    """The function's own return statements (not those of functions nested in it)."""
    stack: list[ast.AST] = list(node.body)
    while stack:
        current = stack.pop()
        if isinstance(current, ast.Return):
            yield current
        elif not isinstance(current, _SCOPES):
            stack.extend(ast.iter_child_nodes(current))


def _literals(expr: ast.expr, names: dict[str, Any]) -> set[str]:
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return {expr.value}
    if isinstance(expr, ast.IfExp):
        return _literals(expr.body, names) | _literals(expr.orelse, names)
    if isinstance(expr, ast.BoolOp):
        return set().union(*(_literals(v, names) for v in expr.values))
    if isinstance(expr, ast.Name) and isinstance(names.get(expr.id), str):
        return {names[expr.id]}
    return set()


def _closure(func: Any) -> dict[str, Any]:
    code, cells = getattr(func, "__code__", None), getattr(func, "__closure__", None) or ()
    if code is None:
        return {}
    values = {}
    for name, cell in zip(code.co_freevars, cells, strict=False):
        try:
            values[name] = cell.cell_contents
        except ValueError:  # a cell not filled yet
            continue
    return values


def _names(code: CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, CodeType):
            names |= _names(const)
    return names


def tools_of(fn: Callable[..., Any]) -> list[Tool]:
    """The tools ``fn``'s code refers to by a global or closure name."""
    func = _function(fn)
    code = getattr(func, "__code__", None)
    if code is None:
        return []
    globals_ = getattr(func, "__globals__", {})
    candidates = [globals_.get(name) for name in sorted(_names(code))]
    candidates += list(_closure(func).values())
    found: dict[int, Tool] = {}
    for value in candidates:
        if isinstance(value, Tool):
            found.setdefault(id(value), value)
    return list(found.values())
