"""The stop checkpoint is written whatever the state's encoding raises, not only
SerializationError: a run must never be left running, with no owner, for a worker to
claim again and again. Here the state holds a registered dataclass whose field was
never set (``field(init=False)``): reading it raises AttributeError, the user's own."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from savegame import END, CheckpointPolicy, RunStatus, StepContext, Workflow, codec, resume, run
from savegame.client import get_checkpoint, get_run
from savegame.errors import StepError
from tests import services


@dataclass
class Job:
    name: str
    started: float = field(init=False)  # never set: reading it raises AttributeError


codec.register(Job, name="adversarial.Job")

BROKEN: dict[str, bool] = {"yes": True}

SAVES_IT = Workflow("adversarial-saves-job")


@SAVES_IT.step(entry=True)
def keep_job(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    return ({"job": Job("a")} if BROKEN["yes"] else {"job": "a"}), END


# Checkpoints every 5 steps: the job is in the state, not yet saved, when the next step
# fails, so the failure checkpoint is the one that meets it.
FAILS_AFTER = Workflow("adversarial-fails-after-job", policy=CheckpointPolicy.every_n_steps(5))


@FAILS_AFTER.step(entry=True)
def take_job(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    return ({"job": Job("a")} if BROKEN["yes"] else {"job": "a"}), "then_fail"


@FAILS_AFTER.step()
def then_fail(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    if BROKEN["yes"]:
        raise ValueError("the model is down")
    return {"done": True}, END


@pytest.mark.parametrize(
    ("workflow", "reason"),
    [(SAVES_IT, "AttributeError"), (FAILS_AFTER, "ValueError: the model is down")],
    ids=["the step's own checkpoint", "the failure checkpoint"],
)
def test_a_state_that_raises_anything_when_encoded_still_ends_the_run_failed(
    tmp_path: Path, workflow: Workflow, reason: str
) -> None:
    url = f"sqlite:///{tmp_path / 'stop.db'}"
    BROKEN["yes"] = True
    with pytest.raises(Exception) as info:
        run(workflow, {"n": 1}, store=url, run_id="r1")
    assert reason.split(":")[0] in repr(info.value)
    assert get_run("r1", store=url).status is RunStatus.FAILED
    head = get_checkpoint("r1", store=url)
    assert head.state == {"n": 1}  # the last good state, kept as the resume point
    assert head.metadata["error"].startswith(reason)
    BROKEN["yes"] = False
    assert resume("r1", workflow=workflow, store=url).status is RunStatus.COMPLETED


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message for you")


@pytest.mark.parametrize(
    ("raised", "stored", "backend"),
    [
        pytest.param(
            ValueError("bad input \ud800 from the user"), "ValueError: bad input \\ud800 from",
            "sqlite", id="a lone surrogate",
        ),
        *(
            # PostgreSQL's text refuses a NUL; every store must keep the same text.
            pytest.param(
                ValueError("a tool echoed bad\x00input"),
                "ValueError: a tool echoed bad\\x00input", backend, id=f"a NUL-{backend}",
            )
            for backend in sorted(services.BACKENDS)
        ),
        pytest.param(
            Unprintable(), "Unprintable: <Unprintable whose message cannot be shown>", "sqlite",
            id="a __str__ that raises",
        ),
    ],
)  # fmt: skip
def test_an_error_whose_message_cannot_be_stored_as_it_is_still_ends_the_run_failed(
    tmp_path: Path, raised: Exception, stored: str, backend: str
) -> None:
    """The failure checkpoint records the error's text; text no store takes is escaped
    (PostgreSQL's text refuses a NUL: the run stayed running, with no error recorded)."""
    wf = Workflow("adversarial-bad-message")

    @wf.step(entry=True)
    def fail(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        raise raised

    with services.scratch_store(backend, tmp_path) as store:
        with pytest.raises(StepError, match=stored.split(":")[0]):
            run(wf, {"n": 1}, store=store, run_id="r2")
        assert get_run("r2", store=store).status is RunStatus.FAILED
        assert get_checkpoint("r2", store=store).metadata["error"].startswith(stored)
        # The run row keeps the message without its type.
        assert stored.split(": ", 1)[1] in (store.get_run("r2").error or "")
