"""Prices: LiteLLM's model cost map (read from the installed package, without importing
it), a user's Price over it, and no number at all for a model nobody prices."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from savegame.errors import ConfigurationError
from savegame.models import OpenAI, Price, lookup_price


def test_the_cost_map_prices_known_models_per_million_tokens() -> None:
    price = lookup_price("gpt-4o")
    assert price == Price(input=2.5, output=10.0, cached_input=1.25, cache_write=None)
    # A provider's prefix, either way round.
    assert lookup_price("openai/gpt-4o") == price
    assert lookup_price("gpt-4o", "openai") == price
    claude = lookup_price("claude-sonnet-4-5", "anthropic")
    assert claude is not None and claude.cache_write is not None


def test_a_model_nobody_prices_has_no_price() -> None:
    assert lookup_price("my-fine-tune-7b") is None
    assert OpenAI("my-fine-tune-7b", api_key="k").price is None


def test_a_given_price_overrides_the_map() -> None:
    mine = Price(input=1.0, output=2.0)
    assert OpenAI("gpt-4o", api_key="k", price=mine).price is mine


def test_cost_arithmetic() -> None:
    price = Price(input=3.0, output=15.0, cached_input=0.3, cache_write=3.75)
    assert price.cost(1300, 20, cached=1000, cache_write=200) == pytest.approx(
        (100 * 3 + 1000 * 0.3 + 200 * 3.75 + 20 * 15) / 1e6
    )
    assert Price(input=2.0, output=4.0).cost(10, 10, cached=5) == pytest.approx(60 / 1e6)


@pytest.mark.parametrize("bad", [-1, float("nan"), "1", True])
def test_a_bad_price_is_refused(bad: object) -> None:
    with pytest.raises(ConfigurationError, match=r"Price\.input"):
        Price(input=bad, output=1.0)  # type: ignore[arg-type]


def test_pricing_neither_imports_litellm_nor_goes_online() -> None:
    code = (
        "import sys, json; from savegame.models import lookup_price; p = lookup_price('gpt-4o'); "
        "print(json.dumps([p.input, 'litellm' in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == [2.5, False]
