"""Secrets never reach a snapshot: only names are saved, values come from the provider again."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from savegame import END, CheckpointPolicy, StepContext, Store, Workflow, resume, run
from savegame.client import get_checkpoint
from savegame.errors import ConfigurationError, StepError
from savegame.secrets import DictSecrets, EnvSecrets, Secret, set_provider


@pytest.fixture(autouse=True)
def provider() -> Iterator[DictSecrets]:
    values = DictSecrets({"STRIPE_KEY": "sk_live_123", "OPENAI_API_KEY": "sk-abc"})
    set_provider(values)
    yield values
    set_provider(EnvSecrets())


def raw_payloads(store: Store, run_id: str) -> bytes:
    return b"".join(
        store.get_checkpoint(h.checkpoint_id).payload for h in store.list_checkpoints(run_id)
    )


def test_ctx_secret_is_saved_by_name_only(store: Store) -> None:
    wf = Workflow("pay")
    seen: list[str] = []
    fail = {"on": True}

    @wf.step(entry=True)
    def setup(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"stripe": ctx.secret("STRIPE_KEY")}, "charge"

    @wf.step
    def charge(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        if fail["on"]:
            raise RuntimeError("network down")
        seen.append(state["stripe"].reveal())
        return {"charged": True}, END

    with pytest.raises(StepError):
        run(wf, run_id="p", store=store)
    assert b"sk_live_123" not in raw_payloads(store, "p")
    saved = get_checkpoint("p", store=store).state["stripe"]
    assert saved == Secret("STRIPE_KEY") and "sk_live" not in repr(saved)
    fail["on"] = False
    resume("p", store=store, workflow=wf)
    assert seen == ["sk_live_123"]  # resolved again at resume


def test_declared_secret_fields_are_replaced_when_saved(store: Store) -> None:
    wf = Workflow("llm", secrets={"api_key": "OPENAI_API_KEY"})

    @wf.step(entry=True)
    def call(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        assert state["api_key"] == "sk-abc"
        return {"used": len(state["api_key"])}, "again"

    @wf.step
    def again(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        assert state["api_key"] == "sk-abc"
        raise RuntimeError("stop")

    with pytest.raises(StepError):
        run(wf, {"api_key": "sk-abc"}, run_id="l", store=store)
    assert b"sk-abc" not in raw_payloads(store, "l")
    assert get_checkpoint("l", store=store).state["api_key"] == Secret("OPENAI_API_KEY")
    with pytest.raises(StepError, match="stop"):
        resume("l", store=store, workflow=wf)  # the step saw the value again


def test_a_missing_secret_fails_at_the_step_that_asks(store: Store) -> None:
    wf = Workflow("missing")

    @wf.step(entry=True)
    def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"k": ctx.secret("NOPE")}, END

    with pytest.raises(ConfigurationError, match="secret 'NOPE' is not available"):
        run(wf, store=store)


def test_checkpoint_ttl_sets_expires_at(store: Store) -> None:
    wf = Workflow("ttl")

    @wf.step(entry=True)
    def go(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"x": 1}, END

    result = run(wf, store=store, policy=CheckpointPolicy(ttl=3600))
    head = store.list_checkpoints(result.run_id)[0]
    assert head.expires_at is not None
    assert timedelta(seconds=3590) < head.expires_at - head.created_at <= timedelta(seconds=3600)
    with pytest.raises(ConfigurationError, match="ttl must be > 0"):
        CheckpointPolicy(ttl=0)
