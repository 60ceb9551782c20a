"""What a model was asked, kept in its journal entry without copying the conversation each turn.

A checkpoint without the prompt hides what a model was asked; but an agent sends its
whole conversation at every turn, so an entry that kept its messages in full would
make a run of ``n`` turns store ``n * n / 2`` messages. A model call's entry therefore
names its messages, its tool specs and its parameters by digest (*parts*), and holds in
full (``new``) only the parts no earlier model call of the same run's journal holds:
each message is stored once per run, and what the journal grows by is what changed.

A run's journal is self-contained: reading what its model calls were asked needs that
journal and nothing else. A fork's reused entry is a copy of its origin's, whose
parts may sit in an origin entry before the fork point; the copy is given them
(:func:`with_parts`), so a fork's prompts stay readable when its origin is pruned.

Why not the store's blobs: a blob lives as long as a checkpoint refers to it, and a
model call's entry is committed before its step's checkpoint (and without one, when
the process dies first); parts inside the entry are sealed (encrypted with a keyring)
and checked with it, like every other argument.

The entry's ``digest`` (what a replay compares) and summary are as they were; the
request sits beside them under :data:`REQUEST`, so entries written before it replay,
and read as "request not recorded".
"""

from __future__ import annotations

import hashlib
import re
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from savegame.codec import canonical, decode_value, encode_value
from savegame.effects._llm import Message, ModelCall
from savegame.model import EffectKind, EffectRecord

REQUEST = "request"
"""The key of a model call entry's arguments that holds its request."""
STREAM_MARK = ":stream:"
"""Between a model call's request id and a stream's number, in the id of the marker a
streamed call's attempt leaves (:mod:`savegame.effects._streams`)."""


def is_stream_marker(entry: EffectRecord) -> bool:
    return entry.kind is EffectKind.LLM and STREAM_MARK in entry.request_id


def part_id(value: Any) -> str:
    """The digest a part is named by (of its canonical encoding)."""
    return hashlib.blake2b(canonical(value), digest_size=12).hexdigest()


def spec_data(call: ModelCall) -> list[dict[str, Any]]:
    return [
        {"name": s.name, "description": s.description, "parameters": s.parameters}
        for s in call.specs
    ]


NOT_RECORDED = "(not recorded)"
"""What the journal keeps in place of a credential in a model's parameters."""

_HIDDEN_VALUES = re.compile(r"(^|_)(headers|query)$")
"""Parameters whose values are all hidden, their names kept: a gateway's
``Authorization`` header, a key in ``extra_query``."""
_HIDDEN = re.compile(r"(^|_)(api_key|authorization|password|secret|token)$", re.IGNORECASE)


def recordable(params: Mapping[str, Any]) -> dict[str, Any]:
    """A model's ``params`` as its journal entries keep them: no credentials.

    The adapters never put ``api_key`` in ``params``, but settings pass through as given
    (``extra_headers={"Authorization": ...}``, pydantic-ai's ``ModelSettings`` too) and a
    server's URL may carry ``user:password@``. Hidden here, in the one place every model
    call's request is recorded, whatever the model: the headers' and query's names stay
    (what was sent is still visible), their values do not; userinfo leaves every URL.
    """
    out: dict[str, Any] = {}
    for key, value in params.items():
        if _HIDDEN.search(str(key)):
            out[key] = NOT_RECORDED
        elif _HIDDEN_VALUES.search(str(key)) and isinstance(value, Mapping):
            out[key] = {name: NOT_RECORDED for name in value}
        else:
            out[key] = _without_userinfo(value)
    return out


def _hidden_below(value: Any) -> Any:
    """``value`` with the credentials of the mappings inside it hidden: a key nested in a
    setting (``extra_body={"api_key": ...}``, a gateway's) is a key all the same."""
    if isinstance(value, Mapping):
        return recordable(value)
    if isinstance(value, (list, tuple)):
        return [_hidden_below(item) for item in value]
    return value


def _without_userinfo(value: Any) -> Any:
    if isinstance(value, str):
        if "@" not in value or "://" not in value:
            return value
        try:
            parts = urllib.parse.urlsplit(value)
        except ValueError:
            return value
        if parts.username is None and parts.password is None:
            return value
        return urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    return _hidden_below(value)


def request_of(call: ModelCall, known: set[str]) -> dict[str, Any]:
    """The request to record for ``call``: its parts by digest, the ones ``known`` lacks in full."""
    new: dict[str, Any] = {}

    def ref(value: Any) -> str:
        key = part_id(value)
        if key not in known:
            new[key] = value
        return key

    return {
        "messages": [ref(m) for m in call.messages],
        "tools": [ref(spec) for spec in spec_data(call)],
        "params": ref(recordable(call.params)) if call.params else None,
        "new": new,
    }


def _request(entry: EffectRecord) -> dict[str, Any] | None:
    if entry.kind is not EffectKind.LLM:
        return None
    arguments = decode_value(entry.arguments)
    if not isinstance(arguments, dict):
        return None
    request = arguments.get(REQUEST)
    return request if isinstance(request, dict) else None


def parts_of(entry: EffectRecord) -> dict[str, Any]:
    """The parts ``entry`` holds in full (none for other entries, or older model calls)."""
    request = _request(entry)
    new = request.get("new") if request else None
    return dict(new) if isinstance(new, dict) else {}


def _named(request: Mapping[str, Any]) -> set[str]:
    named = {*request.get("messages", ()), *request.get("tools", ())}
    if request.get("params"):
        named.add(request["params"])
    return named


def with_parts(entry: EffectRecord, known: set[str], source: Mapping[str, Any]) -> EffectRecord:
    """``entry`` (a copy from another run's journal) holding in full every part it names
    that ``known`` (the parts of the journal it goes into) lacks, taken from ``source``
    (the parts of the journal it comes from)."""
    arguments = decode_value(entry.arguments)
    request = _request(entry)
    if request is None or not isinstance(arguments, dict):
        return entry
    new = dict(request.get("new") or {})
    missing = _named(request) - known - new.keys()
    if not missing & source.keys():
        return entry
    new.update({key: source[key] for key in sorted(missing & source.keys())})
    arguments = {**arguments, REQUEST: {**request, "new": new}}
    return replace(entry, arguments=encode_value(arguments, "arguments"))


@dataclass(frozen=True, slots=True)
class AskedRequest:
    """What one model call was asked, put back together from its run's journal."""

    messages: list[Message]
    tools: list[dict[str, Any]]
    """The tool specs: name, description, JSON schema of the arguments."""
    params: dict[str, Any]
    missing: list[str]
    """Parts the journal does not hold (an edited or truncated journal): empty normally."""


def asked(entries: Iterable[EffectRecord]) -> dict[str, AskedRequest | None]:
    """Each model call entry's request, by request id: None where the entry recorded none."""
    entries = list(entries)
    parts: dict[str, Any] = {}
    for entry in entries:
        parts.update(parts_of(entry))
    out: dict[str, AskedRequest | None] = {}
    for entry in entries:
        if entry.kind is not EffectKind.LLM or is_stream_marker(entry):
            continue
        request = _request(entry)
        if request is None:
            out[entry.request_id] = None
            continue
        missing = sorted(_named(request) - parts.keys())
        params = parts.get(request["params"]) if request.get("params") else None
        out[entry.request_id] = AskedRequest(
            [parts[k] for k in request.get("messages", ()) if k in parts],
            [parts[k] for k in request.get("tools", ()) if k in parts],
            dict(params or {}),
            missing,
        )
    return out
