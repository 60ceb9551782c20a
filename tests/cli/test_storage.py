"""verify / prune / stats / rekey / keygen, and resume --from, against real SQLite files."""

from __future__ import annotations

import base64
import re
import textwrap
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import savegame
from savegame.cli.common import parse_duration
from savegame.cli.errors import UsageError

from .test_errors import assert_one_error_line

NOTES = textwrap.dedent(
    """
    from savegame import END, Workflow

    wf = Workflow("notes")


    @wf.step(entry=True)
    def write(state, ctx):
        n = state.get("n", 0) + 1
        # Longer than INLINE_MAX (16 KiB), so a blob even in a delta; different at every step.
        return {"n": n, "page": f"page {n} " * 2500}, ("write" if n < state["until"] else END)
    """
)


@pytest.fixture
def notes(tmp_path: Path) -> str:
    path = tmp_path / "notes_flow.py"
    path.write_text(NOTES)
    return f"{path}:wf"


def start(cli: Any, ref: str, store: str, *extra: str, until: int = 4) -> dict[str, Any]:
    out = cli("run", ref, "--input", f'{{"until": {until}}}', "--store", store, "--json", *extra)
    assert out.exit_code == 0, out.stderr
    result: dict[str, Any] = out.json()
    return result


def damage(url: str, checkpoint_id: str) -> None:
    """Flip the payload's last byte in place, keeping the stored checksum."""
    store = savegame.open_store(url)
    try:
        record = store.get_checkpoint(checkpoint_id)
        payload = bytearray(record.payload)
        payload[-1] ^= 0xFF
        store.rewrite(records=[replace(record, payload=bytes(payload))])
    finally:
        store.close()


def totals(cli: Any, store: str) -> dict[str, Any]:
    out = cli("stats", "--store", store, "--json")
    assert out.exit_code == 0, out.stderr
    result: dict[str, Any] = out.json()["totals"]
    return result


# -- verify -----------------------------------------------------------------------


def test_verify_a_sound_store(cli: Any, notes: str, store: str) -> None:
    start(cli, notes, store)
    start(cli, notes, store)
    out = cli("verify", "--store", store)
    assert (out.exit_code, out.stderr) == (0, "")  # no progress bar without a terminal
    assert "verified 2 runs: 10 checkpoints" in out.stdout and "no damage" in out.stdout
    report = cli("verify", "--store", store, "--json").json()
    assert report["ok"] is True
    assert (report["runs"], report["checkpoints"], report["damaged"]) == (2, 10, [])
    assert report["blobs"] >= 4


def test_verify_names_a_damaged_checkpoint_and_exits_9(cli: Any, notes: str, store: str) -> None:
    bad = start(cli, notes, store, "--run-id", "bad")
    start(cli, notes, store, "--run-id", "good")
    damage(store, bad["checkpoint_id"])

    out = cli("verify", "--store", store)
    assert_one_error_line(out, "1 damaged record in 1 run")
    assert out.exit_code == 9
    row = next(line for line in out.stdout.splitlines() if bad["checkpoint_id"] in line)
    assert row.split()[:3] == ["checkpoint", bad["checkpoint_id"], "bad"]
    assert "checksum mismatch" in row

    report = cli("verify", "--store", store, "--json")
    assert report.exit_code == 9
    assert report.json()["damaged"] == [
        {
            "kind": "checkpoint",
            "id": bad["checkpoint_id"],
            "run_id": "bad",
            "reason": f"record {bad['checkpoint_id']} is damaged: checksum mismatch",
        }
    ]
    assert cli("verify", "--run", "good", "--store", store).exit_code == 0
    # Reading the damaged record anywhere else exits with the same code.
    assert_one_error_line(cli("show", "bad", "--store", store), bad["checkpoint_id"], "damaged")


def test_verify_an_unknown_run(cli: Any, store: str) -> None:
    out = cli("verify", "--run", "nope", "--store", store)
    assert_one_error_line(out, "nope")
    assert out.exit_code == 3


# -- resume --from ------------------------------------------------------------------


def history(cli: Any, run_id: str, store: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = cli("history", run_id, "--store", store, "--json").json()
    return items


def test_resume_from_an_earlier_checkpoint_of_a_failed_run(
    cli: Any, ref: str, store: str, workflow_file: Path
) -> None:
    (workflow_file.parent / "FAIL").touch()
    assert cli("run", ref, "--input", '{"until": 3}', "--run-id", "r", "--store", store).exit_code
    (workflow_file.parent / "FAIL").unlink()
    first = history(cli, "r", store)[-1]
    assert first["step"] == 0

    out = cli("resume", "r", "--from", first["checkpoint_id"], "--store", store, "--json")
    assert out.exit_code == 0, out.stderr
    assert (out.json()["status"], out.json()["state"]["n"]) == ("completed", 3)
    # The new branch starts at step 0: its step-1 checkpoint hangs off the input checkpoint.
    after = history(cli, "r", store)
    assert len(after) == 3 + 3
    newest_step_one = next(h for h in after if h["step"] == 1)
    assert newest_step_one["parent_id"] == first["checkpoint_id"]


def test_resume_from_works_around_a_damaged_head(
    cli: Any, ref: str, store: str, workflow_file: Path
) -> None:
    (workflow_file.parent / "FAIL").touch()
    cli("run", ref, "--input", '{"until": 3}', "--run-id", "r", "--store", store)
    (workflow_file.parent / "FAIL").unlink()
    head, before = history(cli, "r", store)[:2]
    damage(store, head["checkpoint_id"])

    stuck = cli("resume", "r", "--store", store)
    assert_one_error_line(stuck, head["checkpoint_id"])
    assert stuck.exit_code == 9
    out = cli("resume", "r", "--from", before["checkpoint_id"], "--store", store, "--json")
    assert out.exit_code == 0, out.stderr
    assert (out.json()["status"], out.json()["step"]) == ("completed", 3)


def test_resume_from_an_unknown_checkpoint(cli: Any, ref: str, store: str) -> None:
    start(cli, ref, store, "--run-id", "r", until=2)
    out = cli("resume", "r", "--from", "nope", "--store", store)
    assert out.exit_code != 0
    assert_one_error_line(out)


# -- prune and stats ----------------------------------------------------------------


def test_prune_dry_run_then_prune(
    cli: Any, notes: str, shop: Path, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SAVEGAME_KEYFRAME_EVERY", "1")  # no delta bases to keep
    start(cli, notes, store, "--run-id", "a", until=5)
    start(cli, notes, store, "--run-id", "b", until=5)
    waiting = cli("run", f"{shop}:ask", "--run-id", "w", "--store", store, "--json")
    assert waiting.json()["status"] == "interrupted"
    before = totals(cli, store)
    assert (before["runs"], before["checkpoints"]) == (3, 6 + 6 + 2)

    dry = cli("prune", "--keep-last", "2", "--dry-run", "--store", store, "--json").json()
    assert dry["dry_run"] is True
    assert (len(dry["checkpoints"]), dry["runs"], dry["exempt_runs"]) == (8, [], ["w"])
    assert dry["checkpoint_bytes"] > 0
    assert totals(cli, store) == before
    human = cli("prune", "--keep-last", "2", "--dry-run", "--store", store)
    assert "would delete  0 finished runs, 8 checkpoints" in human.stdout
    assert "1 run waiting for a person" in human.stdout

    done = cli("prune", "--keep-last", "2", "--store", store)
    assert done.exit_code == 0, done.stderr
    assert "deleted  0 finished runs, 8 checkpoints" in done.stdout
    after = totals(cli, store)
    assert after["checkpoints"] == before["checkpoints"] - 8
    assert after["payload_bytes"] < before["payload_bytes"]
    assert (after["blobs"], after["blob_bytes"]) < (before["blobs"], before["blob_bytes"])
    assert cli("verify", "--store", store).exit_code == 0
    assert cli("show", "a", "--store", store, "--json").json()["step"] == 5

    gone = cli("prune", "--finished-for", "0s", "--store", store, "--json").json()
    assert (sorted(gone["runs"]), gone["dry_run"]) == (["a", "b"], False)
    assert gone["blobs"] > 0
    assert totals(cli, store)["runs"] == 1
    forced = cli("prune", "--finished-for", "0s", "--include-waiting", "--store", store, "--json")
    assert forced.json()["exempt_runs"] == []


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--ttl", "3x"], "--ttl '3x' is not a duration"),
        (["--ttl", "1.5h"], "--ttl '1.5h' is not a duration"),
        (["--finished-for", "7"], "--finished-for '7' is not a duration"),
        (["--finished-for", "-1d"], "--finished-for '-1d' is not a duration"),
        (["--dry-run"], "say what to delete"),
    ],
)
def test_prune_refuses_bad_rules(cli: Any, store: str, args: list[str], fragment: str) -> None:
    out = cli("prune", *args, "--store", store)
    assert_one_error_line(out, fragment)
    assert out.exit_code == 2


def test_prune_keep_last_must_be_positive(cli: Any, store: str) -> None:
    assert cli("prune", "--keep-last", "0", "--store", store).exit_code == 2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30s", timedelta(seconds=30)),
        ("15m", timedelta(minutes=15)),
        ("12h", timedelta(hours=12)),
        ("7d", timedelta(days=7)),
        ("2w", timedelta(weeks=2)),
        ("1d12h", timedelta(days=1, hours=12)),
        ("0s", timedelta()),
    ],
)
def test_durations(text: str, expected: timedelta) -> None:
    assert parse_duration(text, "--ttl", at_most=LIMIT) == expected


def test_an_empty_duration_is_refused() -> None:
    with pytest.raises(UsageError, match="is not a duration"):
        parse_duration("", "--ttl", at_most=LIMIT)


LIMIT = savegame.maintenance.RetentionPolicy.MAX_AGE


@pytest.mark.parametrize(
    ("option", "text"),
    [
        ("--finished-for", "99999999999d"),  # was OverflowError: Python int too large
        ("--ttl", "1000000d"),  # a timedelta, but now - ttl was: date value out of range
        ("--ttl", "36500d1s"),
        ("--ttl", "9" * 5000 + "s"),  # was ValueError: int() past 4,300 digits
    ],
    ids=["overflow", "before-year-1", "just-over", "5000-digits"],
)
def test_a_duration_past_the_limit_is_a_usage_error(
    cli: Any, store: str, option: str, text: str
) -> None:
    out = cli("prune", option, text, "--store", store)
    assert_one_error_line(out, option, "is too long: at most 36500d (100 years)")
    assert out.exit_code == 2
    assert len(out.stderr) < 200
    assert parse_duration("0036500d", "--ttl", at_most=LIMIT) == LIMIT  # the limit itself is fine


def test_a_duration_past_the_limit_in_a_real_process(tmp_path: Path, proc: Any) -> None:
    store = f"sqlite:///{tmp_path / 'p.db'}"
    out = proc("prune", "--finished-for", "99999999999d", "--store", store, cwd=tmp_path)
    assert (out.returncode, out.stdout) == (2, "")
    assert out.stderr == (
        "error: --finished-for '99999999999d' is too long: at most 36500d (100 years)\n"
    )


def test_stats_json_fields(cli: Any, notes: str, store: str) -> None:
    start(cli, notes, store, "--run-id", "small", "--thread", "t1", until=2)
    start(cli, notes, store, "--run-id", "large", "--thread", "t2", until=6)
    report = cli("stats", "--store", store, "--json").json()
    t = report["totals"]
    assert set(t) == {
        "runs",
        "checkpoints",
        "payload_bytes",
        "blobs",
        "blob_bytes",
        "effects",
        "file_bytes",
    }
    assert (t["runs"], t["checkpoints"], t["effects"]) == (2, 3 + 7, 0)
    assert t["blobs"] == 6 and t["blob_bytes"] > 0  # zstd shrinks the repeated pages
    assert t["file_bytes"] > t["payload_bytes"] > 0
    assert [r["run_id"] for r in report["runs"]] == ["large", "small"]  # largest first
    large = report["runs"][0]
    assert large == {
        "run_id": "large",
        "thread_id": "t2",
        "status": "completed",
        "checkpoints": 7,
        "payload_bytes": large["payload_bytes"],
        "effects": 0,
        "effect_bytes": 0,
    }
    only = cli("stats", "--thread", "t1", "--store", store, "--json").json()["runs"]
    assert [r["run_id"] for r in only] == ["small"]
    assert len(cli("stats", "--limit", "1", "--store", store, "--json").json()["runs"]) == 1
    human = cli("stats", "--store", store).stdout
    assert "KiB" in human and "large" in human and "t2" in human


# -- keys ---------------------------------------------------------------------------


def test_keygen_prints_a_key_in_the_savegame_keys_form(cli: Any) -> None:
    first, second = cli("keygen").stdout.strip(), cli("keygen", "--id", "k2").stdout.strip()
    assert re.fullmatch(r"\d{4}-\d{2}-\d{2}:[A-Za-z0-9+/]{43}=", first)
    kid, _, key = second.partition(":")
    assert kid == "k2" and len(base64.b64decode(key)) == 32
    assert first.partition(":")[2] != key
    ring = savegame.codec.crypto.Keyring.parse(f"{second},{first}")
    assert ring.active == "k2"
    assert_one_error_line(cli("keygen", "--id", "a:b"), "--id 'a:b'")


def test_rekey_encrypts_a_store_then_reading_needs_the_keys(
    cli: Any, ref: str, shop: Path, store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = start(cli, ref, store, "--run-id", "r", until=3)
    cli("run", f"{shop}:ask", "--run-id", "w", "--store", store)
    assert_one_error_line(cli("rekey", "--store", store), "rekey needs a keyring", "SAVEGAME_KEYS")

    key = cli("keygen", "--id", "k1").stdout.strip()
    monkeypatch.setenv("SAVEGAME_KEYS", key)
    # A plain store carries no authentication: rekey signs it only when told to adopt it.
    refused = cli("rekey", "--store", store, "--json")
    assert refused.exit_code == 9
    assert {s["run_id"] for s in refused.json()["skipped"]} == {"r", "w"}
    assert "savegame rekey --adopt" in refused.json()["skipped"][0]["reason"]
    out = cli("rekey", "--adopt", "--store", store, "--json")
    assert out.exit_code == 0, out.stderr
    assert out.json() == {
        "key_id": "k1", "runs": 2, "checkpoints": 4 + 2, "blobs": 0, "effects": 1, "schedules": 0,
        "collected": 0,
        "adopted": 2 + 4 + 2 + 1, "skipped": [],
    }  # fmt: skip
    human = cli("rekey", "--run", "r", "--store", store)
    assert "re-encrypted 1 run: 4 checkpoints, 0 blobs, 0 journal entries under key 'k1'" in (
        human.stdout
    )
    assert cli("verify", "--store", store).exit_code == 0
    shown = cli("show", "r", "--store", store, "--json")
    assert shown.json()["state"] == plain["state"]

    monkeypatch.delenv("SAVEGAME_KEYS")
    locked = cli("show", "r", "--store", store)
    assert_one_error_line(locked, plain["checkpoint_id"], "key 'k1'", "SAVEGAME_KEYS")
    # A missing key is a setup problem, not damage: one error line, not exit 9.
    missing = cli("verify", "--store", store)
    assert missing.exit_code == 1
    assert_one_error_line(missing, "key 'k1'", "SAVEGAME_KEYS")
