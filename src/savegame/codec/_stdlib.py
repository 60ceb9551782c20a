"""Standard-library values that are data but not JSON: registered by name at import.

The ones LangGraph's strict serializer accepts beside those :mod:`._values` tags
(``deque``, paths, IP addresses, ``timezone``, compiled patterns), so a graph's state
that holds one is kept by savegame as by LangGraph's own savers; savegame's own runs
may hold them too. Each is saved by a stable name and rebuilt from its fields, as a
registered class is: nothing is imported or called by a name read from storage.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import pathlib
import re
from collections import deque
from typing import Any

from savegame.codec._registry import register


def _by_text(cls: type[Any], name: str) -> None:
    """``cls`` saved as its text and rebuilt by ``cls(text)``."""
    register(cls, name=name, fields=lambda v: {"text": str(v)}, rebuild=lambda f: cls(f["text"]))


def _deque(fields: dict[str, Any]) -> deque[Any]:
    return deque(fields["items"], fields["maxlen"])


register(
    deque,
    name="collections.deque",
    fields=lambda d: {"items": list(d), "maxlen": d.maxlen},
    rebuild=_deque,
)
register(
    dt.timezone,
    name="datetime.timezone",
    # A zone made without a name has one made from its offset ("UTC+01:00"): kept as given.
    fields=lambda z: {"offset": z.utcoffset(None), "name": z.tzname(None)},
    rebuild=lambda f: dt.timezone(f["offset"], f["name"]),
)
register(
    re.Pattern,
    name="re.Pattern",
    fields=lambda p: {"pattern": p.pattern, "flags": p.flags},
    rebuild=lambda f: re.compile(f["pattern"], f["flags"]),
)
# A concrete Path is the platform's class (PosixPath here); it comes back as this
# platform's Path. The pure flavours name their own rules and come back as themselves.
_by_text(type(pathlib.Path()), "pathlib.Path")
_by_text(pathlib.PurePosixPath, "pathlib.PurePosixPath")
_by_text(pathlib.PureWindowsPath, "pathlib.PureWindowsPath")
for _cls in (
    ipaddress.IPv4Address,
    ipaddress.IPv6Address,
    ipaddress.IPv4Network,
    ipaddress.IPv6Network,
    ipaddress.IPv4Interface,
    ipaddress.IPv6Interface,
):
    _by_text(_cls, f"ipaddress.{_cls.__name__}")
