"""What every adapter shares: its SDK imported lazily (a clear error naming the extra
when it is missing), bad setups refused, content that is not text sent as JSON."""

from __future__ import annotations

import email.utils
import json
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

import pytest

from savegame.errors import ConfigurationError, SerializationError
from savegame.models import Anthropic, LiteLLM, OpenAI
from savegame.models._base import MAX_RETRY_AFTER, retry_after, text_of


def test_importing_the_adapters_imports_no_sdk() -> None:
    code = (
        "import sys, json; import savegame.models; "
        "from savegame.models import OpenAI; OpenAI('gpt-4o'); "
        "print(json.dumps([m for m in ('openai', 'anthropic', 'litellm') if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


@pytest.mark.parametrize(
    ("adapter", "module", "extra"),
    [
        (OpenAI, "openai", "openai"),
        (Anthropic, "anthropic", "anthropic"),
        (LiteLLM, "litellm", "litellm"),
    ],
)
def test_a_missing_sdk_names_its_extra(
    monkeypatch: pytest.MonkeyPatch, adapter: type, module: str, extra: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # what an uninstalled package looks like
    with pytest.raises(ConfigurationError, match=rf"pip install 'savegame\[{extra}\]'"):
        adapter("some-model", api_key="k").complete([{"role": "user", "content": "hi"}], [])


def test_bad_setups_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="model must be a name"):
        OpenAI("")
    with pytest.raises(ConfigurationError, match="api must be"):
        OpenAI("gpt-4o", api="completions")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="output must be"):
        OpenAI("gpt-4o", output=42)
    with pytest.raises(ConfigurationError, match="price must be a Price"):
        OpenAI("gpt-4o", price=2.5)  # type: ignore[arg-type]
    # Settings are recorded with every call: pure data only, refused when made.
    with pytest.raises(SerializationError, match=r"OpenAI\('gpt-4o'\) settings\.user"):
        OpenAI("gpt-4o", user=object())


def test_a_message_without_a_role_is_named() -> None:
    with pytest.raises(ConfigurationError, match=r"messages\[1\] has no role"):
        OpenAI("gpt-4o", api_key="k").body([{"role": "user", "content": "a"}, {"content": "b"}], [])


@dataclass
class Order:
    id: str
    total: int


def test_content_that_is_not_text_goes_as_json() -> None:
    assert text_of("as is") == "as is"
    assert json.loads(text_of({"order": Order("A-1", 120), "tags": ("x",)})) == {
        "order": {"id": "A-1", "total": 120},
        "tags": ["x"],
    }


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),  # the finer one wins
        ({"retry-after": "7"}, 7.0),
        ({"retry-after": "0"}, 0.0),
        ({"retry-after": "-3"}, 0.0),
        ({"retry-after": "86400"}, MAX_RETRY_AFTER),  # a day (or a hostile header) is capped
        ({"retry-after": "nan"}, None),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, 0.0),  # a date in the past
        ({}, None),
    ],
)
def test_retry_after_is_read_from_the_providers_headers(
    headers: dict[str, str], seconds: float | None
) -> None:
    assert retry_after(headers) == seconds


def test_retry_after_as_a_date_to_come_counts_from_now() -> None:
    soon = datetime.now(timezone.utc) + timedelta(seconds=60)
    wait = retry_after({"retry-after": email.utils.format_datetime(soon, usegmt=True)})
    assert wait is not None and 50 < wait <= 60
