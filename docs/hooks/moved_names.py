"""MkDocs hook: the table of names that left the root, generated from the root itself.

``docs/upgrading.md`` holds ``<!-- moved-names -->``; at build time it is replaced by one
row per old root name (``savegame._NEW_HOME``): its old spelling, its new one, and, for
an operation, the handle's method that does the same. A name moved in the code is in
the table at the next build; tests/test_exported_members.py reads this table too.
"""

from __future__ import annotations

from typing import Any

PLACEHOLDER = "<!-- moved-names -->"


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    if PLACEHOLDER not in markdown:
        return markdown
    return markdown.replace(PLACEHOLDER, table())


def table() -> str:
    """Every old root name, grouped by where it went, as a markdown table."""
    import savegame
    from savegame.client import METHODS

    rows = ["| before | now | or, on the handle |", "|---|---|---|"]
    for old, (module, new) in sorted(savegame._NEW_HOME.items(), key=lambda kv: (kv[1], kv[0])):
        method = METHODS.get(old) if module == "savegame.client" else None
        handle = f"`sg.{method}()`" if method else ""
        rows.append(f"| `savegame.{old}` | `{module}.{new}` | {handle} |")
    return "\n".join(rows)
