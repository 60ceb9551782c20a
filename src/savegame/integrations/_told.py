"""A tool's result as an agent SDK hands it to the model: the same text on every execution.

The Agents SDK tells the model ``str(result)``, ADK the result's JSON. A set's iteration
order follows its items' hashes, and a string's hash differs per process
(``PYTHONHASHSEED``): a run resumed by another process (``savegame approve`` from a
shell) would tell the model other text than the first execution did, and the model
call recorded after it would no longer match (``NonDeterminismError``). Each set is
handed over as a list in the codec's canonical order instead, on every execution.
"""

from __future__ import annotations

from typing import Any

import orjson

from savegame.codec import to_data


def in_stable_order(value: Any) -> Any:
    """``value`` with each set or frozenset, at any depth, a list in canonical order."""
    if isinstance(value, (set, frozenset)):
        items = sorted(value, key=lambda v: orjson.dumps(to_data(v), option=orjson.OPT_SORT_KEYS))
        return [in_stable_order(item) for item in items]
    if isinstance(value, dict):
        return {key: in_stable_order(item) for key, item in value.items()}
    if isinstance(value, list):
        return [in_stable_order(item) for item in value]
    if isinstance(value, tuple):
        return tuple(in_stable_order(item) for item in value)
    return value
