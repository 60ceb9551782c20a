"""savegame diff through the real entry point: people's lines and --json."""

from __future__ import annotations

from typing import Any

import savegame


def _ids(store: str, run_id: str) -> list[str]:
    return [h.checkpoint_id for h in reversed(savegame.client.history(run_id, store=store))]


def test_diff_shows_changed_values_and_a_list_that_grew(cli: Any, ref: str, store: str) -> None:
    assert (
        cli("run", ref, "--input", '{"until": 3}', "--store", store, "--run-id", "r").exit_code == 0
    )
    ids = _ids(store, "r")
    out = cli("diff", ids[1], ids[3], "--store", store)
    assert out.exit_code == 0, out.stderr
    lines = out.stdout.splitlines()
    assert f"from {ids[1]} (run r, step 1, after tick, running)" in lines
    assert "~ n: 1 -> 3" in lines
    assert "+ seen: +2 items" in lines
    assert "    [1] 2" in lines and "    [2] 3" in lines
    assert "  status: running -> completed" in lines

    same = cli("diff", "r", ids[3], "--store", store)
    assert same.exit_code == 0 and "states are equal" in same.stdout


def test_diff_json_and_context(cli: Any, ref: str, store: str) -> None:
    assert (
        cli("run", ref, "--input", '{"until": 2}', "--store", store, "--run-id", "r").exit_code == 0
    )
    ids = _ids(store, "r")
    out = cli("diff", ids[1], "r", "--store", store, "--json", "--context", "5")
    assert out.exit_code == 0, out.stderr
    doc = out.json()
    assert doc["a"]["checkpoint_id"] == ids[1] and doc["b"]["checkpoint_id"] == ids[2]
    changes = {c["pointer"]: c for c in doc["changes"]}
    assert changes["/n"] == {"path": ["n"], "pointer": "/n", "kind": "changed", "old": 1, "new": 2}
    assert changes["/seen"]["kind"] == "grew"
    assert (changes["/seen"]["at"], changes["/seen"]["count"]) == (1, 1)
    assert changes["/seen/0"]["kind"] == "unchanged"  # context: the item before the new one
    assert changes["/until"]["kind"] == "unchanged"


def test_diff_cuts_long_text_with_its_length(cli: Any, tmp_path: Any, store: str) -> None:
    flow = tmp_path / "long.py"
    flow.write_text(
        "from savegame import END, Workflow\n"
        "wf = Workflow('long-text')\n"
        "@wf.step(entry=True)\n"
        "def one(state, ctx):\n"
        "    return {'text': 'a' * 5000, 'n': state.get('n', 0) + 1}, END\n"
    )
    assert cli("run", f"{flow}:wf", "--store", store, "--run-id", "r").exit_code == 0
    ids = _ids(store, "r")
    out = cli("diff", ids[0], ids[1], "--store", store)
    assert out.exit_code == 0, out.stderr
    line = next(li for li in out.stdout.splitlines() if li.startswith("+ text"))
    assert "(5,000 chars)" in line and len(line) < 120


def test_diff_of_an_unknown_id_is_one_line(cli: Any, store: str) -> None:
    out = cli("diff", "nope", "nada", "--store", store)
    assert out.exit_code != 0
    assert "nope" in out.stderr and "Traceback" not in out.stderr
