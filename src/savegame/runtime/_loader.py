"""Finding a workflow again from a reference: ``package.module:attr`` or ``path/file.py:attr``.

A run stores the reference of its workflow so that ``savegame resume RUN_ID``
in a fresh process can import it without being told where it lives.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import os
import sys
import threading
from typing import Any

from savegame.errors import ConfigurationError, WorkflowImportError
from savegame.runtime._workflow import Workflow

# A module is in sys.modules before its file has finished running. Without a lock
# a second thread (a worker's other slot) would take that half-made module and find
# no workflow in it; with one, that thread waits for the first import. One lock per
# file, not one for all: a file that loads another file on a helper thread while it
# is imported must not wait on itself.
_LOCKS_GUARD = threading.Lock()
_FILE_LOCKS: dict[str, threading.RLock] = {}


def _file_lock(name: str) -> threading.RLock:
    with _LOCKS_GUARD:
        return _FILE_LOCKS.setdefault(name, threading.RLock())


def as_workflow(obj: Any, ref: str = "<object>") -> Workflow:
    """Accept a Workflow or anything exposing one as ``.workflow`` (an Agent), validated
    (:meth:`Workflow.validate`)."""
    wf = getattr(obj, "workflow", None)
    if isinstance(wf, Workflow):
        wf.validate()  # before any step runs: a bad name found now, not after an effect
        return wf
    raise ConfigurationError(f"{ref} is {type(obj).__qualname__}, not a savegame Workflow or Agent")


def load(ref: str) -> Any:
    """Import ``module:attr`` or ``path/file.py:attr`` and return the attribute.

    Raises:
        ConfigurationError: ``ref`` is not such a reference.
        WorkflowImportError: its module is not found, raises while it is imported, or
            has no such attribute (anything the module raises is its cause).
    """
    target, sep, attr = ref.rpartition(":")
    if not sep or not target or not attr:
        raise ConfigurationError(
            f"workflow reference {ref!r} must look like module:attr or path/file.py:attr"
        )
    try:
        if target.endswith(".py") or os.sep in target:
            with _file_lock(_module_name(target)):
                module = _load_file(target, ref)
        else:
            module = importlib.import_module(target)
    except WorkflowImportError:
        raise
    except Exception as exc:
        # Whatever the module raised (a missing package, a KeyError on an unset variable):
        # the code does not import here, which a worker must tell from a broken run.
        missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
        why = str(exc) if isinstance(exc, ImportError) else f"{type(exc).__name__}: {exc}"
        detail = f"cannot import {target!r} for workflow {ref!r}: {why}"
        raise WorkflowImportError(ref, target, detail, missing=missing) from exc
    obj = module
    parts = attr.split(".")
    for i, part in enumerate(parts):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            hint = _nearest(obj, part, parts[:i])
            detail = f"{target!r} has no attribute {attr!r}{hint} (workflow {ref!r})"
            raise WorkflowImportError(ref, target, detail) from None
    return obj


def _is_workflow(value: Any) -> bool:
    return isinstance(value, Workflow) or isinstance(getattr(value, "workflow", None), Workflow)


def _nearest(obj: Any, name: str, before: list[str]) -> str:
    """``; did you mean 'wf'?`` for the attribute of ``obj`` nearest ``name``, its
    workflows first (a looser match: ``fw`` for ``wf``); else the workflows it has."""
    names = [n for n in dir(obj) if not n.startswith("_")]
    flows = []
    for n in names:
        try:
            if _is_workflow(getattr(obj, n, None)):
                flows.append(n)
        except Exception:  # a property that raises is no workflow to offer
            continue
    near = difflib.get_close_matches(name, flows, n=1, cutoff=0.5) or difflib.get_close_matches(
        name, names, n=1
    )
    if near:
        return f"; did you mean {'.'.join([*before, near[0]])!r}?"
    return f"; its workflows: {', '.join(flows)}" if flows else ""


def _module_name(path: str) -> str:
    """A stable module name per file, so loading the same file twice reuses it."""
    full = os.path.abspath(path)
    return "savegame_user_" + hashlib.blake2b(full.encode(), digest_size=8).hexdigest()


def _load_file(path: str, ref: str) -> Any:
    full = os.path.abspath(path)
    if not os.path.isfile(full):
        raise WorkflowImportError(ref, path, f"no file {path!r} for workflow {ref!r}")
    name = _module_name(path)
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, full)
    if spec is None or spec.loader is None:
        detail = f"cannot load {path!r} as a Python module (workflow {ref!r})"
        raise WorkflowImportError(ref, path, detail)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    # The file's own folder goes on the path so its sibling imports work, as with `python file.py`.
    folder = os.path.dirname(full)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def reference_of(obj: Any) -> str | None:
    """Best-effort ``module:attr`` for a workflow or agent, by looking in its defining module."""
    wf = as_workflow(obj)
    where = wf.defined_in
    if where is None:
        return None
    if where.endswith(".py"):
        module = next(
            (m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == where), None
        )
        prefix = os.path.abspath(where)
    else:
        module = sys.modules.get(where)
        prefix = where
    if module is None:
        return None
    for attr, value in vars(module).items():
        if value is obj or value is wf:
            return f"{prefix}:{attr}"
    for attr, value in vars(module).items():
        if getattr(value, "workflow", None) is wf:
            return f"{prefix}:{attr}"
    return None
