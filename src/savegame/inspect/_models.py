"""A run's model calls for people: what each model was asked and answered, and what the
run's calls used and cost, per model.

Read from the run's journal (:mod:`savegame.effects._prompts` keeps each request there,
every message once per run), so it shows replayed and reused calls as the run saw
them, and needs no other run: a fork's journal holds what its reused calls were asked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from savegame.codec import decode_value, open_entry
from savegame.codec.storage import StorageConfig
from savegame.effects import (
    ABANDONED,
    REPLAY_KEY,
    REUSED,
    STREAM_MARK,
    AskedRequest,
    ModelResponse,
    as_response,
    asked,
    is_stream_marker,
)
from savegame.model import EffectKind, EffectStatus
from savegame.stores import Store
from savegame.stores.base import ALL_EFFECTS


@dataclass(frozen=True, slots=True)
class ModelCallRecord:
    """One model call of a run, as its journal keeps it."""

    run_id: str
    request_id: str
    step: int
    node: str
    """The step that made the call."""
    model: str
    """The model's name (the journal entry is ``llm:<model>``)."""
    status: EffectStatus
    request: AskedRequest | None
    """What the model was asked (messages, tool specs, parameters); None for a call
    journaled before requests were recorded."""
    response: ModelResponse | None
    """What it answered; None while nothing was recorded."""
    reused: bool
    """A fork's call answered from its origin's journal: not paid again."""
    abandoned_streams: int
    """Streams of this call a crash cut off before it was answered: nothing was recorded,
    the model was asked again (each probably paid)."""
    created_at: datetime
    completed_at: datetime | None


@dataclass(frozen=True, slots=True)
class ModelUsage:
    """What one model's calls in a run used and cost."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    cost_usd: float | None = 0.0
    """What the calls cost; None when a call's price was unknown, as for the run's
    ``Usage.cost_usd`` (each call's own price is in ``model_calls``)."""
    unpriced_calls: int = 0
    """Calls whose price was unknown."""

    def add(self, response: ModelResponse) -> ModelUsage:
        mine, theirs = self.cost_usd, response.cost_usd
        cost = None if mine is None or theirs is None else round(mine + theirs, 10)
        return ModelUsage(
            self.calls + 1,
            self.input_tokens + response.input_tokens,
            self.output_tokens + response.output_tokens,
            self.cached_tokens + response.cached_tokens,
            cost,
            self.unpriced_calls + (response.cost_usd is None),
        )


@dataclass(frozen=True, slots=True)
class RunModelUsage:
    """A run's model usage: in all, and per model, of the calls the run paid for."""

    total: ModelUsage = field(default_factory=ModelUsage)
    models: dict[str, ModelUsage] = field(default_factory=dict)
    reused: ModelUsage = field(default_factory=ModelUsage)
    """A fork's calls answered from its origin's journal: the origin paid for them, so
    they are not in ``total`` (the run's ``Usage`` counts them, as it counts replays)."""


def model_calls(
    run_id: str, *, store: Store, storage: StorageConfig | None = None
) -> list[ModelCallRecord]:
    """A run's model calls, oldest first, each with its request and response (verified and
    decrypted like every journal entry). Raises NotFoundError for an unknown run.

    The operation behind :meth:`savegame.Savegame.model_calls`, which documents it, on the
    open ``store``.
    """
    store.get_run(run_id)
    entries = [open_entry(e, storage) for e in store.list_effects(run_id, limit=ALL_EFFECTS)]
    requests = asked(entries)
    abandoned: dict[str, int] = {}
    for entry in entries:
        if is_stream_marker(entry) and entry.error == ABANDONED:
            call_id = entry.request_id.split(STREAM_MARK)[0]
            abandoned[call_id] = abandoned.get(call_id, 0) + 1
    calls = []
    for entry in entries:
        if entry.kind is not EffectKind.LLM or is_stream_marker(entry):
            continue
        result: Any = decode_value(entry.result) if entry.result is not None else None
        calls.append(
            ModelCallRecord(
                entry.run_id,
                entry.request_id,
                entry.step,
                entry.node,
                entry.name.removeprefix("llm:"),
                entry.status,
                requests.get(entry.request_id),
                as_response(result, 0) if isinstance(result, dict) else None,
                entry.metadata.get(REPLAY_KEY) == REUSED,
                abandoned.get(entry.request_id, 0),
                entry.created_at,
                entry.completed_at,
            )
        )
    return calls


def model_usage(
    run_id: str, *, store: Store, storage: StorageConfig | None = None
) -> RunModelUsage:
    """What a run's model calls used (input, output and cached tokens) and cost, in all and per
    model, from the responses its journal recorded. A call the run replayed after a crash is
    in its journal once, so it counts once.

    The operation behind :meth:`savegame.Savegame.model_usage`, which documents it, on the
    open ``store``.
    """
    total, reused = ModelUsage(), ModelUsage()
    models: dict[str, ModelUsage] = {}
    for call in model_calls(run_id, store=store, storage=storage):
        if call.response is None:
            continue
        if call.reused:
            reused = reused.add(call.response)
            continue
        total = total.add(call.response)
        models[call.model] = models.get(call.model, ModelUsage()).add(call.response)
    return RunModelUsage(total, models, reused)
