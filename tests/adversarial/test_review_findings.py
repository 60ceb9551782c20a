"""What a second adversarial review found after the trust work, each kept as an attack.

A value for ``ctx.interrupt`` answered another question; a reconcile that raised, or
a store that could not record a write's result, handed the step an ordinary
exception (its fallback then charged again); compensation passed over a write in
doubt; an edit with a typo left a run stuck; a duplicated key id picked the old
key; rekey stopped at the first damaged run, rekeyed under a live owner, and
verify stopped at a forged key id; one bad pending entry hid every other.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from savegame import (
    END,
    RunStatus,
    StepContext,
    StorageConfig,
    Workflow,
    approve,
    resolve,
    resume,
    run,
    tool,
)
from savegame.client import cancel, get_run, pending_interrupts, rekey, verify
from savegame.codec.crypto import Keyring
from savegame.errors import ConfigurationError, InDoubtEffectError, NonDeterminismError
from savegame.stores import SqliteStore, open_store
from tests.adversarial.conftest import Raw

KEYS = StorageConfig(keyring=Keyring({"k1": os.urandom(32)}, active="k1"))
charged: list[str] = []


@pytest.fixture(autouse=True)
def _clear() -> None:
    charged.clear()


def test_an_interrupts_value_answers_only_the_question_a_person_saw(raw: Raw) -> None:
    config = {"amount": 150}

    @tool(effect="write", name="charge_for_interrupt")
    def charge(amount: int) -> str:
        charged.append(f"charge {amount}")
        return "ok"

    wf = Workflow("confirm")

    @wf.step(entry=True)
    def confirm(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        answer = ctx.interrupt({"confirm_payment": config["amount"]}, name="confirm_payment")
        if answer == "yes":
            ctx.call(charge, config["amount"])
        return {"answer": answer}, END

    run(wf, run_id="c", store=raw.url)
    [waiting] = pending_interrupts("c", store=raw.url)
    assert waiting.payload == {"confirm_payment": 150}
    config["amount"] = 1_000_000  # a redeploy, before the answer arrives
    with pytest.raises(NonDeterminismError, match="1000000"):
        resume("c", value="yes", store=raw.url, workflow=wf)
    assert charged == []
    config["amount"] = 150
    assert resume("c", store=raw.url, workflow=wf).state == {"answer": "yes"}
    assert charged == ["charge 150"]


def _with_fallback(primary: Any) -> Workflow:
    """A step that falls back to another provider when the first call raises."""
    wf = Workflow("fallback")

    @tool(effect="write", name="charge_backup")
    def backup(amount: int) -> str:
        charged.append("backup")
        return "backup"

    @wf.step(entry=True)
    def pay(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        try:
            return {"paid": ctx.call(primary, 40)}, END
        except Exception:
            return {"paid": ctx.call(backup, 40)}, END

    return wf


def test_a_reconcile_that_raises_on_resume_keeps_the_write_in_doubt(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'r.db'}"

    def lookup(request_id: str) -> str | None:
        raise ConnectionError("the provider's status page is down too")

    class Crash(BaseException):
        pass

    crash = {"on": True}

    @tool(effect="write", reconcile=lookup, name="charge_main")
    def main(amount: int) -> str:
        charged.append("main")
        if crash["on"]:
            raise Crash()  # the process dies mid-call: the intent is journaled, no result
        return "main"

    wf = _with_fallback(main)
    with pytest.raises(Crash):
        run(wf, run_id="f", store=url)
    crash["on"] = False
    with pytest.raises(InDoubtEffectError, match="ConnectionError"):
        resume("f", store=url, workflow=wf)
    assert charged == ["main"]  # neither again nor the fallback
    assert get_run("f", store=url).status is RunStatus.NEEDS_ATTENTION


class ResultsFail(SqliteStore):
    """A real store that cannot record a write's result (its disk filled up meanwhile)."""

    def record_result(self, *args: Any, **kwargs: Any) -> Any:
        raise OSError(28, "No space left on device")


def test_a_write_whose_result_cannot_be_recorded_is_in_doubt(tmp_path: Path) -> None:
    @tool(effect="write", name="charge_main")
    def main(amount: int) -> str:
        charged.append("main")
        return "main"

    store = ResultsFail(tmp_path / "r.db")
    try:
        with pytest.raises(InDoubtEffectError, match="No space left"):
            run(_with_fallback(main), run_id="f", store=store)
        assert charged == ["main"]  # the fallback did not charge a second time
        assert store.get_run("f").status is RunStatus.NEEDS_ATTENTION
    finally:
        store.close()


def test_compensation_stops_at_a_compensable_write_in_doubt(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'c.db'}"

    @tool(effect="write", idempotent=True, name="refund_it")
    def refund_it(amount: int, *, request_id: str) -> str:
        charged.append(f"refund {amount}")
        return "refunded"

    @tool(effect="write", compensate="refund_it", name="charge_it")
    def charge_it(amount: int) -> str:
        charged.append(f"charge {amount}")
        raise TimeoutError("no answer")

    wf = Workflow("doubtful-saga")

    @wf.step(entry=True)
    def go(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        ctx.call(charge_it, 25)
        return {}, END

    with pytest.raises(InDoubtEffectError):
        run(wf, run_id="s", store=url)
    with pytest.raises(InDoubtEffectError, match="charge_it"):
        cancel("s", store=url, compensate_effects=True)
    assert charged == ["charge 25"]  # not refunded blindly, not left out silently
    resolve("s", "s:1:0", done=True, result="ch_1", store=url)
    from savegame.client import compensate

    assert compensate("s", store=url).status is RunStatus.COMPENSATED
    assert charged == ["charge 25", "refund 25"]


def test_an_edit_the_tool_cannot_take_is_refused_before_it_is_recorded(tmp_path: Path) -> None:
    flow = tmp_path / "edits.py"
    flow.write_text(
        "from savegame import END, Workflow, tool\n"
        "@tool(effect='write', approval=True)\n"
        "def pay_edit(to: str, amount: int) -> str:\n"
        "    return f'{amount} to {to}'\n"
        "wf = Workflow('edits')\n"
        "@wf.step(entry=True)\n"
        "def go(state, ctx):\n"
        "    return {'paid': ctx.call(pay_edit, to='bob', amount=150)}, END\n"
    )
    url = f"sqlite:///{tmp_path / 'e.db'}"
    from savegame.runtime import load

    run(load(f"{flow}:wf"), run_id="e", store=url)
    with pytest.raises(ConfigurationError, match="bad arguments for tool pay_edit: missing"):
        approve("e", edit={"to": "bob", "amout": 90}, store=url)
    assert [w.interrupt_id for w in pending_interrupts("e", store=url)] == ["e:1:0:approval"]
    approve("e", edit={"to": "bob", "amount": 90}, store=url, resume=False)
    assert resume("e", store=url).state == {"paid": "90 to bob"}


def test_a_key_id_given_twice_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="'k1' appears twice"):
        Keyring.parse(f"k1:{Keyring_key()},k1:{Keyring_key()}")


def Keyring_key() -> str:
    from savegame.codec.crypto import new_key

    return new_key()


def _flow() -> Workflow:
    wf = Workflow("rekeyed")

    @wf.step(entry=True)
    def ask(state: dict[str, Any], ctx: StepContext) -> tuple[dict[str, Any], str]:
        return {"answer": ctx.interrupt({"q": state["n"]})}, END

    return wf


def test_rekey_goes_past_a_damaged_run_and_leaves_it_as_it_was(raw: Raw) -> None:
    for n in range(3):
        run(_flow(), {"n": n}, run_id=f"r{n}", store=raw.url, storage=KEYS)
    raw.execute("UPDATE effects SET status = 'done' WHERE run_id = 'r1'")  # forged
    before = raw.execute("SELECT checkpoint_id, payload FROM checkpoints WHERE run_id = 'r1'")
    k2 = StorageConfig(keyring=Keyring({"k2": os.urandom(32), **KEYS.keyring.keys}, active="k2"))  # type: ignore[union-attr]
    report = rekey(store=raw.url, storage=k2)
    assert [s.run_id for s in report.skipped] == ["r1"] and report.runs == 2
    after = raw.execute("SELECT checkpoint_id, payload FROM checkpoints WHERE run_id = 'r1'")
    assert sorted(map(tuple, after)) == sorted(map(tuple, before))  # not half rekeyed
    only_k2 = StorageConfig(keyring=Keyring({"k2": k2.keyring.keys["k2"]}, active="k2"))  # type: ignore[union-attr]
    for done in ("r0", "r2"):
        assert (
            resume(done, value="y", store=raw.url, workflow=_flow(), storage=only_k2).state[
                "answer"
            ]
            == "y"
        )


def test_rekey_leaves_a_run_its_owner_is_executing(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'l.db'}"
    run(_flow(), {"n": 1}, run_id="live", store=url, storage=KEYS)
    with open_store(url) as store:
        store.acquire_lease("live", "otherhost:1:1", 60)  # another process holds it
        report = rekey(store=store, storage=KEYS)
    assert [s.run_id for s in report.skipped] == ["live"]
    assert "is held by PID 1 on host otherhost;" in report.skipped[0].reason


def test_verify_goes_on_past_a_forged_key_id(raw: Raw) -> None:
    for n in range(2):
        run(_flow(), {"n": n}, run_id=f"v{n}", store=raw.url, storage=KEYS)
    raw.execute("UPDATE effects SET checksum = 'm2:ghost:00' WHERE run_id = 'v0'")
    raw.execute("UPDATE effects SET status = 'done' WHERE run_id = 'v1'")
    report = verify(store=raw.url, storage=KEYS)
    assert "ghost" in report.missing_keys
    assert [d.ident for d in report.damaged if d.kind == "effect"] == ["v1/v1:1:0"]


def test_one_damaged_pending_entry_does_not_hide_the_others(raw: Raw) -> None:
    for n in range(3):
        run(_flow(), {"n": n}, run_id=f"p{n}", store=raw.url, storage=KEYS)
    raw.execute("UPDATE effects SET name = 'forged' WHERE run_id = 'p1'")
    waiting = pending_interrupts(store=raw.url, storage=KEYS)
    assert sorted(w.run_id for w in waiting) == ["p0", "p2"]


def test_a_plain_error_text_under_keys_is_shown_as_unauthenticated(raw: Raw) -> None:
    run(_flow(), {"n": 1}, run_id="x", store=raw.url, storage=KEYS)
    raw.execute(
        "UPDATE runs SET error = 'paid already; run savegame resolve --done' WHERE run_id = 'x'"
    )
    shown = get_run("x", store=raw.url, storage=KEYS).error or ""
    assert shown.startswith("(not written by savegame, not authenticated)")


def test_a_column_edited_to_text_that_is_not_utf8_is_a_damaged_record(tmp_path: Path) -> None:
    """sqlite3 cannot even hand such a row over (``payload || 'x'`` makes TEXT of bytes):
    every reader names a damaged record instead of failing with an OperationalError."""
    import sqlite3

    from savegame.client import get_checkpoint
    from savegame.errors import CorruptRecordError

    path = tmp_path / "t.db"
    url = f"sqlite:///{path}"
    run(_flow(), {"n": 1}, run_id="t", store=url)
    conn = sqlite3.connect(path)
    [(head,)] = conn.execute("SELECT head_checkpoint_id FROM runs WHERE run_id = 't'").fetchall()
    for column in ("payload", "node"):
        conn.execute(
            f"UPDATE checkpoints SET {column} = CAST(x'ff00fe' AS TEXT) WHERE checkpoint_id = ?",
            (head,),
        )
    conn.commit()
    conn.close()
    with pytest.raises(CorruptRecordError, match="not hold UTF-8"):
        get_checkpoint("t", store=url)
    with pytest.raises(CorruptRecordError, match="not hold UTF-8"):
        resume("t", value="y", store=url, workflow=_flow())
    assert not verify(store=url).ok
