"""What a model call cost: a price per model, from LiteLLM's model cost map or the user's.

Prices change and nobody here keeps them: the table is LiteLLM's (``litellm``'s
``model_prices_and_context_window`` map, maintained upstream and shipped in the
package). When ``litellm`` is imported its live ``litellm.model_cost`` is read
(LiteLLM may have refreshed it from the network); otherwise the copy the installed
package ships is read from its file, so pricing a call never imports LiteLLM (whose
import fetches the map from the network) nor goes online. A model the table does not
know, or no ``litellm`` installed, has no price: its calls cost ``None``, never a
made-up number. ``Price`` given to an adapter overrides the table.
"""

from __future__ import annotations

import importlib.util
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import orjson

from savegame.errors import ConfigurationError

_MAP_FILE = "model_prices_and_context_window_backup.json"
_MODES = {None, "chat", "responses", "completion"}


@dataclass(frozen=True, slots=True)
class Price:
    """A model's price, in US dollars per million tokens."""

    input: float
    """Prompt tokens."""
    output: float
    """Completion tokens."""
    cached_input: float | None = None
    """Prompt tokens read from the provider's prompt cache (``input`` when None)."""
    cache_write: float | None = None
    """Prompt tokens written to the prompt cache (Anthropic; ``input`` when None)."""

    def __post_init__(self) -> None:
        for name in ("input", "output", "cached_input", "cache_write"):
            value = getattr(self, name)
            if value is None and name in ("cached_input", "cache_write"):
                continue
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value < 0
            ):
                raise ConfigurationError(f"Price.{name} must be a number >= 0, not {value!r}")

    def cost(
        self, input_tokens: int, output_tokens: int, cached: int = 0, cache_write: int = 0
    ) -> float:
        """The cost in dollars; ``input_tokens`` counts the cached and cache-written ones."""
        plain = max(input_tokens - cached - cache_write, 0)
        total = (
            plain * self.input
            + cached * (self.input if self.cached_input is None else self.cached_input)
            + cache_write * (self.input if self.cache_write is None else self.cache_write)
            + output_tokens * self.output
        )
        return round(total / 1_000_000, 10)


def _number(entry: Mapping[str, Any], key: str) -> float | None:
    value = entry.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _per_million(per_token: float) -> float:
    # 2.5e-06 * 1e6 is 2.4999999999999996: the table's prices have a few digits.
    return round(per_token * 1_000_000, 9)


@cache
def _shipped_map() -> dict[str, Any]:
    """The cost map the installed ``litellm`` ships, read from its file; {} without it."""
    try:
        spec = importlib.util.find_spec("litellm")  # finds the package without importing it
    except (ImportError, ValueError):
        return {}
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / _MAP_FILE
        if path.is_file():
            loaded = orjson.loads(path.read_bytes())
            return loaded if isinstance(loaded, dict) else {}
    return {}


def _cost_map() -> Mapping[str, Any]:
    litellm = sys.modules.get("litellm")
    live = getattr(litellm, "model_cost", None)
    return live if isinstance(live, Mapping) and live else _shipped_map()


def lookup_price(model: str, provider: str | None = None) -> Price | None:
    """The price LiteLLM's model cost map gives ``model`` (``gpt-4o``, ``openai/gpt-4o``,
    ``claude-sonnet-4-5``), or None when it has none (or ``litellm`` is not installed).

    ``provider`` (``openai``, ``anthropic``) is tried as a prefix too.
    """
    table = _cost_map()
    names = [model]
    if provider and not model.startswith(provider + "/"):
        names.append(f"{provider}/{model}")
    if "/" in model:
        names.append(model.split("/", 1)[1])
    for name in names:
        entry = table.get(name)
        if not isinstance(entry, Mapping) or entry.get("mode") not in _MODES:
            continue
        inp, out = _number(entry, "input_cost_per_token"), _number(entry, "output_cost_per_token")
        if inp is None or out is None:
            continue
        cached = _number(entry, "cache_read_input_token_cost")
        write = _number(entry, "cache_creation_input_token_cost")
        return Price(
            _per_million(inp),
            _per_million(out),
            None if cached is None else _per_million(cached),
            None if write is None else _per_million(write),
        )
    return None
