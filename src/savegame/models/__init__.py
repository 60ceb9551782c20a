"""Model adapters: ChatModels over the vendors' SDKs, each an optional extra.

``OpenAI`` (``savegame[openai]``: Chat Completions and the Responses API, any
OpenAI-compatible server by ``base_url``), ``Anthropic`` (``savegame[anthropic]``) and
``LiteLLM`` (``savegame[litellm]``). Importing this package imports no SDK: each
adapter imports its own at its first call, and says which extra to install when it
is missing. A provider's failure is a ``ModelTransientError`` (rate limit, 5xx, a lost
connection: a step's ``retries`` retry it) or a ``ModelRequestError`` (4xx: not
retried). Each adapter also streams (``ctx.llm(..., stream=on_chunk)``). ``Price``
overrides LiteLLM's model cost map, which prices calls by default. ``LocalServer``
(``savegame[local]``) serves a real small model on this machine's CPU that every
adapter reaches by ``base_url``.
"""

from savegame.models._anthropic import Anthropic
from savegame.models._litellm import LiteLLM
from savegame.models._local import LocalServer
from savegame.models._openai import OpenAI
from savegame.models._prices import Price, lookup_price

__all__ = ["Anthropic", "LiteLLM", "LocalServer", "OpenAI", "Price", "lookup_price"]
