"""Someone with write access to the database but no key tries to steer a run.

Each attack edits stored rows directly (sqlite3 on the file, psycopg on the
schema), then lets savegame resume, replay or verify. With keys configured,
every field that decides what runs next or what a call returns is
authenticated, so each attack must be refused and named, and no payment may
happen twice. Without keys the same fields are inside the checksums, so an
accidental edit is caught the same way (a deliberate one can recompute an
unkeyed checksum: that is what keys are for, and one test shows it).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from savegame import END, StepContext, StorageConfig, Workflow, approve, reject, resume, run, tool
from savegame.client import compensate, get_checkpoint, history, verify
from savegame.codec import entry_checksum
from savegame.codec.crypto import Keyring
from savegame.errors import (
    CorruptRecordError,
    InDoubtEffectError,
    StepError,
    UnauthenticatedRecordError,
)
from savegame.model import RunStatus
from savegame.stores import open_store
from tests.adversarial.conftest import Raw

KEYS = StorageConfig(keyring=Keyring({"k1": os.urandom(32)}, active="k1"))
PLAIN = StorageConfig()
payments: list[dict[str, Any]] = []


@pytest.fixture(autouse=True)
def _clear() -> None:
    payments.clear()


@tool(effect="write", compensate="refund")
def pay(to: str, amount: int) -> str:
    payments.append({"to": to, "amount": amount})
    return f"paid {amount} to {to}"


@tool(effect="write", idempotent=True)
def refund(to: str, amount: int, *, result: str, request_id: str) -> str:
    return f"refunded {amount}"


@tool(effect="write", approval=True, name="pay_gated")
def pay_gated(to: str, amount: int) -> str:
    payments.append({"to": to, "amount": amount, "gated": True})
    return "paid"


def payout(gated: bool = False, fail_report: bool = False) -> Workflow:
    wf = Workflow("payout-gated" if gated else "payout")

    @wf.step(entry=True)
    def prepare(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"to": "bob", "amount": 150}, "pay_step"

    @wf.step()
    def pay_step(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        receipt = ctx.call(pay_gated if gated else pay, to=state["to"], amount=state["amount"])
        return {"receipt": receipt}, "report"

    @wf.step()
    def report(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        if fail_report:
            raise RuntimeError("the report service is down")
        return {"done": True}, END

    return wf


def _head(raw: Raw, run_id: str) -> str:
    [(head,)] = raw.execute("SELECT head_checkpoint_id FROM runs WHERE run_id = ?", (run_id,))
    return str(head)


@pytest.mark.parametrize("storage", [KEYS, PLAIN], ids=["keys", "plain"])
def test_a_head_edited_back_to_the_paying_step_is_refused(raw: Raw, storage: StorageConfig) -> None:
    wf = payout()
    done = run(wf, run_id="r", store=raw.url, storage=storage)
    assert done.status is RunStatus.COMPLETED and len(payments) == 1
    head = _head(raw, "r")
    raw.execute(
        "UPDATE checkpoints SET next = 'pay_step', status = 'running' WHERE checkpoint_id = ?",
        (head,),
    )
    raw.execute("UPDATE runs SET status = 'running' WHERE run_id = 'r'")
    with pytest.raises(CorruptRecordError, match=head):
        resume("r", store=raw.url, workflow=wf, storage=storage)
    assert len(payments) == 1
    damaged = {(d.kind, d.ident) for d in verify(store=raw.url, storage=storage).damaged}
    assert ("checkpoint", head) in damaged


@pytest.mark.parametrize("column", ["usage", "metadata", "step", "node", "parent_id"])
def test_any_edited_header_column_is_caught_by_load_and_verify(raw: Raw, column: str) -> None:
    run(payout(), run_id="r", store=raw.url, storage=PLAIN)
    head = _head(raw, "r")
    value = {
        "usage": '{"input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0, "llm_calls": 0, "tool_calls": 0}',
        "metadata": '{"approved": true}',
        "step": 1,
        "node": "prepare",
        "parent_id": None,
    }[column]
    if raw.kind == "postgres" and column in ("usage", "metadata"):
        raw.execute(
            f"UPDATE checkpoints SET {column} = ?::json WHERE checkpoint_id = ?", (value, head)
        )
    else:
        raw.execute(f"UPDATE checkpoints SET {column} = ? WHERE checkpoint_id = ?", (value, head))
    with pytest.raises(CorruptRecordError, match=head):
        get_checkpoint("r", store=raw.url, storage=PLAIN)
    assert not verify(store=raw.url, storage=PLAIN).ok


def test_a_format_downgrade_is_refused(raw: Raw) -> None:
    """Format 2 and 3 checked less of the header; a v4 record cannot pass for one."""
    run(payout(), run_id="r", store=raw.url, storage=KEYS)
    head = _head(raw, "r")
    for older in (2, 3):
        raw.execute(
            "UPDATE checkpoints SET format_version = ? WHERE checkpoint_id = ?", (older, head)
        )
        with pytest.raises(CorruptRecordError, match=head):
            get_checkpoint("r", store=raw.url, storage=KEYS)


def test_a_pending_approval_set_to_done_never_runs_the_gated_tool(raw: Raw) -> None:
    wf = payout(gated=True)
    assert run(wf, run_id="r", store=raw.url, storage=KEYS).status is RunStatus.INTERRUPTED
    [(approval,)] = raw.execute("SELECT request_id FROM effects WHERE kind = 'approval'")
    raw.execute("UPDATE effects SET status = 'done' WHERE request_id = ?", (approval,))
    with pytest.raises(CorruptRecordError, match=approval):
        resume("r", store=raw.url, workflow=wf, storage=KEYS)
    assert payments == []
    damaged = {(d.kind, d.ident) for d in verify(store=raw.url, storage=KEYS).damaged}
    assert ("effect", f"r/{approval}") in damaged


def test_an_attacker_who_recomputes_an_unkeyed_check_is_still_refused(raw: Raw) -> None:
    """Without the key only an unkeyed check can be made, and with keys it does not count."""
    wf = payout(gated=True)
    run(wf, run_id="r", store=raw.url, storage=KEYS)
    with open_store(raw.url) as store:
        [entry] = [e for e in store.list_effects("r") if e.kind.value == "approval"]
    forged = replace(entry, status=type(entry.status)("done"))
    check = entry_checksum(forged, PLAIN)  # what anyone can compute from the code
    raw.execute(
        "UPDATE effects SET status = 'done', checksum = ? WHERE request_id = ?",
        (check, entry.request_id),
    )
    with pytest.raises(UnauthenticatedRecordError, match=entry.request_id):
        resume("r", store=raw.url, workflow=wf, storage=KEYS)
    assert payments == []


def test_a_completed_write_set_to_not_done_is_not_paid_again_on_replay(raw: Raw) -> None:
    wf = payout(fail_report=True)
    with pytest.raises(StepError):
        run(wf, run_id="r", store=raw.url, storage=KEYS)  # failed after paying: resumable
    [(request_id,)] = raw.execute("SELECT request_id FROM effects WHERE name = 'pay'")
    raw.execute("UPDATE effects SET status = 'not_done' WHERE request_id = ?", (request_id,))
    first = history("r", store=raw.url, storage=KEYS)[-1].checkpoint_id
    with pytest.raises(CorruptRecordError, match=request_id):
        resume("r", store=raw.url, workflow=wf, storage=KEYS, from_checkpoint=first)
    assert len(payments) == 1


def test_an_edited_compensation_flag_does_not_pick_the_undo(raw: Raw) -> None:
    """Which tool undoes a write is read from the journal: an edit there is refused."""
    wf = payout()
    run(wf, run_id="r", store=raw.url, storage=KEYS)
    metadata = '{"idempotent": false, "compensate": "drop_database"}'
    cast = "?::json" if raw.kind == "postgres" else "?"
    raw.execute(f"UPDATE effects SET metadata = {cast} WHERE name = 'pay'", (metadata,))
    with pytest.raises(CorruptRecordError):
        compensate("r", store=raw.url, storage=KEYS)


def test_a_run_row_that_disagrees_with_its_head_is_refused(raw: Raw) -> None:
    wf = payout(gated=True)
    run(wf, run_id="r", store=raw.url, storage=KEYS)
    reject("r", reason="no", store=raw.url, storage=KEYS)
    raw.execute("UPDATE runs SET status = 'failed' WHERE run_id = 'r'")
    with pytest.raises(CorruptRecordError, match="its row says failed"):
        resume("r", store=raw.url, workflow=wf, storage=KEYS)


# -- the workflow reference: a forged one would be code execution ----------------------
FLOW = """
from savegame import END, Workflow, tool

@tool(effect="write", idempotent=True)
def undo(*, result: object, request_id: str) -> None:
    return None

@tool(effect="write", compensate="undo")
def work(n: int) -> int:
    return n

wf = Workflow("forged-ref")

@wf.step(entry=True)
def first(state, ctx):
    return {"n": ctx.call(work, 1)}, "second"

@wf.step()
def second(state, ctx):
    ctx.interrupt("wait")
    return {}, END
"""

EVIL = """
from pathlib import Path
Path(__file__).with_name("PWNED").write_text("imported")
from savegame import END, Workflow
wf = Workflow("forged-ref")
"""


@pytest.mark.parametrize("storage", [KEYS, PLAIN], ids=["keys", "plain"])
def test_a_forged_workflow_reference_is_never_imported(
    raw: Raw, tmp_path: Path, storage: StorageConfig
) -> None:
    flow, evil = tmp_path / "flow.py", tmp_path / "evil.py"
    flow.write_text(FLOW)
    evil.write_text(EVIL)
    with open_store(raw.url) as store:
        from savegame.runtime import load

        started = run(load(f"{flow}:wf"), run_id="r", store=store, storage=storage)
        assert started.status is RunStatus.INTERRUPTED
        assert store.get_run("r").workflow_ref == f"{flow}:wf"
    raw.execute("UPDATE runs SET workflow_ref = ? WHERE run_id = 'r'", (f"{evil}:wf",))
    with pytest.raises(CorruptRecordError, match="run r"):
        resume("r", store=raw.url, value="go", storage=storage)
    with pytest.raises(CorruptRecordError, match="run r"):
        compensate("r", store=raw.url, storage=storage)
    assert not (tmp_path / "PWNED").exists()


def test_a_run_row_without_a_keyed_check_is_refused_under_keys(raw: Raw) -> None:
    """Blanking the check does not pass either, and a key rotation does not sign it: rekey
    vouches only for what is authenticated, unless a person adopts the rest."""
    wf = payout(gated=True)
    run(wf, run_id="r", store=raw.url, storage=KEYS)
    approve("r", store=raw.url, storage=KEYS)
    raw.execute("UPDATE runs SET checksum = '' WHERE run_id = 'r'")
    with pytest.raises(UnauthenticatedRecordError, match="savegame rekey --adopt"):
        resume("r", store=raw.url, workflow=wf, storage=KEYS)
    assert payments == []
    from savegame.client import rekey

    [skipped] = rekey(store=raw.url, storage=KEYS).skipped
    assert skipped.run_id == "r" and "without a keyed check" in skipped.reason
    with pytest.raises(UnauthenticatedRecordError):
        resume("r", store=raw.url, workflow=wf, storage=KEYS)
    assert rekey(store=raw.url, storage=KEYS, adopt=True).adopted == 1  # a person vouched
    assert resume("r", store=raw.url, workflow=wf, storage=KEYS).status is RunStatus.COMPLETED
    assert len(payments) == 1


def test_a_key_rotation_does_not_sign_forged_records(raw: Raw, tmp_path: Path) -> None:
    """A forged approval (an unkeyed check) and a forged workflow reference (a blanked
    row check) are refused before the rotation, and still refused after it."""
    flow, evil = tmp_path / "flow.py", tmp_path / "evil.py"
    flow.write_text(FLOW)
    evil.write_text(EVIL)
    from savegame.client import rekey
    from savegame.runtime import load

    run(load(f"{flow}:wf"), run_id="r", store=raw.url, storage=KEYS)
    with open_store(raw.url) as store:
        [entry] = [e for e in store.list_effects("r") if e.kind.value == "interrupt"]
    forged = replace(entry, status=type(entry.status)("done"))
    raw.execute(
        "UPDATE effects SET status = 'done', checksum = ? WHERE request_id = ?",
        (entry_checksum(forged, PLAIN), entry.request_id),
    )
    raw.execute(
        "UPDATE runs SET workflow_ref = ?, checksum = '' WHERE run_id = 'r'", (f"{evil}:wf",)
    )
    k2 = StorageConfig(
        keyring=Keyring({"k2": os.urandom(32), **KEYS.keyring.keys}, active="k2")  # type: ignore[union-attr]
    )
    report = rekey(store=raw.url, storage=k2)
    assert [s.run_id for s in report.skipped] == ["r"]
    with pytest.raises(UnauthenticatedRecordError):
        resume("r", store=raw.url, storage=k2)
    assert not (tmp_path / "PWNED").exists()


# -- no plaintext copy of an encrypted value ------------------------------------------
MARKER = "SECRET-4242-MARKER"


@tool(effect="write", compensate="release")
def send_card(card: str) -> str:
    raise TimeoutError(f"no answer for card {card}")


@tool(effect="write", name="book")
def book(card: str) -> str:
    return "booked"


@tool(effect="write", name="release")
def release(card: str, *, result: str) -> str:
    raise RuntimeError(f"release failed for {card}")


@tool(effect="write", approval=True, name="gated_card")
def gated_card(card: str) -> str:
    return "ok"


def test_no_plaintext_copy_of_an_encrypted_value_is_written(raw: Raw) -> None:
    """With keys, error texts, reasons and decisions are sealed like the values they repeat.

    The marker is only ever in encrypted places (the state, call arguments, exception
    messages that repeat them, a reject reason); the whole database must not contain it.
    """
    in_doubt = Workflow("in-doubt")

    @in_doubt.step(entry=True)
    def charge(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"r": ctx.call(send_card, state["card"])}, END

    failing = Workflow("failing", compensate_on_failure=True)

    @failing.step(entry=True)
    def books(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        ctx.call(book, state["card"])
        raise ValueError(f"card {state['card']} declined")

    @tool(effect="write", name="book", compensate="release")
    def book_undoable(card: str) -> str:
        return "booked"

    failing_undo = Workflow("failing-undo", compensate_on_failure=True)

    @failing_undo.step(entry=True)
    def books2(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        ctx.call(book_undoable, state["card"])
        raise ValueError(f"card {state['card']} declined")

    gated = Workflow("gated")

    @gated.step(entry=True)
    def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        try:
            return {"r": ctx.call(gated_card, state["card"])}, END
        except Exception as exc:
            raise ValueError(f"stopped: {exc}") from exc

    card = {"card": MARKER}
    with pytest.raises(InDoubtEffectError):
        run(in_doubt, card, run_id="doubt", store=raw.url, storage=KEYS)
    with pytest.raises(Exception, match="declined"):
        run(failing, card, run_id="fail", store=raw.url, storage=KEYS)
    with pytest.raises(Exception, match="release failed"):
        run(failing_undo, card, run_id="undo", store=raw.url, storage=KEYS)
    run(gated, card, run_id="gate", store=raw.url, storage=KEYS)
    reject("gate", reason=f"not with {MARKER}", store=raw.url, storage=KEYS)
    with pytest.raises(Exception, match="stopped"):
        resume("gate", store=raw.url, workflow=gated, storage=KEYS)
    dumped = raw.dump()
    assert MARKER.encode() not in dumped
    # And a person with the key still reads every message.
    from savegame.client import get_run, list_effects

    assert MARKER in (get_run("doubt", store=raw.url, storage=KEYS).error or "")
    shown = history("fail", store=raw.url, storage=KEYS)
    assert any(MARKER in str(h.metadata.get("error", "")) for h in shown)
    errors = [e.error or "" for e in list_effects("gate", store=raw.url, storage=KEYS)]
    assert any(MARKER in text for text in errors)


def test_a_flipped_byte_in_a_journal_result_is_not_replayed(raw: Raw) -> None:
    """Plain store, accidental damage: a journal entry is checked where it is read, so
    ``resume --from`` refuses it instead of handing the step a damaged result."""
    wf = payout(fail_report=True)
    with pytest.raises(StepError):
        run(wf, run_id="r", store=raw.url, storage=PLAIN)
    [(request_id, result)] = raw.execute(
        "SELECT request_id, result FROM effects WHERE name = 'pay'"
    )
    flipped = bytearray(bytes(result))
    flipped[len(flipped) // 2] ^= 0x01
    raw.execute("UPDATE effects SET result = ? WHERE request_id = ?", (bytes(flipped), request_id))
    first = history("r", store=raw.url, storage=PLAIN)[-1].checkpoint_id
    with pytest.raises(CorruptRecordError, match=request_id):
        resume("r", store=raw.url, workflow=wf, storage=PLAIN, from_checkpoint=first)
    assert len(payments) == 1
