"""A workflow's code version: declared, or derived from its steps' source.

A run records the version of the code it started under (``code_version`` in its first
checkpoint's metadata, so in its row, under the row's check): what ``savegame runs``
shows, and what a worker given versions claims by (``Worker(versions=...)``), so a
rolling deploy never hands a run in flight to code that would take another path.

A declared version (``Workflow("support", version="2024-12-01")``) is the one to use
in production: it changes when the team says the change matters to runs in flight, and
a worker of the next release can say it continues runs of this one.

Without one the version is derived: ``code-`` and a BLAKE2b digest over the workflow's
entry step, its state version, and each step (by name) with its function's *source
text*. Source, not the code object: a code object's bytecode changes with the Python
minor version (3.12 and 3.13 number their opcodes differently) and embeds line numbers
and the file's path, so two machines of one release would disagree; the source is the
same text wherever the release is installed, in every process and after every restart.
A function without source (built in a REPL, by ``exec``) falls back to its code
object's names and constants, which hold within one Python version. A derived version
covers the step functions only, not the helpers they call: declare the version when a
change lies elsewhere.
"""

from __future__ import annotations

import hashlib
import inspect
from types import CodeType
from typing import TYPE_CHECKING, Any

from savegame.errors import ConfigurationError

if TYPE_CHECKING:
    from savegame.runtime._workflow import Workflow

#: The longest version a run records (it is a column, a label, a CLI argument).
MAX_VERSION = 200

#: How a derived version starts, so a reader tells it from a declared one.
DERIVED = "code-"


def check_version(value: Any, what: str) -> str:
    """``value`` if it can name a version: a non-empty string of printable characters.

    Raises:
        ConfigurationError: naming ``what`` and what is wrong.
    """
    if not isinstance(value, str) or not value or len(value) > MAX_VERSION:
        raise ConfigurationError(
            f"{what} must be a non-empty string of at most {MAX_VERSION} characters, not {value!r}"
        )
    if not value.isprintable() or value != value.strip():
        raise ConfigurationError(f"{what} {value!r} holds spaces at its ends or unprintable text")
    return value


def check_versions(values: Any, what: str) -> list[str] | None:
    """A claimer's versions as a list (None: any), each checked.

    Raises:
        ConfigurationError: a bare string (read as its characters), or a bad version.
    """
    if values is None:
        return None
    if isinstance(values, str):
        raise ConfigurationError(f"{what} takes a list of versions, not one string")
    return [check_version(v, what) for v in values]


def _code(code: CodeType) -> bytes:
    """What a code object without source says about itself, without line numbers or paths."""
    consts = [_code(c) if isinstance(c, CodeType) else repr(c).encode() for c in code.co_consts]
    parts = [code.co_code, *consts, *(n.encode() for n in code.co_names)]
    return b"\0".join(parts)


def _step_text(fn: Any) -> bytes:
    try:
        return inspect.getsource(fn).replace("\r\n", "\n").encode()
    except (OSError, TypeError):
        code = getattr(inspect.unwrap(fn), "__code__", None)
        if isinstance(code, CodeType):
            return _code(code)
        # A callable object: its class's source, else its type's name.
        try:
            return inspect.getsource(type(fn)).encode()
        except (OSError, TypeError):
            return type(fn).__qualname__.encode()


def derive(wf: Workflow) -> str:
    """The derived version of ``wf``'s code: see the module docstring."""
    h = hashlib.blake2b(digest_size=6)
    h.update(f"savegame-version-1\0{wf.entry}\0{wf.state_version}\0".encode())
    for name in sorted(wf.steps):
        h.update(name.encode() + b"\0" + _step_text(wf.steps[name].fn) + b"\0")
    return DERIVED + h.hexdigest()


__all__ = ["DERIVED", "MAX_VERSION", "check_version", "check_versions", "derive"]
