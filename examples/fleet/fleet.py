"""The project's workflow, in a module of its own, as a project keeps its code.

    python submit.py "my kettle arrived broken" "where is my order?"
    savegame worker --exit-when-idle 2     # in this folder: it imports fleet:wf from here
    savegame runs

``submit.py`` does ``from fleet import wf``, so each run stores its workflow as
``fleet:wf``. A worker imports that from its working directory (``--app-dir DIR`` to
name another folder; PYTHONPATH works too), or runs inside your own process
(``worker.py``). A worker that cannot import it leaves the runs queued and says so.
"""

from __future__ import annotations

from typing import Any

from savegame import END, StepContext, Workflow

wf = Workflow("tickets")

REPLIES = {
    "refund": "Sorry about that: your refund is on its way.",
    "question": "Thanks for asking: we answer within a day.",
}


@wf.step(entry=True)
def triage(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    text = state["text"].lower()
    broken = any(word in text for word in ("broken", "damaged", "refund"))
    return {"kind": "refund" if broken else "question"}, "answer"


@wf.step
def answer(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
    return {"reply": REPLIES[state["kind"]]}, END
